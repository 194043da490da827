package jira

import (
	"strings"

	"factory/internal/writeback"
)

// Doc is an Atlassian Document Format document (version 1).
type Doc struct {
	Version int    `json:"version"`
	Type    string `json:"type"`
	Content []Node `json:"content"`
}

// Node is an ADF node: a block (paragraph, blockquote) or inline text.
type Node struct {
	Type    string `json:"type"`
	Text    string `json:"text,omitempty"`
	Marks   []Mark `json:"marks,omitempty"`
	Content []Node `json:"content,omitempty"`
}

// Mark is a text's mark: strong, code, or a link (Attrs.Href).
type Mark struct {
	Type  string     `json:"type"`
	Attrs *LinkAttrs `json:"attrs,omitempty"`
}

// LinkAttrs are a link mark's.
type LinkAttrs struct {
	Href string `json:"href"`
}

// text is a text node; nil for an empty text (ADF has none).
func text(s string, marks ...Mark) []Node {
	if s == "" {
		return nil
	}
	return []Node{{Type: "text", Text: s, Marks: marks}}
}

func para(parts ...[]Node) Node {
	var content []Node
	for _, p := range parts {
		content = append(content, p...)
	}
	return Node{Type: "paragraph", Content: content}
}

var strong = Mark{Type: "strong"}

func link(href string) Mark { return Mark{Type: "link", Attrs: &LinkAttrs{Href: href}} }

// ADF is a report as a Jira comment: the state, a link to the run, its
// follow-ups, and at the end the outcome, the agent's last message (a
// quote, line by line), the branch and the pull requests. The run's words
// are text nodes: they cannot make structure of their own.
func ADF(rep *writeback.Report) Doc {
	d := Doc{Version: 1, Type: "doc"}
	add := func(n Node) { d.Content = append(d.Content, n) }
	add(para(text(writeback.Mark(rep.State)+" "), text(rep.Title, strong), text(" · "+string(rep.State))))
	add(para(text("Run "+rep.RunID, link(rep.URL))))
	for _, f := range rep.FollowUps {
		add(para(text("↪ Follow-up: " + f)))
	}
	if rep.Outcome != "" {
		add(para(text("Outcome:", strong), text(" "+rep.Outcome)))
	}
	if rep.Final != "" {
		var content []Node
		for i, line := range strings.Split(rep.Final, "\n") {
			if i > 0 {
				content = append(content, Node{Type: "hardBreak"})
			}
			content = append(content, text(line)...)
		}
		add(Node{Type: "blockquote", Content: []Node{{Type: "paragraph", Content: content}}})
	}
	if rep.Branch != "" {
		add(para(text("Branch: ", strong), text(rep.Branch, Mark{Type: "code"})))
	}
	for _, pr := range rep.PullRequests {
		status := ""
		if pr.Status != "" {
			status = " (" + pr.Status + ")"
		}
		add(para(text("Pull request: ", strong), text(pr.Title, link(pr.URL)), text(status)))
	}
	return d
}

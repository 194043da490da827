package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// The demo agent as a judge (docs/measure-and-improve.md): it does no AI,
// so a scorer whose rubric (or a benchmark task whose success criteria)
// holds "demo-score:" lines scripts its answer. Each line is
// "demo-score: LABEL" or "demo-score: LABEL if TEXT"; the first whose TEXT
// is in the rest of the prompt (the run being judged: its prompt and what
// it did), or that has no condition, is the answer, as the one-line JSON
// object judges end with.

var demoScoreLine = regexp.MustCompile(`(?m)^[ \t>*-]*demo-score:[ \t]*(\S+)(?:[ \t]+if[ \t]+(.+?))?[ \t]*$`)

// demoScore is the demo judge's answer to a prompt, if the prompt
// scripts one.
func demoScore(prompt string) (string, bool) {
	rules := demoScoreLine.FindAllStringSubmatch(prompt, -1)
	if len(rules) == 0 {
		return "", false
	}
	material := demoScoreLine.ReplaceAllString(prompt, "")
	for _, r := range rules {
		label, cond := r[1], strings.Trim(strings.TrimSpace(r[2]), `"`)
		if cond == "" || strings.Contains(material, cond) {
			why := "scripted: no condition"
			if cond != "" {
				why = "scripted: the run says " + strconv.Quote(cond)
			}
			b, _ := json.Marshal(map[string]string{"classification": label, "reason": why + " (the demo agent does no AI)"})
			return string(b), true
		}
	}
	return "", false
}

// regressionsSection is the "## Regressions addressed" section of a
// prompt (a self-improvement run's), to go into the pull request the demo
// agent opens: from its heading to the next heading of its level.
func regressionsSection(prompt string) string {
	i := strings.Index(prompt, "## Regressions addressed")
	if i < 0 {
		return ""
	}
	rest := prompt[i:]
	if j := strings.Index(rest[3:], "\n## "); j >= 0 {
		rest = rest[:j+3]
	}
	return strings.TrimSpace(rest)
}

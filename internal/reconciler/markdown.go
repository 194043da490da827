package reconciler

import (
	"fmt"
	"io"
	"strings"

	"factory/internal/schema"
)

// Markdown writes a checked revision's plan as Markdown: a verdict, its
// errors and warnings at file:line, the changes, and what changed
// triggers would have done to recent deliveries. It is the summary of the
// check a pull request that changes a factory's definition gets, and
// reconcile --dry-run --output markdown (for a CI job's summary).
func Markdown(w io.Writer, p *Plan, impacts []Impact) {
	fmt.Fprintf(w, "## Factory %s at revision %s\n\n", mdText(p.Factory), mdCode(p.Revision))
	errs, warns := p.Diagnostics.Errors(), p.Diagnostics.Warnings()
	if !p.Valid() {
		fmt.Fprintf(w, "❌ **Invalid**: %s, %s. Nothing would be applied.\n", count(len(errs), "error"), count(len(warns), "warning"))
	} else {
		fmt.Fprintf(w, "✅ **Valid**: %s; %s.\n", Summary(p), count(len(warns), "warning"))
	}
	mdDiagnostics(w, "Errors", errs)
	mdDiagnostics(w, "Warnings", warns)
	if p.Valid() {
		mdChanges(w, p)
	}
	if len(impacts) > 0 {
		fmt.Fprint(w, "\n### On recent deliveries\n\n")
		for _, im := range impacts {
			switch {
			case im.Deliveries == 0:
				fmt.Fprintf(w, "- automation `%s` on `%s`: no stored deliveries to replay\n", im.Automation, im.WebhookUID)
			case im.New:
				fmt.Fprintf(w, "- automation `%s` on `%s`: would have triggered %d of the last %d\n", im.Automation, im.WebhookUID, im.After, im.Deliveries)
			default:
				fmt.Fprintf(w, "- automation `%s` on `%s`: would have triggered %d of the last %d, was %d\n", im.Automation, im.WebhookUID, im.After, im.Deliveries, im.Before)
			}
		}
	}
}

// Summary counts a plan's changes: "1 to create, 0 to update, 0 to
// delete, 4 unchanged", or "no changes".
func Summary(p *Plan) string {
	if !p.HasChanges() {
		return "no changes"
	}
	counts := map[string]int{}
	for _, c := range p.Changes {
		counts[c.Action]++
	}
	return fmt.Sprintf("%d to create, %d to update, %d to delete, %d unchanged", counts[ActionCreate], counts[ActionUpdate], counts[ActionDelete], counts[ActionNoop])
}

func mdDiagnostics(w io.Writer, title string, ds schema.Diagnostics) {
	if len(ds) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### %s\n\n", title)
	for _, d := range ds {
		at := d.File
		if d.Line > 0 {
			at = fmt.Sprintf("%s:%d:%d", d.File, d.Line, d.Column)
		}
		msg := d.Message
		if d.Path != "" {
			msg = d.Path + ": " + msg
		}
		fmt.Fprintf(w, "- %s %s\n", mdCode(at), mdText(msg))
	}
}

func mdChanges(w io.Writer, p *Plan) {
	if !p.HasChanges() {
		fmt.Fprint(w, "\nNo changes: the state matches this revision.\n")
		return
	}
	fmt.Fprint(w, "\n### Changes\n\n| | kind | name | UID | keys |\n| --- | --- | --- | --- | --- |\n")
	for _, s := range p.SettingsChanged {
		fmt.Fprintf(w, "| ~ | factory.yaml | %s | | |\n", mdText(s))
	}
	for _, c := range p.Changes {
		if c.Action == ActionNoop {
			continue
		}
		sign := map[string]string{ActionCreate: "+", ActionUpdate: "~", ActionDelete: "-"}[c.Action]
		uid := "(known after apply)"
		if c.UID != nil {
			uid = *c.UID
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", sign, c.Kind, mdText(c.Name), mdCode(uid), mdText(strings.Join(c.Keys, ", ")))
	}
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// mdText keeps a text on one line of a table or a list, with no Markdown
// of its own.
func mdText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "`", "'", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`).Replace(s)
}

func mdCode(s string) string {
	return "`" + strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "`", "'") + "`"
}

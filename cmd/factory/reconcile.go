package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"factory"

	"github.com/spf13/cobra"

	"factory/client"
	"factory/internal/reconciler"
	"factory/internal/reconciler/gitsource"
	"factory/internal/schema"
)

type reconcileOpts struct {
	source, ref, name, output string
	dryRun, detailedExitCode  bool
	failOnWarnings, strict    bool
	pathPrefix                string
	prefixSet                 bool
}

func (a *app) reconcileCmd() *cobra.Command {
	o := &reconcileOpts{}
	cmd := &cobra.Command{
		Use:   "reconcile --source DIR|GIT_URL [--ref REF] [--dry-run]",
		Short: "Validate a factory repository and apply it (or, with --dry-run, show the plan)",
		Long: `Validate every file of a factory repository against the embedded JSON Schemas,
compare it with the state and print the plan: + create, ~ update (with the changed
keys), - delete. Without --dry-run the revision is applied as one transaction and the
UIDs of new webhooks are printed; a revision with any error is not applied at all.

--dry-run writes nothing. It works with no state (a pull-request check on a clean
machine: every webhook is a create and webhook UIDs can only be warned about), against
a store (--data) or against a running server (--server), where it checks everything.

In a pull-request check, run it against the live server's state with a read-only key
(factory apikeys create pr-check --scope read), so that a webhook UID that exists nowhere
is an error, and add --fail-on-warnings so that nothing it could not check passes:

  factory reconcile --dry-run --source . --server https://factory.example.com \
    --api-key "$FACTORY_READ_KEY" --fail-on-warnings --output github

With --output github, file paths are relative to the git repository's root (found from
the source directory), so annotations land on the right files; --path-prefix overrides.

--strict checks portability to the product: each use of this project's extensions to the
v1alpha1 format (the flat automations/<name>.md layout, title and config, generated
webhook secrets, the extra signature schemes, webhookBaseUrl, eventSource, MCP servers by
command or url, a tree without schemaVersion) is an error (docs/definitions.md).

Exit codes: 0 valid; 1 invalid definitions or any error (with --fail-on-warnings, any
warning too); with --detailed-exitcode, 2 when valid and there are changes.`,
		Example: `  factory reconcile --dry-run --source . --output github   # in a pull-request check
  factory reconcile --dry-run --source examples/factory --server "$FACTORY_SERVER" --fail-on-warnings
  factory reconcile --dry-run --source examples/v1alpha1 --strict   # stays portable to the product
  factory reconcile --source examples/factory --name example`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.prefixSet = cmd.Flags().Changed("path-prefix")
			return a.reconcile(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.source, "source", "", "the factory repository: a directory or a git URL (required)")
	f.StringVar(&o.ref, "ref", "", "branch, tag or full commit SHA of a git source (default: the remote's HEAD)")
	f.StringVar(&o.name, "name", "", "the factory's name (default: the factory already applied from this source, else the directory's name)")
	f.BoolVar(&o.dryRun, "dry-run", false, "validate and print the plan; write nothing")
	f.BoolVar(&o.detailedExitCode, "detailed-exitcode", false, "exit 2 when the revision is valid and has changes")
	f.BoolVar(&o.failOnWarnings, "fail-on-warnings", false, "exit 1 when there is any warning (references that could not be checked included)")
	f.BoolVar(&o.strict, "strict", false, "report each use of this project's extensions to the v1alpha1 format as an error")
	f.StringVar(&o.pathPrefix, "path-prefix", "", "prefix of the file paths in annotations (default: the source's path within its git repository)")
	_ = cmd.MarkFlagRequired("source")
	outputFlag(cmd, &o.output, "text", "json", "github", "markdown")
	return cmd
}

func sourceOf(o *reconcileOpts) (reconciler.Source, error) {
	if gitsource.IsGitURL(o.source) {
		return namedSource{&gitsource.Source{URL: o.source, Ref: o.ref}, repoName(o.source)}, nil
	}
	if o.ref != "" {
		return nil, errors.New("--ref applies to git sources; this source is a directory")
	}
	return reconciler.DirSource{Root: o.source}, nil
}

// factoryName picks the factory a source is reconciled into: --name, else
// the factory already applied from the same source, else the directory's
// name made into a valid name.
func factoryName(flag string, src reconciler.Source, known []*factory.Factory) (string, error) {
	if flag != "" {
		if !reconciler.ValidName(flag) {
			return "", fmt.Errorf("--name %q must be lowercase letters, digits and '-', at most 63", flag)
		}
		return flag, nil
	}
	for _, f := range known {
		if f.Source == src.String() {
			return f.Name, nil
		}
	}
	base := filepath.Base(src.String())
	if n, ok := src.(namedSource); ok {
		base = n.base
	}
	base = strings.ToLower(base)
	base = strings.Trim(regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(base, "-"), "-")
	if !reconciler.ValidName(base) {
		return "", fmt.Errorf("cannot name the factory after %q: pass --name", src.String())
	}
	return base, nil
}

func (a *app) reconcile(cmd *cobra.Command, o *reconcileOpts) error {
	src, err := sourceOf(o)
	if err != nil {
		return err
	}
	if o.dryRun {
		return a.dryRun(cmd, o, src)
	}
	if c := a.remote(); c != nil {
		return a.syncRemote(cmd, o, src, c)
	}
	ap, name, err := a.applierFor(o.name, src)
	if err != nil {
		return err
	}
	if o.strict {
		// Refuse before applying: a strict apply applies a portable tree only.
		c, err := reconciler.Check(cmd.Context(), src, name, ap.Store)
		if err != nil {
			ap.Store.Close()
			return err
		}
		if c.Strict() > 0 {
			ap.Store.Close()
			return a.report(o, c.Plan, false)
		}
	}
	defer ap.Store.Close()
	s := ap.Store
	c, _, err := ap.Sync(cmd.Context(), name, src)
	if err != nil {
		return err
	}
	if c.Plan.Valid() {
		// The UIDs of new webhooks and automations are known now.
		st, err := s.FactoryState(name)
		if err != nil {
			return err
		}
		fillUIDs(c.Plan, st)
	}
	return a.report(o, c.Plan, false)
}

func (a *app) dryRun(cmd *cobra.Command, o *reconcileOpts, src reconciler.Source) error {
	var reader reconciler.StateReader
	var known []*factory.Factory
	v, err := a.view()
	switch {
	case errors.Is(err, errNoStore):
		// No state at all: a stateless dry-run.
	case err != nil:
		return err
	default:
		defer v.Close()
		sts, err := v.Statuses(cmd.Context())
		if err != nil {
			return err
		}
		for _, st := range sts {
			known = append(known, &factory.Factory{Name: st.Name, Source: st.Source})
		}
		reader = v
	}
	name, err := factoryName(o.name, src, known)
	if err != nil {
		return err
	}
	c, err := reconciler.Check(cmd.Context(), src, name, reader)
	if err != nil {
		return err
	}
	if o.strict {
		c.Strict()
	}
	var impacts []reconciler.Impact
	if v != nil && c.Plan.Valid() {
		// What the changed filters would have done to recent deliveries.
		if impacts, err = reconciler.MeasureImpact(c, v); err != nil {
			return fmt.Errorf("measure the impact on recent deliveries: %w", err)
		}
	}
	return a.report(o, c.Plan, true, impacts...)
}

func fillUIDs(p *reconciler.Plan, st *factory.State) {
	for i, c := range p.Changes {
		if c.UID != nil {
			continue
		}
		var uid string
		if c.Kind == reconciler.KindWebhook && st.Webhooks[c.Name] != nil {
			uid = st.Webhooks[c.Name].UID
		}
		if c.Kind == reconciler.KindAutomation && st.Automations[c.Name] != nil {
			uid = st.Automations[c.Name].UID
		}
		if r := st.Resource(c.Kind, c.Name); r != nil {
			uid = r.UID
		}
		if uid != "" {
			p.Changes[i].UID = &uid
		}
	}
}

// report prints a plan in the chosen format and decides the exit code.
func (a *app) report(o *reconcileOpts, p *reconciler.Plan, dryRun bool, impacts ...reconciler.Impact) error {
	switch o.output {
	case "json":
		out := reconciler.PlanJSON(p, dryRun)
		out.Impact = impacts
		if err := printJSON(a.stdout, out); err != nil {
			return err
		}
	case "markdown":
		reconciler.Markdown(a.stdout, p, impacts)
	case "github":
		prefix := o.pathPrefix
		if !o.prefixSet {
			prefix = gitPrefix(o.source)
		}
		for _, d := range p.Diagnostics {
			d.File = path.Join(prefix, d.File)
			fmt.Fprintln(a.stdout, githubAnnotation(d))
		}
		printPlan(a.stdout, p, dryRun)
		printImpact(a.stdout, impacts)
	default:
		for _, d := range p.Diagnostics {
			level := "error"
			if d.Severity == schema.Warning {
				level = "warning"
			}
			fmt.Fprintf(a.stderr, "%s: %s\n", level, d)
		}
		printPlan(a.stdout, p, dryRun)
		printImpact(a.stdout, impacts)
	}
	switch {
	case !p.Valid():
		return exitCode(1)
	case o.failOnWarnings && len(p.Diagnostics.Warnings()) > 0:
		fmt.Fprintf(a.stderr, "failing: %d warnings (--fail-on-warnings)\n", len(p.Diagnostics.Warnings()))
		return exitCode(1)
	case o.detailedExitCode && p.HasChanges():
		return exitCode(2)
	}
	return nil
}

// gitPrefix is a source directory's path within its git repository
// (examples/factory), so that annotations name files as the repository
// does; "" for a git URL or a directory outside any repository.
func gitPrefix(source string) string {
	if gitsource.IsGitURL(source) {
		return ""
	}
	dir, err := filepath.Abs(source)
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	for root := dir; ; {
		if _, err := os.Stat(filepath.Join(root, ".git")); err == nil {
			rel, err := filepath.Rel(root, dir)
			if err != nil || rel == "." {
				return ""
			}
			return filepath.ToSlash(rel)
		}
		parent := filepath.Dir(root)
		if parent == root {
			return ""
		}
		root = parent
	}
}

// githubAnnotation is a GitHub Actions workflow command that shows a
// diagnostic on the pull request's line.
func githubAnnotation(d schema.Diagnostic) string {
	level := "error"
	if d.Severity == schema.Warning {
		level = "warning"
	}
	props := "file=" + escapeProperty(d.File)
	if d.Line > 0 {
		props += fmt.Sprintf(",line=%d,col=%d", d.Line, d.Column)
	}
	msg := d.Message
	if d.Path != "" {
		msg = d.Path + ": " + msg
	}
	return fmt.Sprintf("::%s %s::%s", level, props, escapeData(msg))
}

func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// kindWidth is the width of the plan's kind column: 10, or the longest
// kind the plan names.
func kindWidth(p *reconciler.Plan) int {
	w := 10
	for _, c := range p.Changes {
		if c.Action != reconciler.ActionNoop {
			w = max(w, len(c.Kind))
		}
	}
	return w
}

// printPlan writes the terraform-like plan.
func printPlan(w io.Writer, p *reconciler.Plan, dryRun bool) {
	what := "Applied factory %s at revision %s"
	switch {
	case dryRun:
		what = "Plan for factory %s at revision %s"
	case !p.Valid():
		what = "Refused factory %s at revision %s"
	case !p.HasChanges():
		what = "Factory %s is up to date at revision %s"
	}
	fmt.Fprintf(w, what, p.Factory, p.Revision)
	switch {
	case p.Stateless:
		fmt.Fprint(w, " (no state: every webhook is new, references are not checked)")
	case p.NewFactory && p.Valid():
		fmt.Fprint(w, " (new factory)")
	}
	fmt.Fprintln(w)
	if !p.Valid() {
		n := len(p.Diagnostics.Errors())
		noun := "errors"
		if n == 1 {
			noun = "error"
		}
		fmt.Fprintf(w, "\nInvalid: %d %s. Nothing was applied", n, noun)
		if !dryRun {
			fmt.Fprint(w, "; the last applied revision keeps serving")
		}
		fmt.Fprintln(w, ".")
		return
	}
	fmt.Fprintln(w)
	counts := map[string]int{}
	for _, s := range p.SettingsChanged {
		fmt.Fprintf(w, "  ~ factory.yaml %s\n", s)
	}
	for _, c := range p.Changes {
		counts[c.Action]++
		if c.Action == reconciler.ActionNoop {
			continue
		}
		sign := map[string]string{reconciler.ActionCreate: "+", reconciler.ActionUpdate: "~", reconciler.ActionDelete: "-"}[c.Action]
		uid := "(known after apply)"
		if c.UID != nil {
			uid = *c.UID
		}
		line := fmt.Sprintf("  %s %-*s %-24s %s", sign, kindWidth(p), c.Kind, c.Name, uid)
		if len(c.Keys) > 0 {
			line += "  (" + strings.Join(c.Keys, ", ") + ")"
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		if c.Action != reconciler.ActionDelete {
			for _, s := range c.Schedules {
				fmt.Fprintf(w, "      schedule %s (%s, UTC): next fire %s\n", s.Name, s.Cron, s.NextFire.UTC().Format(time.RFC3339))
			}
		}
	}
	if !p.HasChanges() {
		fmt.Fprintln(w, "  No changes: the state matches this revision.")
		return
	}
	format := "\nPlan: %d to create, %d to update, %d to delete, %d unchanged.\n"
	if !dryRun {
		format = "\nApplied: %d created, %d updated, %d deleted, %d unchanged.\n"
	}
	fmt.Fprintf(w, format, counts[reconciler.ActionCreate], counts[reconciler.ActionUpdate],
		counts[reconciler.ActionDelete], counts[reconciler.ActionNoop])
}

// syncRemote asks the server that serves this source to sync it now, as a
// push webhook or a CI job would, and reports the result.
func (a *app) syncRemote(cmd *cobra.Command, o *reconcileOpts, src reconciler.Source, c *client.Client) error {
	fs, err := c.Factories(cmd.Context())
	if err != nil {
		return apiError(err)
	}
	var target *factory.FactorySummary
	for i, f := range fs {
		if f.Name == o.name || o.name == "" && f.Source == src.String() {
			target = &fs[i]
		}
	}
	if target == nil {
		return fmt.Errorf("the server at %s serves no factory from %s: it applies its own sources; check a change with --dry-run", c.BaseURL, src.String())
	}
	if target.Source != src.String() {
		return fmt.Errorf("the server applies factory %s from %s, not from %s", target.Name, target.Source, src.String())
	}
	st, err := c.SyncFactory(cmd.Context(), target.UID)
	if err != nil {
		return apiError(err)
	}
	if o.output == "json" {
		if err := printJSON(a.stdout, st); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "Synced factory %s through the server at %s.\n\n", st.Name, c.BaseURL)
		printStatus(a.stdout, st)
	}
	if !st.Ready {
		return exitCode(1)
	}
	return nil
}

// printImpact writes what changed triggers would have done to recent
// deliveries: "would have triggered 3 of the last 50, was 12".
func printImpact(w io.Writer, impacts []reconciler.Impact) {
	if len(impacts) == 0 {
		return
	}
	fmt.Fprintln(w, "\nOn recent deliveries:")
	for _, im := range impacts {
		line := fmt.Sprintf("  automation %s on %s: would have triggered %d of the last %d", im.Automation, im.WebhookUID, im.After, im.Deliveries)
		if !im.New {
			line += fmt.Sprintf(", was %d", im.Before)
		}
		if im.NotRouted > 0 {
			line += fmt.Sprintf("; %d not routed (their repository is not in factory.yaml repositories)", im.NotRouted)
		}
		if im.Deliveries == 0 {
			line = fmt.Sprintf("  automation %s on %s: no stored deliveries to replay", im.Automation, im.WebhookUID)
		}
		fmt.Fprintln(w, line)
	}
}

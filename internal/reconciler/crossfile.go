package reconciler

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"factory"
	"factory/internal/schema"
	"factory/internal/trigger"
)

// crossFile checks the rules of docs/spec/v1alpha1.md that span files, each
// reported at the line that breaks it: the foreman, the references between
// files (agent, runner, scorer agents, a suite's agent and tasks, an agent's
// skills), the execution settings (model or harness, never both), and each
// trigger against its provider.
func (d *Desired) crossFile(lim factory.ScheduleLimits) schema.Diagnostics {
	c := &crossCheck{d: d, agents: d.namesOf(factory.ResourceAgent), runners: d.namesOf(factory.ResourceRunner)}
	c.settings()
	c.foreman()
	for _, a := range d.Resources[factory.ResourceAgent] {
		c.exec(a.Doc, "", a.Value, "agent")
	}
	for _, a := range d.Automations {
		c.automation(a)
	}
	c.schedules(lim)
	c.runnersValid()
	c.scorers()
	c.suites()
	c.skills()
	return c.ds
}

type crossCheck struct {
	d               *Desired
	agents, runners []string
	ds              schema.Diagnostics
}

func names(rs []*schema.Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Key
	}
	sort.Strings(out) // has searches them
	return out
}

// namesOf lists the definitions of a kind that exist: the parsed ones and
// those whose file has errors (reported already), so that a typo in one
// agent's file is not also reported as every reference to it naming nothing.
func (d *Desired) namesOf(kind string) []string {
	out := names(d.Resources[kind])
	for key := range d.BrokenNames {
		if name, ok := strings.CutPrefix(key, kind+"/"); ok && !strings.Contains(name, "/") && !has(out, name) {
			out = append(out, name)
			sort.Strings(out)
		}
	}
	return out
}

func has(list []string, s string) bool {
	i := sort.SearchStrings(list, s)
	return i < len(list) && list[i] == s
}

func (c *crossCheck) errorAt(doc *schema.Document, ptr, msg string) {
	if doc == nil {
		return
	}
	c.ds = append(c.ds, doc.Diag(schema.Error, ptr, msg))
	c.d.markBroken(doc.File)
}

func (c *crossCheck) warnAt(doc *schema.Document, ptr, msg string) {
	if doc != nil {
		c.ds = append(c.ds, doc.Diag(schema.Warning, ptr, msg))
	}
}

// settings checks factory.yaml's rules across keys, and that a v1alpha1
// tree has its agents.
func (c *crossCheck) settings() {
	st, doc := &c.d.Settings, c.d.SettingsDoc
	if st.AgentDefaults != nil {
		c.execSettings(doc, "/agentDefaults", st.AgentDefaults, "agentDefaults")
		if st.AgentDefaults.Model == "" && st.AgentDefaults.Harness == nil {
			c.errorAt(doc, "/agentDefaults", "agentDefaults needs exactly one of model or harness")
		}
	}
	c.integrations()
	c.codeForges()
	if sd := st.ScorerDefaults; sd != nil && sd.Runner != "" && !has(c.runners, sd.Runner) {
		c.errorAt(doc, "/scorerDefaults/runner", fmt.Sprintf("runner %q names no runner: there is no runners/%s.yaml%s", sd.Runner, sd.Runner, listOrHint(sd.Runner, c.runners)))
	}
	if si := st.SelfImprovement; si != nil {
		switch {
		case si.ReviewerType == "custom" && len(si.ReviewerEmails) == 0:
			c.errorAt(doc, "/selfImprovement", "reviewerType custom needs reviewerEmails: the team members reviewers are chosen from")
		case si.ReviewerType != "custom" && len(si.ReviewerEmails) > 0:
			c.errorAt(doc, "/selfImprovement/reviewerEmails", fmt.Sprintf("reviewerEmails is only for reviewerType custom (this one is %s)", si.ReviewerType))
		}
	}
	if c.d.V1Alpha1() && len(c.agents) == 0 {
		c.errorAt(doc, "/schemaVersion", "a v1alpha1 factory needs at least one agent: agents/<name>/agent.md, one of them with agentType: FOREMAN")
	}
}

// foreman checks that a factory with agents has exactly one foreman; two
// are reported at both lines.
func (c *crossCheck) foreman() {
	var foremen []*schema.Resource
	for _, a := range c.d.Resources[factory.ResourceAgent] {
		if t := a.Str("agentType"); t == factory.AgentForeman || t == factory.AgentMain {
			foremen = append(foremen, a)
		}
	}
	parsed := c.d.Resources[factory.ResourceAgent]
	switch {
	case len(c.agents) == 0:
	case len(foremen) == 0 && len(parsed) < len(c.agents):
		// An agent's file has errors (reported): it may be the foreman.
	case len(foremen) == 0:
		c.errorAt(parsed[0].Doc, "", fmt.Sprintf("no foreman: exactly one agent needs agentType: FOREMAN (agents: %s)", strings.Join(c.agents, ", ")))
	case len(foremen) > 1:
		for i, a := range foremen {
			other := foremen[(i+1)%len(foremen)]
			c.errorAt(a.Doc, "/agentType", fmt.Sprintf("two foremen: %s and %s both say agentType: %s; a factory has exactly one", a.Key, other.Key, a.Str("agentType")))
		}
	}
}

// exec checks the execution keys of one mapping (an agent's front matter,
// an automation's, a suite configuration) at ptr.
func (c *crossCheck) exec(doc *schema.Document, ptr string, m map[string]any, what string) {
	if ex := schema.ExecFrom(m); ex != nil {
		c.execSettings(doc, ptr, ex, what)
	}
}

func (c *crossCheck) execSettings(doc *schema.Document, ptr string, ex *factory.ExecSettings, what string) {
	if ex.Model != "" && ex.Harness != nil {
		c.errorAt(doc, ptr+"/harness", fmt.Sprintf("%s sets both model and harness: model: X is shorthand for harness: {type: oz, model: X}; keep one", what))
	}
	if h := ex.Harness; h != nil && h.Type == factory.HarnessOz {
		if h.Auth != nil {
			c.errorAt(doc, ptr+"/harness/auth", "the oz harness takes no auth")
		}
		if h.ReasoningLevel != "" {
			c.errorAt(doc, ptr+"/harness/reasoningLevel", "the oz harness takes no reasoningLevel")
		}
	}
	if h := ex.Harness; h != nil && h.Auth != nil {
		switch {
		case h.Auth.Source == "managedSecret" && h.Auth.SecretName == "":
			c.errorAt(doc, ptr+"/harness/auth", "auth with source managedSecret needs secretName")
		case h.Auth.Source == "workerEnvironment" && h.Auth.SecretName != "":
			c.errorAt(doc, ptr+"/harness/auth/secretName", "auth with source workerEnvironment takes no secretName: the worker's environment holds the credentials")
		case h.Auth.Source == "workerEnvironment" && c.workerHost(ex) == "":
			c.errorAt(doc, ptr+"/harness/auth/source", "auth from the workerEnvironment needs a workerHost that is not warp (a self-hosted worker)")
		}
	}
	if ex.Runner != "" && !has(c.runners, ex.Runner) {
		c.errorAt(doc, ptr+"/runner", fmt.Sprintf("runner %q names no runner: there is no runners/%s.yaml%s", ex.Runner, ex.Runner, listOrHint(ex.Runner, c.runners)))
	}
}

// workerHost is the self-hosted worker an execution resolves to, "" for
// the product's own (warp) or none.
func (c *crossCheck) workerHost(ex *factory.ExecSettings) string {
	host := ex.WorkerHost
	if host == "" && c.d.Settings.AgentDefaults != nil {
		host = c.d.Settings.AgentDefaults.WorkerHost
	}
	if host == "warp" {
		return ""
	}
	return host
}

func listOrHint(got string, have []string) string {
	if h := schema.DidYouMean(got, have); h != "" {
		return h
	}
	if len(have) == 0 {
		return " (there are none)"
	}
	return " (have: " + strings.Join(have, ", ") + ")"
}

// automation checks an automation's agent, execution keys and triggers.
func (c *crossCheck) automation(a *schema.Automation) {
	if a.Agent != "" && !has(c.agents, a.Agent) {
		c.errorAt(a.Doc, "/agent", fmt.Sprintf("agent %q names no agent: there is no agents/%s/agent.md%s", a.Agent, a.Agent, listOrHint(a.Agent, c.agents)))
	}
	if a.Exec != nil {
		c.execSettings(a.Doc, "", a.Exec, "the automation")
	}
	for i, t := range a.Triggers {
		for _, p := range trigger.Check(t, schema.DidYouMean) {
			ptr := fmt.Sprintf("/triggers/%d%s", i, p.Pointer)
			if p.Warning {
				c.warnAt(a.Doc, ptr, p.Message)
			} else {
				c.errorAt(a.Doc, ptr, p.Message)
			}
		}
	}
}

// schedules bounds what a factory's schedules may fire: each at most once
// every minimum interval, and at most the limit of schedule triggers in
// all, the one that takes the factory over it reported where it is
// written (automations in the order of their keys).
func (c *crossCheck) schedules(lim factory.ScheduleLimits) {
	n := 0
	for _, a := range c.d.Automations {
		for i, t := range a.Triggers {
			if t.Provider != factory.ProviderSchedule || t.Schedule == nil {
				continue
			}
			if err := trigger.CheckInterval(t.Schedule.Cron, lim.MinInterval); err != nil {
				c.errorAt(a.Doc, fmt.Sprintf("/triggers/%d/schedule/cron", i), err.Error())
			}
			if n++; n == lim.PerFactory+1 {
				c.errorAt(a.Doc, fmt.Sprintf("/triggers/%d/schedule", i),
					fmt.Sprintf("too many schedules: a factory has at most %d (this is schedule %d)", lim.PerFactory, n))
			}
		}
	}
}

// runnersValid checks a runner's platform: Linux needs a Docker image and
// whole powers of two of vCPUs; macOS is aarch64 only.
func (c *crossCheck) runnersValid() {
	for _, r := range c.d.Resources[factory.ResourceRunner] {
		platform, _ := r.Value["platform"].(map[string]any)
		os, _ := platform["os"].(string)
		if os == "" {
			os = "linux"
		}
		if os == "macos" {
			if arch, _ := platform["arch"].(string); arch == "x86_64" {
				c.errorAt(r.Doc, "/platform/arch", "macOS runners are aarch64 only")
			}
			if _, ok := platform["linux"]; ok {
				c.errorAt(r.Doc, "/platform/linux", "a macOS runner takes no linux settings")
			}
			continue
		}
		if _, ok := platform["mac"]; ok {
			c.errorAt(r.Doc, "/platform/mac", "a Linux runner takes no mac settings (set os: macos)")
		}
		if linux, _ := platform["linux"].(map[string]any); linux["dockerImage"] == nil {
			ptr := "/platform"
			if platform == nil {
				ptr = ""
			}
			c.errorAt(r.Doc, ptr, "a Linux runner needs platform.linux.dockerImage: the image its runs start from")
		}
		if shape, _ := r.Value["instanceShape"].(map[string]any); shape != nil {
			if n, ok := number(shape["vcpus"]); ok && (n < 1 || bits.OnesCount64(uint64(n)) != 1) {
				c.errorAt(r.Doc, "/instanceShape/vcpus", fmt.Sprintf("a Linux runner's vcpus is a power of two (1, 2, 4, 8, ...), not %d", n))
			}
		}
	}
}

// number reads a validated integer (json.Number).
func number(v any) (int64, bool) {
	n, ok := v.(interface{ Int64() (int64, error) })
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func float(v any) float64 {
	n, _ := v.(interface{ Float64() (float64, error) })
	if n == nil {
		return 0
	}
	f, _ := n.Float64()
	return f
}

// scorers checks scorer names (unique), their agents, and that the labels
// can both pass and fail.
func (c *crossCheck) scorers() {
	byName := map[string]string{}
	for _, s := range c.d.Resources[factory.ResourceScorer] {
		name := s.Str("name")
		if name == "" {
			name = s.Key
		}
		if other, dup := byName[name]; dup {
			c.errorAt(s.Doc, "/name", fmt.Sprintf("scorer name %q is already used by %s", name, other))
		}
		byName[name] = s.Doc.File
		agents, _ := s.Value["agents"].([]any)
		for i, a := range agents {
			if n, _ := a.(string); !has(c.agents, n) {
				c.errorAt(s.Doc, fmt.Sprintf("/agents/%d", i), fmt.Sprintf("agent %q names no agent%s", n, listOrHint(n, c.agents)))
			}
		}
		passing := float(s.Value["passingScore"])
		var pass, fail bool
		labels, _ := s.Value["labels"].([]any)
		for _, l := range labels {
			score := float(l.(map[string]any)["score"])
			pass, fail = pass || score >= passing, fail || score < passing
		}
		if !pass || !fail {
			c.errorAt(s.Doc, "/labels", fmt.Sprintf("with passingScore %v, at least one label must score at or above it and one below it", passing))
		}
	}
}

// suites checks a suite's agent, configurations, and that its tasks list
// and its tasks/ files correspond one to one.
func (c *crossCheck) suites() {
	names := map[string]string{}
	for _, s := range c.d.Resources[factory.ResourceSuite] {
		if n := s.Str("name"); n != "" {
			if other, dup := names[n]; dup {
				c.errorAt(s.Doc, "/name", fmt.Sprintf("suite name %q is already used by %s", n, other))
			}
			names[n] = s.Doc.File
		}
		if a := s.Str("agent"); !has(c.agents, a) {
			c.errorAt(s.Doc, "/agent", fmt.Sprintf("agent %q names no agent%s", a, listOrHint(a, c.agents)))
		}
		confs, _ := s.Value["configurations"].([]any)
		seen, baselines := map[string]bool{}, 0
		for i, cf := range confs {
			m := cf.(map[string]any)
			ptr := fmt.Sprintf("/configurations/%d", i)
			if n, _ := m["name"].(string); seen[n] {
				c.errorAt(s.Doc, ptr+"/name", fmt.Sprintf("configuration name %q is used twice", n))
			} else {
				seen[n] = true
			}
			if b, _ := m["baseline"].(bool); b || m["role"] == "baseline" {
				key := "/role"
				if b {
					key = "/baseline"
				}
				if baselines++; baselines > 1 {
					c.errorAt(s.Doc, ptr+key, "at most one configuration is the baseline")
				}
			}
			c.exec(s.Doc, ptr, m, "the configuration")
			c.configurationAgents(s.Doc, ptr, m)
		}
		files := map[string]*schema.Resource{}
		for _, t := range c.d.Tasks[s.Key] {
			files[t.Key] = t
		}
		listed := map[string]bool{}
		tasks, _ := s.Value["tasks"].([]any)
		for i, t := range tasks {
			n, _ := t.(string)
			listed[n] = true
			if files[n] == nil && !c.d.Broken[joinPath(factory.BenchmarksDir, s.Key, "tasks", n+".yaml")] {
				c.errorAt(s.Doc, fmt.Sprintf("/tasks/%d", i), fmt.Sprintf("task %q has no file benchmarks/%s/tasks/%s.yaml", n, s.Key, n))
			}
		}
		for _, t := range c.d.Tasks[s.Key] {
			if !listed[t.Key] {
				c.errorAt(t.Doc, "", fmt.Sprintf("task %q is not in the tasks list of benchmarks/%s/suite.yaml", t.Key, s.Key))
			}
		}
	}
	for suite, tasks := range c.d.Tasks {
		if c.d.Resource(factory.ResourceSuite, suite) == nil && !c.d.Broken[joinPath(factory.BenchmarksDir, suite, "suite.yaml")] {
			for _, t := range tasks {
				c.errorAt(t.Doc, "", fmt.Sprintf("a task needs its suite: there is no benchmarks/%s/suite.yaml", suite))
			}
		}
	}
}

// configurationAgents checks a configuration in the documented form
// ({name, role, agents: [{agent, model | harness}]}): a role, and each
// agent once, a known one, with exactly one of model and harness (a
// harness with its model).
func (c *crossCheck) configurationAgents(doc *schema.Document, ptr string, m map[string]any) {
	agents, ok := m["agents"].([]any)
	_, role := m["role"]
	_, baseline := m["baseline"]
	switch {
	case role && baseline:
		c.errorAt(doc, ptr+"/baseline", "role says whether the configuration is the baseline: drop baseline")
	case ok && !role:
		c.errorAt(doc, ptr, "a configuration with agents needs a role: baseline or candidate")
	}
	seen := map[string]bool{}
	for i, a := range agents {
		am := a.(map[string]any)
		at := fmt.Sprintf("%s/agents/%d", ptr, i)
		name, _ := am["agent"].(string)
		switch {
		case !has(c.agents, name):
			c.errorAt(doc, at+"/agent", fmt.Sprintf("agent %q names no agent%s", name, listOrHint(name, c.agents)))
		case seen[name]:
			c.errorAt(doc, at+"/agent", fmt.Sprintf("agent %s is overridden twice in this configuration", name))
		}
		seen[name] = true
		h, hasHarness := am["harness"].(map[string]any)
		_, hasModel := am["model"]
		switch {
		case !hasModel && !hasHarness:
			c.errorAt(doc, at, fmt.Sprintf("agent %s needs one of model or harness", name))
		case hasHarness && h["model"] == nil:
			c.errorAt(doc, at+"/harness", "a configuration's harness names its model too")
		}
		c.exec(doc, at, am, "the configuration's agent")
	}
}

func joinPath(parts ...string) string { return strings.Join(parts, "/") }

// skills checks that an agent's own skills belong to an agent, and that a
// skill's files have their SKILL.md.
func (c *crossCheck) skills() {
	for _, s := range c.d.Resources[factory.ResourceSkill] {
		if owner, _, ok := strings.Cut(s.Key, "/"); ok && !has(c.agents, owner) {
			c.ds = append(c.ds, fileError(s.Doc.File, fmt.Sprintf("skill of agent %q, which does not exist: there is no agents/%s/agent.md", owner, owner)))
			c.d.markBroken(s.Doc.File)
		}
	}
	skills := names(c.d.Resources[factory.ResourceSkill])
	for key := range c.d.SkillFiles {
		if !has(skills, key) {
			file := joinPath(factory.SkillsDir, key, factory.SkillFile)
			if owner, name, ok := strings.Cut(key, "/"); ok {
				file = joinPath(factory.AgentsDir, owner, factory.SkillsDir, name, factory.SkillFile)
			}
			if !c.d.Broken[file] {
				c.ds = append(c.ds, fileError(joinPath(strings.TrimSuffix(file, "/"+factory.SkillFile))+"/", "a skill folder needs its SKILL.md"))
			}
		}
	}
}

// integrations checks factory.yaml's integrations: each type once, each
// entry's settings under its own type's key, and linear or jira, not both.
func (c *crossCheck) integrations() {
	doc := c.d.SettingsDoc
	seen := map[string]bool{}
	for i, in := range c.d.Settings.IntegrationList() {
		ptr := fmt.Sprintf("/integrations/%d", i)
		if seen[in.Type] {
			c.errorAt(doc, ptr+"/type", fmt.Sprintf("integration %s is listed twice", in.Type))
		}
		seen[in.Type] = true
		for key, set := range map[string]bool{"slack": in.Slack != nil, "microsoft-teams": in.Teams != nil, "linear": in.Linear != nil, "jira": in.Jira != nil} {
			if set && key != in.Type {
				c.errorAt(doc, ptr+"/"+key, fmt.Sprintf("the settings of a %s integration go under %s:, not %s:", in.Type, in.Type, key))
			}
		}
	}
	if seen["linear"] && seen["jira"] {
		c.errorAt(doc, "/integrations", "linear and jira integrations exclude each other: keep one")
	}
}

// codeForges checks that NONE stands alone, on a factory without
// repositories.
func (c *crossCheck) codeForges() {
	st := &c.d.Settings
	if !slices.Contains(st.CodeForges, factory.ForgeNone) {
		return
	}
	if len(st.CodeForges) > 1 {
		c.errorAt(c.d.SettingsDoc, "/codeForges", "NONE declares a factory without repositories: it cannot be listed with other code forges")
	} else if len(st.Repositories) > 0 {
		c.errorAt(c.d.SettingsDoc, "/repositories", "codeForges: [NONE] declares a factory without repositories: remove them, or name their code forge")
	}
}

// CodeHostWarnings warns about each trigger that filters on paths for a
// pull (merge) request event of a code host this server has no credential
// for (has says whether it has): only the host's API lists the files a
// pull request changes, so the trigger never fires.
func CodeHostWarnings(d *Desired, has func(host string) bool) schema.Diagnostics {
	var ds schema.Diagnostics
	for _, a := range d.Automations {
		for i, t := range a.Triggers {
			host := trigger.PullRequestPaths(t)
			if host == "" || a.Doc == nil || has(host) {
				continue
			}
			where := "a GitHub App (codeHosts.github in the server config)"
			if host == factory.ProviderGitLab {
				where = "a GitLab token for this factory (codeHosts.gitlab in the server config, or in the factory's entry)"
			}
			ds = append(ds, a.Doc.Diag(schema.Warning, fmt.Sprintf("/triggers/%d/filter/paths", i), fmt.Sprintf(
				"paths on %s is matched against the files the pull request changes, which this server reads through %s's API: "+
					"it has no credential for %s, so this trigger never fires (configure %s)", t.Event, host, host, where)))
		}
	}
	return ds
}

// HarnessWarnings warns about each agent whose resolved harness (defaults
// ← agent) no environment of the server runs (harness_not_configured), or
// cannot reach its model (key, when set, says why: its provider has no key
// at the model gateway, integration_not_configured): its runs would fail,
// and a plan should say so before they do; and, with isolation, about
// each agent whose environment keeps its runs apart from the server's
// files or from each other's no better than isolation says (an unconfined
// user: shared by runs at once).
func HarnessWarnings(d *Desired, runs func(harness string) bool, isolation func(harness string) string, key func(h *factory.Harness) string) schema.Diagnostics {
	var ds schema.Diagnostics
	for _, a := range d.Resources[factory.ResourceAgent] {
		ex := factory.ExecSettings{}
		if d.Settings.AgentDefaults != nil {
			ex = *d.Settings.AgentDefaults
		}
		if own := schema.ExecFrom(a.Value); own != nil {
			ex = ex.Resolve(*own)
		}
		h := ex.EffectiveHarness()
		switch {
		case h == nil:
		case !runs(h.Type):
			ds = append(ds, a.Doc.Diag(schema.Warning, "", fmt.Sprintf(
				"agent %s runs on the %s harness, which no environment of this server runs: its runs will fail (factory harnesses install %s, or map it with runtime.harnesses.%s in the server config)",
				a.Key, h.Type, h.Type, h.Type)))
		case key != nil && key(h) != "":
			ds = append(ds, a.Doc.Diag(schema.Warning, "", fmt.Sprintf("agent %s: %s", a.Key, key(h))))
		case isolation != nil:
			if w := isolation(h.Type); w != "" {
				ds = append(ds, a.Doc.Diag(schema.Warning, "", fmt.Sprintf("agent %s runs on the %s harness, in %s", a.Key, h.Type, w)))
			}
		}
	}
	return ds
}

// CredentialWarnings warn of the automations whose runs from a chat or
// tracker (Slack, Linear, Jira, Teams) cannot report back: neither
// factory.yaml's integration entry nor the server config's credentials
// (configured, by integration type) name what the provider's write-back
// needs (docs/spec/talkback.md). Such runs still run; each notes the
// missing credential on its timeline.
func CredentialWarnings(d *Desired, factoryName string, configured map[string]factory.Credentials) schema.Diagnostics {
	var ds schema.Diagnostics
	for _, a := range d.Automations {
		warned := map[string]bool{}
		for i, t := range a.Triggers {
			typ := factory.IntegrationOf(t.Provider)
			if typ == "" || warned[t.Provider] {
				continue
			}
			var c factory.Credentials
			if in := d.Settings.Integration(typ); in != nil {
				c = in.Credentials()
			}
			if missing := c.Over(configured[typ]).Missing(t.Provider); len(missing) > 0 {
				warned[t.Provider] = true
				ds = append(ds, a.Doc.Diag(schema.Warning, fmt.Sprintf("/triggers/%d", i), fmt.Sprintf(
					"runs from %s will not report back: factory %s's %s integration names no %s (factory.yaml's integrations, or the server config's factories[].integrations)",
					t.Provider, factoryName, typ, strings.Join(missing, ", "))))
			}
		}
	}
	return ds
}

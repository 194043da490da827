package measure

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"factory"
	"factory/internal/automations"
	"factory/internal/runs"
	"factory/internal/store"
)

// Benchmarks (docs/measure-and-improve.md): a benchmark run executes
// every task of a suite under every configuration, repetitions times, as
// trial runs (source BENCHMARK_TRIAL), and scores each trial that
// succeeded with the built-in correctness scorer (the task's success
// criteria) and the selected scorers.

// MaxTrials bounds the trials of one benchmark run.
const MaxTrials = 500

// Suite is a benchmark suite as its files say it.
type Suite struct {
	UID, Name, Agent string
	Configs          []factory.BenchConf
	Tasks            []factory.BenchTask
}

// suiteSpec is benchmarks/<suite>/suite.yaml.
type suiteSpec struct {
	Name           string           `json:"name"`
	Agent          string           `json:"agent"`
	Configurations []map[string]any `json:"configurations"`
	Tasks          []string         `json:"tasks"`
}

// taskSpec is benchmarks/<suite>/tasks/<task>.yaml.
type taskSpec struct {
	Title            string   `json:"title"`
	Prompt           string   `json:"prompt"`
	SuccessCriteria  any      `json:"successCriteria"`
	StartingRepoRefs []string `json:"startingRepoRefs"`
}

// SuiteOf reads an applied suite: its configurations (ids from 1, in the
// file's order) and its tasks (in the suite's order).
func SuiteOf(res *factory.Resource, agentUIDs map[string]string) (*Suite, error) {
	var sp suiteSpec
	if err := json.Unmarshal(res.Spec, &sp); err != nil {
		return nil, fmt.Errorf("suite %s: %w", res.Key, err)
	}
	su := &Suite{UID: res.UID, Name: sp.Name, Agent: sp.Agent}
	if su.Name == "" {
		su.Name = res.Key
	}
	for i, c := range sp.Configurations {
		su.Configs = append(su.Configs, ConfigOf(i+1, c, agentUIDs))
	}
	for _, n := range sp.Tasks {
		var t taskSpec
		if err := json.Unmarshal(res.Files[n], &t); err != nil {
			return nil, fmt.Errorf("suite %s, task %s: %w", res.Key, n, err)
		}
		uid := factory.DerivedID("bt_", res.UID, n)
		task := factory.BenchTask{ID: NumericID(uid), UID: uid, Name: n, Title: t.Title, Prompt: t.Prompt, SuccessCriteria: criteriaText(t.SuccessCriteria)}
		for _, ref := range t.StartingRepoRefs {
			task.Repositories = append(task.Repositories, RepoRef(ref))
		}
		su.Tasks = append(su.Tasks, task)
	}
	return su, nil
}

// criteriaText is successCriteria as text: a string as it is, a list as
// Markdown items.
func criteriaText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	if list, ok := v.([]any); ok {
		for _, c := range list {
			fmt.Fprintf(&b, "- %v\n", c)
		}
	}
	return b.String()
}

// RepoRef reads a startingRepoRef, github.com:OWNER/REPO@SHA (or
// gitlab.com:...), as the repository a trial starts from.
func RepoRef(ref string) factory.RepoCheckout {
	host, rest, _ := strings.Cut(ref, ":")
	repo, sha, _ := strings.Cut(rest, "@")
	out := factory.RepoCheckout{Host: factory.ProviderGitHub, Path: repo, Ref: sha}
	if host == "gitlab.com" {
		out.Host = factory.ProviderGitLab
	}
	return out
}

// ConfigOf reads a configuration: the file's form ({name, role, agents:
// [{agent, model | harness}]}), the older one ({name, baseline, model |
// harness}), or the API's ({display_name, role, model, harness,
// agent_configs}).
func ConfigOf(id int, c map[string]any, agentUIDs map[string]string) factory.BenchConf {
	str := func(k string) string { v, _ := c[k].(string); return v }
	out := factory.BenchConf{ID: id, Role: str("role"), DisplayName: str("name")}
	if out.DisplayName == "" {
		out.DisplayName = str("display_name")
	}
	if b, _ := c["baseline"].(bool); b {
		out.Role = "baseline"
	}
	if out.Role == "" {
		out.Role = "candidate"
	}
	out.Model, out.Harness, out.AuthSecret = modelHarness(c)
	for _, key := range []string{"agents", "agent_configs"} {
		list, _ := c[key].([]any)
		for _, a := range list {
			am, _ := a.(map[string]any)
			name, _ := am["agent"].(string)
			if name == "" {
				name, _ = am["agent_name"].(string)
			}
			uid, _ := am["agent_uid"].(string)
			if uid == "" {
				uid = agentUIDs[name]
			}
			for n, u := range agentUIDs {
				if name == "" && u == uid {
					name = n
				}
			}
			model, harness, auth := modelHarness(am)
			out.Agents = append(out.Agents, factory.BenchAgentConf{AgentUID: uid, AgentName: name, Model: model, Harness: harness, AuthSecret: auth})
		}
	}
	return out
}

// modelHarness reads a model or a harness: model alone is the oz
// harness; the API's form has both as strings.
func modelHarness(m map[string]any) (model, harness, auth string) {
	model, _ = m["model"].(string)
	auth, _ = m["harness_auth_secret_name"].(string)
	switch h := m["harness"].(type) {
	case string:
		harness = h
	case map[string]any:
		model, _ = h["model"].(string)
		harness, _ = h["type"].(string)
		if a, ok := h["auth"].(map[string]any); ok {
			auth, _ = a["secretName"].(string)
		}
	}
	if harness == "" && model != "" {
		harness = factory.HarnessOz
	}
	if harness == "claude-code" {
		harness = factory.HarnessClaude
	}
	return model, harness, auth
}

// Launch is a launch of a suite: the configurations (none: the suite's),
// the tasks by UID (none: all), the scorers by numeric ID (none: every
// scorer of the factory that judges the suite's agent), the repetitions.
type Launch struct {
	Repetitions int
	Configs     []factory.BenchConf
	TaskUIDs    []string
	ScorerIDs   []int64
	Creator     *factory.Creator
}

// LaunchSuite starts a benchmark run of a suite: its frozen
// configurations, tasks and scorers, a trial for each (configuration,
// task, repetition), each trial's run created at once (the run manager
// queues them).
func (s *Service) LaunchSuite(f *factory.Factory, su *Suite, l Launch) (*factory.BenchmarkRun, error) {
	br, err := s.newBenchmarkRun(f, su, l)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Store.CreateBenchmarkRun(br); err != nil {
		return nil, err
	}
	reqs, err := s.trialRequests(f, su, br)
	if err == nil {
		_, err = s.cfg.Runs.CreateMany(reqs, nil)
	}
	if err != nil {
		msg := "starting its trials: " + err.Error()
		_, _ = s.cfg.Store.UpdateBenchmarkRun(br.UID, func(b *factory.BenchmarkRun) error {
			b.State, b.Incomplete = factory.BenchFailed, msg
			return nil
		})
		return nil, err
	}
	now := s.cfg.Now().UTC()
	return s.cfg.Store.UpdateBenchmarkRun(br.UID, func(b *factory.BenchmarkRun) error {
		for i := range b.Trials {
			b.Trials[i].RunID, b.Trials[i].State = reqs[i].ID, factory.StateQueued
		}
		b.State, b.StartedAt, b.UpdatedAt = factory.BenchRunning, &now, now
		return nil
	})
}

// newBenchmarkRun checks a launch and freezes what it runs.
func (s *Service) newBenchmarkRun(f *factory.Factory, su *Suite, l Launch) (*factory.BenchmarkRun, error) {
	configs, tasks, err := launchSelection(su, l)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now().UTC()
	br := &factory.BenchmarkRun{UID: factory.NewUUID(), FactoryUID: f.UID, SuiteUID: su.UID, SuiteName: su.Name, AgentName: su.Agent,
		State: factory.BenchPending, Repetitions: l.Repetitions, Configs: configs, Tasks: tasks, Creator: l.Creator, CreatedAt: now, UpdatedAt: now}
	if res, err := s.cfg.Store.Resource(f.Name, factory.ResourceAgent, su.Agent); err == nil {
		br.AgentUID = res.UID
	}
	correct := factory.DerivedID("sc_", br.UID, "correctness")
	br.Scorers = []factory.BenchScorer{{UID: correct, ID: NumericID(correct), Name: "Correctness", Kind: KindCorrectness, Threshold: 1}}
	scs, err := Scorers(s.cfg.Store, f)
	if err != nil {
		return nil, err
	}
	for _, id := range l.ScorerIDs {
		if !slices.ContainsFunc(scs, func(sc *Scorer) bool { return sc.ID == id }) {
			return nil, factory.Errorf(factory.EINVALID, "scorer_selection: factory %s has no scorer %d", f.Name, id)
		}
	}
	for _, sc := range scs {
		if len(l.ScorerIDs) == 0 && sc.Applies(su.Agent) || slices.Contains(l.ScorerIDs, sc.ID) {
			br.Scorers = append(br.Scorers, factory.BenchScorer{UID: sc.UID, ID: sc.ID, Name: sc.Name, Kind: KindUser, Threshold: sc.Threshold})
		}
	}
	for _, c := range configs {
		for _, t := range tasks {
			for rep := range l.Repetitions {
				br.Trials = append(br.Trials, factory.Trial{ID: len(br.Trials) + 1, ConfigID: c.ID, TaskUID: t.UID, Rep: rep})
			}
		}
	}
	return br, nil
}

// launchSelection checks a launch's repetitions, configurations and
// tasks against the suite.
func launchSelection(su *Suite, l Launch) ([]factory.BenchConf, []factory.BenchTask, error) {
	configs := su.Configs
	if l.Configs != nil {
		configs = l.Configs
	}
	switch {
	case l.Repetitions < 1:
		return nil, nil, factory.Errorf(factory.EINVALID, "repetition_count: at least 1")
	case len(configs) == 0:
		return nil, nil, factory.Errorf(factory.EINVALID, "configurations: the suite has none; give at least one")
	case len(configs) > 6:
		return nil, nil, factory.Errorf(factory.EINVALID, "configurations: at most 6")
	}
	if n := slices.IndexFunc(configs, func(c factory.BenchConf) bool { return c.Role != "baseline" && c.Role != "candidate" }); n >= 0 {
		return nil, nil, factory.Errorf(factory.EINVALID, "configurations[%d].role: baseline or candidate", n)
	}
	tasks := su.Tasks
	if l.TaskUIDs != nil {
		tasks = nil
		for _, uid := range l.TaskUIDs {
			i := slices.IndexFunc(su.Tasks, func(t factory.BenchTask) bool { return t.UID == uid })
			if i < 0 || slices.ContainsFunc(tasks, func(t factory.BenchTask) bool { return t.UID == uid }) {
				return nil, nil, factory.Errorf(factory.EINVALID, "tasks: %q is not a task of suite %s, or is given twice", uid, su.Name)
			}
			tasks = append(tasks, su.Tasks[i])
		}
	}
	if len(tasks) == 0 {
		return nil, nil, factory.Errorf(factory.EINVALID, "tasks: the run would have none")
	}
	if n := len(configs) * len(tasks) * l.Repetitions; n > MaxTrials {
		return nil, nil, factory.Errorf(factory.EINVALID, "the run would have %d trials: at most %d (configurations × tasks × repetitions)", n, MaxTrials)
	}
	return configs, tasks, nil
}

// trialRequests are the trials' runs: the suite's agent with the
// configuration's model or harness for it, the task's prompt, from the
// task's starting repositories.
func (s *Service) trialRequests(f *factory.Factory, su *Suite, br *factory.BenchmarkRun) ([]runs.CreateRequest, error) {
	var reqs []runs.CreateRequest
	for _, t := range br.Trials {
		c, task := br.Configs[slices.IndexFunc(br.Configs, func(c factory.BenchConf) bool { return c.ID == t.ConfigID })],
			br.Tasks[slices.IndexFunc(br.Tasks, func(x factory.BenchTask) bool { return x.UID == t.TaskUID })]
		over := overFor(c, su.Agent)
		ag, err := automations.ResolveAgent(s.cfg.Store, s.cfg.Runs, f, su.Agent, over)
		if err != nil {
			return nil, err
		}
		model := ""
		if over != nil {
			if h := over.EffectiveHarness(); h != nil {
				model = h.Model
			}
		}
		cfg, _ := json.Marshal(map[string]string{"model_id": model, "name": su.Agent})
		repos := task.Repositories
		if repos == nil {
			repos = []factory.RepoCheckout{}
		}
		req := runs.CreateRequest{ID: factory.DerivedID(factory.PrefixRun, "trial", br.UID, strconv.Itoa(t.ID)), Prompt: task.Prompt,
			Title: fmt.Sprintf("%s: %s (%s, #%d)", su.Name, task.Title, c.DisplayName, t.Rep+1), Source: factory.SourceBenchmarkTrial,
			FactoryUID: f.UID, Config: cfg, Repositories: repos, Creator: br.Creator, ErrorOnUnknownEnvironment: true,
			Metadata: map[string]string{"benchmark_run": br.UID, "configuration": strconv.Itoa(c.ID), "task": task.UID, "repetition": strconv.Itoa(t.Rep)}}
		if ag != nil {
			ag.Apply(&req)
		}
		reqs = append(reqs, req)
	}
	return reqs, nil
}

// overFor is the configuration's model or harness for an agent: its own
// entry, else the configuration's.
func overFor(c factory.BenchConf, agent string) *factory.ExecSettings {
	model, harness, auth := c.Model, c.Harness, c.AuthSecret
	for _, a := range c.Agents {
		if a.AgentName == agent {
			model, harness, auth = a.Model, a.Harness, a.AuthSecret
		}
	}
	if model == "" && harness == "" {
		return nil
	}
	if harness == "" || harness == factory.HarnessOz && auth == "" {
		return &factory.ExecSettings{Model: model}
	}
	h := &factory.Harness{Type: harness, Model: model}
	if auth != "" {
		h.Auth = &factory.HarnessAuth{Source: "managedSecret", SecretName: auth}
	}
	return &factory.ExecSettings{Harness: h}
}

// trialEnded records a trial's end and starts its judges when it
// succeeded: one per scorer of the benchmark run (the correctness scorer
// with the task's success criteria).
func (s *Service) trialEnded(r *factory.Run) error {
	uid, err := s.cfg.Store.BenchmarkOfTrial(r.ID)
	if store.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	br, err := s.cfg.Store.UpdateBenchmarkRun(uid, func(b *factory.BenchmarkRun) error {
		i := slices.IndexFunc(b.Trials, func(t factory.Trial) bool { return t.RunID == r.ID })
		if i < 0 || b.Trials[i].State == r.State {
			return store.ErrNoChange
		}
		b.Trials[i].State = r.State
		return nil
	})
	if err != nil {
		return err
	}
	if r.State == factory.StateSucceeded && br.State != factory.BenchCancelled {
		if err := s.judgeTrial(br, r); err != nil {
			return err
		}
	}
	return s.settle(uid)
}

// judgeTrial starts the judges of a trial that succeeded.
func (s *Service) judgeTrial(br *factory.BenchmarkRun, r *factory.Run) error {
	f, err := s.factoryOf(br.FactoryUID)
	if err != nil {
		return err
	}
	task := br.Tasks[slices.IndexFunc(br.Tasks, func(t factory.BenchTask) bool { return t.UID == r.Metadata["task"] })]
	for _, bs := range br.Scorers {
		sc := &Scorer{UID: bs.UID, ID: bs.ID, Name: bs.Name, Kind: bs.Kind, Threshold: bs.Threshold, Factory: f, Rate: 100}
		criteria := ""
		if bs.Kind == KindCorrectness {
			sc.Rubric = "Did the run do what its task asked? The success criteria below are the requirements; the task's prompt is context only."
			sc.Labels = []factory.ScoreLabel{{Value: "pass", Score: 1, Description: "every success criterion is met"},
				{Value: "fail", Score: 0, Description: "a success criterion is not met"}}
			sc.Model = defaultScorerModel(f)
			criteria = task.SuccessCriteria
		} else if sc, err = FindScorer(s.cfg.Store, bs.UID); err != nil {
			return err
		}
		if _, err := s.startJudge(sc, r, factory.ScoreBenchmark, criteria); err != nil {
			return err
		}
	}
	return nil
}

// trialJudged settles the benchmark run of a trial whose judge answered.
func (s *Service) trialJudged(score *factory.Score) error {
	uid, err := s.cfg.Store.BenchmarkOfTrial(score.RunID)
	if store.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.settle(uid)
}

// settle moves a benchmark run on: running while a trial runs, scoring
// while a judge of a trial that succeeded has not answered, completed
// after.
func (s *Service) settle(uid string) error {
	scored := map[string]int{} // trial run → scores not in flight
	br, err := s.cfg.Store.BenchmarkRun(uid)
	if err != nil {
		return err
	}
	for _, t := range br.Trials {
		if t.State == factory.StateSucceeded {
			scs, err := s.cfg.Store.ScoresOfRun(t.RunID)
			if err != nil {
				return err
			}
			for _, sc := range scs {
				if !sc.InFlight && slices.ContainsFunc(br.Scorers, func(b factory.BenchScorer) bool { return b.UID == sc.ScorerUID }) {
					scored[t.RunID]++
				}
			}
		}
	}
	now := s.cfg.Now().UTC()
	_, err = s.cfg.Store.UpdateBenchmarkRun(uid, func(b *factory.BenchmarkRun) error {
		state := benchState(b, scored)
		if state == b.State || b.State == factory.BenchCancelled || b.State == factory.BenchFailed {
			return store.ErrNoChange
		}
		b.State, b.UpdatedAt = state, now
		if state == factory.BenchCompleted {
			b.CompletedAt = &now
		}
		return nil
	})
	return err
}

// benchState is where a benchmark run stands given its trials and how
// many of each trial's scores are in.
func benchState(b *factory.BenchmarkRun, scored map[string]int) string {
	state := factory.BenchCompleted
	for _, t := range b.Trials {
		switch {
		case !t.State.Terminal():
			return factory.BenchRunning
		case t.State == factory.StateSucceeded && scored[t.RunID] < len(b.Scorers):
			state = factory.BenchScoring
		}
	}
	return state
}

// CancelBenchmark cancels a benchmark run's trials and judges that have
// not ended; its results keep what had finished.
func (s *Service) CancelBenchmark(uid string) (*factory.BenchmarkRun, error) {
	br, err := s.cfg.Store.UpdateBenchmarkRun(uid, func(b *factory.BenchmarkRun) error {
		if b.State == factory.BenchCompleted || b.State == factory.BenchCancelled || b.State == factory.BenchFailed {
			return factory.Errorf(factory.ECONFLICT, "benchmark run %s is %s", uid, b.State)
		}
		now := s.cfg.Now().UTC()
		b.State, b.UpdatedAt, b.CompletedAt, b.Incomplete = factory.BenchCancelled, now, &now, "cancelled: results hold the trials scored before"
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, t := range br.Trials {
		if t.RunID != "" {
			_, _ = s.cfg.Runs.Cancel(t.RunID)
		}
	}
	return br, nil
}

// defaultScorerModel is the judge model of a scorer that names none (the
// built-in correctness scorer): scorerDefaults.model, else the agents'
// default model.
func defaultScorerModel(f *factory.Factory) string {
	if d := f.Settings.ScorerDefaults; d != nil && d.Model != "" {
		return d.Model
	}
	if d := f.Settings.AgentDefaults; d != nil {
		if h := d.EffectiveHarness(); h != nil {
			return h.Model
		}
	}
	return ""
}

package measure

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"factory"
	"factory/internal/automations"
	"factory/internal/runs"
)

// Self-improvement (docs/measure-and-improve.md): an agent's runs that
// failed, or that a scorer with selfImprovement found below its threshold,
// are its unaddressed failures; once they reach the factory's
// failedRunThreshold (or the oldest is a week old), one run groups them and
// proposes a fix as a pull request, listing them under "Regressions
// addressed".

// DefaultFailedRunThreshold is selfImprovement.failedRunThreshold's
// default (docs/spec/v1alpha1.md).
const DefaultFailedRunThreshold = 25

// MaxFailureAge is how old an agent's oldest unaddressed failure may get
// before a self-improvement run addresses it, however few there are.
const MaxFailureAge = 7 * 24 * time.Hour

// RegressionsHeading starts the section of a self-improvement pull
// request that lists what it addresses.
const RegressionsHeading = "## Regressions addressed"

// noteFailedRun counts a FAILED run of an agent against it, in a factory
// that has selfImprovement.
func (s *Service) noteFailedRun(r *factory.Run) error {
	if r.State != factory.StateFailed || agentOf(r) == "" {
		return nil
	}
	f, err := s.factoryOf(r.FactoryUID)
	if err != nil || f.Settings.SelfImprovement == nil {
		return err
	}
	reason := ""
	if m := r.StatusMessage; m != nil {
		reason = clip(m.Message, 1000)
	}
	return s.addRegression(f.UID, agentOf(r), factory.Regression{RunID: r.ID, Title: r.Title, At: s.cfg.Now().UTC(),
		State: r.State, Reason: reason})
}

// addRegression records an agent's failure, then starts its
// self-improvement run if that makes enough.
func (s *Service) addRegression(factoryUID, agent string, reg factory.Regression) error {
	if err := s.cfg.Store.AddRegression(factoryUID, agent, reg); err != nil {
		return err
	}
	_, err := s.Improve(factoryUID, false)
	return err
}

// ImproveAll is Improve for every factory, logging what fails.
func (s *Service) ImproveAll(now bool) {
	fs, err := s.cfg.Store.Factories()
	if err != nil {
		s.cfg.Log.Error("self-improvement", "err", err)
		return
	}
	for _, f := range fs {
		if _, err := s.Improve(f.UID, now); err != nil {
			s.cfg.Log.Error("self-improvement", "factory", f.Name, "err", err)
		}
	}
}

// Improve starts a self-improvement run for each agent of the factory
// whose unaddressed failures reached the threshold, or whose oldest is a
// week old; now (the dashboard's and the API's "Run now") starts one for
// every agent with at least one. It returns the runs it started.
func (s *Service) Improve(factoryUID string, now bool) ([]*factory.ImprovementProposal, error) {
	s.improving.Lock()
	defer s.improving.Unlock()
	f, err := s.factoryOf(factoryUID)
	if err != nil {
		return nil, err
	}
	byAgent, err := s.cfg.Store.Regressions(f.UID)
	if err != nil {
		return nil, err
	}
	threshold := DefaultFailedRunThreshold
	if si := f.Settings.SelfImprovement; si != nil && si.FailedRunThreshold > 0 {
		threshold = si.FailedRunThreshold
	}
	var out []*factory.ImprovementProposal
	for _, agent := range sortedKeys(byAgent) {
		regs := byAgent[agent]
		if len(regs) == 0 || !(now || len(regs) >= threshold || s.cfg.Now().Sub(regs[0].At) >= MaxFailureAge) {
			continue
		}
		p, err := s.startImprovement(f, agent, regs)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// startImprovement starts the run that addresses an agent's failures, and
// records it (which takes the failures off the agent's list). Its ID is
// derived from the failures, so that a retry after a crash between the two
// starts no second run.
func (s *Service) startImprovement(f *factory.Factory, agent string, regs []factory.Regression) (*factory.ImprovementProposal, error) {
	keys := make([]string, 0, len(regs)+2)
	keys = append(keys, "self-improvement", f.UID)
	for _, r := range regs {
		keys = append(keys, r.RunID+"/"+r.ScorerUID)
	}
	p := &factory.ImprovementProposal{FactoryUID: f.UID, RunID: factory.DerivedID(factory.PrefixRun, keys...), Agent: agent,
		Regressions: regs, Reviewers: reviewersOf(f.Settings.SelfImprovement), CreatedAt: s.cfg.Now().UTC()}
	prompt := ImprovementPrompt(f, p)
	req := runs.CreateRequest{ID: p.RunID, Prompt: prompt, Title: "Self-improvement: " + agent, Source: factory.SourceSelfImprovement,
		FactoryUID: f.UID, Metadata: map[string]string{"agent": agent}, ErrorOnUnknownEnvironment: true,
		Creator: &factory.Creator{Type: "service_account", UID: "self-improvement", DisplayName: "self-improvement"}}
	// The run is the foreman's, with its settings (harness, runner,
	// skills), on the factory's repositories; its prompt is the task's
	// alone.
	ag, err := automations.ResolveAgent(s.cfg.Store, s.cfg.Runs, f, "", nil)
	if err != nil {
		return nil, err
	}
	if ag != nil {
		ag.Apply(&req)
		req.Prompt = prompt
	}
	if _, err := s.cfg.Runs.Create(req); err != nil {
		return nil, err
	}
	if err := s.cfg.Store.AddProposal(p); err != nil {
		return nil, err
	}
	s.cfg.Log.Info("self-improvement run started", "factory", f.Name, "agent", agent, "run", p.RunID, "regressions", len(regs))
	return p, nil
}

// reviewersOf says who is to review a self-improvement pull request.
func reviewersOf(si *factory.SelfImprovement) []string {
	if si == nil {
		return nil
	}
	switch si.ReviewerType {
	case "custom":
		return si.ReviewerEmails
	case "admins":
		return []string{"the team's admins"}
	case "team":
		return []string{"the team"}
	}
	return nil
}

// ImprovementPrompt is what a self-improvement run is asked: to find what
// the failures have in common, to propose a fix as one pull request
// against the code or the factory's definition, and to put the
// Regressions addressed section in its description.
func ImprovementPrompt(f *factory.Factory, p *factory.ImprovementProposal) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Self-improvement of agent %s, factory %s\n\n", p.Agent, f.Name)
	fmt.Fprintf(&b, "%d of agent %s's runs failed or were scored below their scorers' thresholds (listed below). "+
		"Find what they have in common and propose a fix as one pull request: a change to the code, or to the factory's "+
		"definition (the agent's prompt in agents/%s/agent.md, its skills, its configuration) where that is the cause. "+
		"Open the pull request; nothing is adopted without review.\n\n", len(p.Regressions), p.Agent, p.Agent)
	b.WriteString("Put the following section in the pull request's description as it is.\n\n")
	b.WriteString(RegressionsSection(p.Regressions))
	if len(p.Reviewers) > 0 {
		fmt.Fprintf(&b, "\nAsk for review from: %s.\n", strings.Join(p.Reviewers, ", "))
	}
	return b.String()
}

// RegressionsSection is the Markdown list of what a self-improvement
// pull request addresses: each failing run, and the scorer's result.
func RegressionsSection(regs []factory.Regression) string {
	var b strings.Builder
	b.WriteString(RegressionsHeading + "\n\n")
	for _, r := range regs {
		fmt.Fprintf(&b, "- run %s", r.RunID)
		if r.Title != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(r.Title))
		}
		if r.ScorerUID != "" {
			fmt.Fprintf(&b, ": scorer %s classified it %s", r.ScorerName, r.Classification)
		} else {
			fmt.Fprintf(&b, ": %s", r.State)
		}
		if r.Reason != "" {
			fmt.Fprintf(&b, ": %s", oneLine(clip(r.Reason, 300)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

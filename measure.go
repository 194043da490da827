package factory

import "time"

// Measure and improve (docs/measure-and-improve.md): scorers judge
// completed runs, benchmarks run a suite's tasks under configurations,
// self-improvement turns repeated failures into a pull request. Judge,
// trial and self-improvement runs are ordinary runs with sources of their
// own.
const (
	SourceScorer          = "RUN_SCORER"
	SourceBenchmarkTrial  = "BENCHMARK_TRIAL"
	SourceSelfImprovement = "SELF_IMPROVEMENT"
)

// Score attempt statuses, and what asked for the attempt (the SDK's
// attempt_status and trigger_source; benchmark is this server's for a
// trial's judges).
const (
	ScoreInFlight = "in_flight"
	ScoreScored   = "scored"
	ScoreFailed   = "failed"

	ScoreAutomatic = "automatic"
	ScoreManual    = "manual"
	ScoreBenchmark = "benchmark"
)

// MaxScoreReason bounds a judge's reason as it is kept (the SDK: reasons
// are truncated beyond 8 KB).
const MaxScoreReason = 8 << 10

// Score is a scorer's latest attempt on a run: the judge run that made
// it, and, once one has answered, its classification, the score that
// label carries and its reason. A new attempt keeps the last live score
// (Status scored, InFlight true) until its judge answers.
type Score struct {
	ScorerUID  string `json:"scorer_uid"`
	ScorerName string `json:"scorer_name"`
	FactoryUID string `json:"factory_uid"`
	RunID      string `json:"run_id"`
	// Agent is the judged run's agent: self-improvement groups failures
	// by it.
	Agent       string    `json:"agent,omitempty"`
	JudgeRunID  string    `json:"judge_run_id,omitempty"`
	Trigger     string    `json:"trigger"`
	Status      string    `json:"status"`
	InFlight    bool      `json:"in_flight"`
	AttemptedAt time.Time `json:"attempted_at"`
	// The live score: the label the judge chose, its score, when and why.
	Classification string     `json:"classification,omitempty"`
	Value          *float64   `json:"score,omitempty"`
	ScoredAt       *time.Time `json:"scored_at,omitempty"`
	Reason         string     `json:"reason,omitempty"`
	// Error says why the latest attempt failed (the judge's run failed,
	// or its answer named no label of the scorer).
	Error string `json:"error,omitempty"`
	// Threshold is the scorer's passingScore when the score was recorded;
	// the API derives pass or fail against the current one.
	Threshold float64 `json:"threshold"`
	// SelfImprovement says whether a failing score feeds
	// self-improvement (the scorer's selfImprovement).
	SelfImprovement bool `json:"self_improvement,omitempty"`
	// Labels are the scorer's labels when the attempt was made: the
	// judge's label is scored by them.
	Labels []ScoreLabel `json:"labels,omitempty"`
}

// ScoreLabel is a label a scorer's judge may choose, and its score.
type ScoreLabel struct {
	Value       string  `json:"value"`
	Score       float64 `json:"score"`
	Description string  `json:"description,omitempty"`
}

// Passed reports whether the live score meets a threshold; false without
// a live score.
func (s *Score) Passed(threshold float64) bool {
	return s.Value != nil && *s.Value >= threshold
}

// Benchmark run states (the SDK's lifecycle of a benchmark run).
const (
	BenchPending   = "pending"
	BenchRunning   = "running"
	BenchScoring   = "scoring"
	BenchCompleted = "completed"
	BenchFailed    = "failed"
	BenchCancelled = "cancelled"
)

// BenchmarkRun is a launched suite: its configurations, tasks and
// repetitions frozen at launch, and a trial for each (task, configuration,
// repetition), each an ordinary run scored by the run's scorers.
type BenchmarkRun struct {
	UID         string      `json:"uid"`
	FactoryUID  string      `json:"factory_uid"`
	SuiteUID    string      `json:"suite_uid"`
	SuiteName   string      `json:"suite_name"`
	AgentName   string      `json:"agent_name"`
	AgentUID    string      `json:"agent_uid"`
	State       string      `json:"state"`
	Repetitions int         `json:"repetition_count"`
	Configs     []BenchConf `json:"configurations"`
	Tasks       []BenchTask `json:"tasks"`
	// Scorers are the scorers applied to every trial: the built-in
	// correctness scorer first, then the factory's selected ones.
	Scorers     []BenchScorer `json:"scorers"`
	Trials      []Trial       `json:"trials"`
	Creator     *Creator      `json:"creator,omitempty"`
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
	StartedAt   *time.Time    `json:"started_at,omitempty"`
	CompletedAt *time.Time    `json:"completed_at,omitempty"`
	// Incomplete says why a failed or cancelled run's results are partial.
	Incomplete string `json:"incomplete_reason,omitempty"`
}

// BenchConf is a configuration of a benchmark run: the model or harness
// each of the suite's agents runs with.
type BenchConf struct {
	ID          int              `json:"id"`
	Role        string           `json:"role"`
	DisplayName string           `json:"display_name"`
	Model       string           `json:"model,omitempty"`
	Harness     string           `json:"harness,omitempty"`
	AuthSecret  string           `json:"harness_auth_secret_name,omitempty"`
	Agents      []BenchAgentConf `json:"agent_configs,omitempty"`
}

// BenchAgentConf is one agent's model and harness in a configuration.
type BenchAgentConf struct {
	AgentUID   string `json:"agent_uid"`
	AgentName  string `json:"agent_name,omitempty"`
	Model      string `json:"model"`
	Harness    string `json:"harness"`
	AuthSecret string `json:"harness_auth_secret_name,omitempty"`
}

// BenchTask is a suite's task as launched.
type BenchTask struct {
	ID              int64          `json:"id"`
	UID             string         `json:"uid"`
	Name            string         `json:"name"`
	Title           string         `json:"title"`
	Prompt          string         `json:"prompt"`
	SuccessCriteria string         `json:"success_criteria"`
	Repositories    []RepoCheckout `json:"repositories,omitempty"`
}

// BenchScorer is a scorer a benchmark run applies to its trials.
type BenchScorer struct {
	UID       string  `json:"uid"`
	ID        int64   `json:"id"`
	Name      string  `json:"name"`
	Kind      string  `json:"kind"` // user or benchmark_task_correctness
	Threshold float64 `json:"threshold"`
}

// Trial is one run of one task under one configuration. Its scores are
// the scores of its run (Score, by scorer and run).
type Trial struct {
	ID       int      `json:"id"`
	ConfigID int      `json:"configuration_id"`
	TaskUID  string   `json:"task_uid"`
	Rep      int      `json:"rep_index"`
	RunID    string   `json:"run_id,omitempty"`
	State    RunState `json:"state,omitempty"`
}

// ImprovementProposal is a self-improvement run: the agent whose failures
// it addresses, and those failures (the regressions).
type ImprovementProposal struct {
	FactoryUID  string       `json:"factory_uid"`
	RunID       string       `json:"run_id"`
	Agent       string       `json:"agent"`
	Regressions []Regression `json:"regressions"`
	Reviewers   []string     `json:"reviewers,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
}

// Regression is one failure a self-improvement run addresses: a run that
// failed, or that a scorer found below its threshold.
type Regression struct {
	RunID          string    `json:"run_id"`
	Title          string    `json:"title,omitempty"`
	At             time.Time `json:"at"`
	ScorerUID      string    `json:"scorer_uid,omitempty"`
	ScorerName     string    `json:"scorer_name,omitempty"`
	Classification string    `json:"classification,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	State          RunState  `json:"state,omitempty"`
}

package factory

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// The layout of a factory repository (docs/definitions.md): the one place that
// knows it. Sources read these paths, the loader sorts files by them, the
// plan and its messages name them, and the watcher watches them. Two layouts
// live side by side: this project's first, flat one (factory.yaml,
// webhooks/<name>.yaml, automations/<name>.md) and the product's v1alpha1 tree
// (docs/spec/v1alpha1.md), which adds agents, runners, scorers, benchmark
// suites and skills, and nests an automation in its own folder.
const (
	// SettingsFile is factory.yaml at the root: optional in the flat
	// layout, required (with schemaVersion) in a v1alpha1 tree.
	SettingsFile = "factory.yaml"

	WebhooksDir    = "webhooks"    // <name>.yaml
	AutomationsDir = "automations" // <name>.md, or <name>/automation.md
	AgentsDir      = "agents"      // <name>/agent.md, <name>/skills/<skill>/SKILL.md
	RunnersDir     = "runners"     // <name>.yaml
	ScorersDir     = "scorers"     // <dir>/scorer.md
	BenchmarksDir  = "benchmarks"  // <suite>/suite.yaml, <suite>/tasks/<task>.yaml
	SkillsDir      = "skills"      // <skill>/SKILL.md and the skill's other files

	// SkillFile names a skill's main file, as the Agent Skills format does.
	SkillFile = "SKILL.md"
)

// KnownDirs are the top-level folders of a factory repository. Everything
// inside them is read; nothing there is silently ignored.
var KnownDirs = []string{AgentsDir, AutomationsDir, BenchmarksDir, RunnersDir, ScorersDir, SkillsDir, WebhooksDir}

// MaxTreeDepth bounds how deep a source descends into a known folder: the
// deepest definition is agents/<a>/skills/<s>/SKILL.md, and a skill may
// keep its own files in a few folders below that.
const MaxTreeDepth = 8

// Kinds of definition file.
const (
	FileSettings   = "settings"
	FileWebhook    = "webhook"
	FileAutomation = "automation"
	FileAgent      = "agent"
	FileRunner     = "runner"
	FileScorer     = "scorer"
	FileSuite      = "benchmark_suite"
	FileTask       = "benchmark_suite_task"
	FileSkill      = "skill"      // a SKILL.md
	FileSkillAsset = "skill_file" // any other file of a skill's folder
)

// DefinitionPath is what a file's path says: which kind of definition it
// holds, and whose.
type DefinitionPath struct {
	Kind string
	// Name is the definition's name: the file or folder name that the
	// layout makes its identity.
	Name string
	// Owner is the suite of a task, or the agent of an agent's own skill
	// ("" for a skill of every agent).
	Owner string
	// Asset is a skill file's path inside the skill's folder.
	Asset string
	// Nested is true for automations/<name>/automation.md.
	Nested bool
}

// SkillKey is the key of a skill: its name, or <agent>/<name> for a skill
// of one agent only.
func (p DefinitionPath) SkillKey() string {
	if p.Owner == "" {
		return p.Name
	}
	return p.Owner + "/" + p.Name
}

// ParsePath tells what a slash-separated path of a factory repository
// holds. A path inside a known folder that fits no definition is an error
// that says what the folder holds; a path outside them is not a definition
// (ok false, no error).
func ParsePath(p string) (DefinitionPath, bool, error) {
	if p == SettingsFile {
		return DefinitionPath{Kind: FileSettings}, true, nil
	}
	parts := strings.Split(p, "/")
	if len(parts) < 2 || slices.Contains(parts, "") {
		return DefinitionPath{}, false, nil // not a path a repository holds
	}
	switch parts[0] {
	case WebhooksDir:
		return flat(parts, FileWebhook, ".yaml", "webhooks/ holds only <name>.yaml files")
	case RunnersDir:
		return flat(parts, FileRunner, ".yaml", "runners/ holds only <name>.yaml files")
	case AutomationsDir:
		if len(parts) == 3 && parts[2] == "automation.md" {
			return DefinitionPath{Kind: FileAutomation, Name: parts[1], Nested: true}, true, nil
		}
		return flat(parts, FileAutomation, ".md", "automations/ holds <name>/automation.md folders and <name>.md files")
	case AgentsDir:
		switch {
		case len(parts) == 3 && parts[2] == "agent.md":
			return DefinitionPath{Kind: FileAgent, Name: parts[1]}, true, nil
		case len(parts) >= 5 && parts[2] == SkillsDir:
			return skillPath(parts[3:], parts[1])
		}
		return DefinitionPath{}, true, fmt.Errorf("unexpected file: an agent is agents/<name>/agent.md, and its own skills agents/<name>/skills/<skill>/SKILL.md")
	case ScorersDir:
		if len(parts) == 3 && parts[2] == "scorer.md" {
			return DefinitionPath{Kind: FileScorer, Name: parts[1]}, true, nil
		}
		return DefinitionPath{}, true, fmt.Errorf("unexpected file: a scorer is scorers/<name>/scorer.md")
	case BenchmarksDir:
		switch {
		case len(parts) == 3 && parts[2] == "suite.yaml":
			return DefinitionPath{Kind: FileSuite, Name: parts[1]}, true, nil
		case len(parts) == 4 && parts[2] == "tasks" && strings.HasSuffix(parts[3], ".yaml"):
			return DefinitionPath{Kind: FileTask, Name: strings.TrimSuffix(parts[3], ".yaml"), Owner: parts[1]}, true, nil
		}
		return DefinitionPath{}, true, fmt.Errorf("unexpected file: a benchmark suite is benchmarks/<suite>/suite.yaml with its tasks in benchmarks/<suite>/tasks/<task>.yaml")
	case SkillsDir:
		return skillPath(parts[1:], "")
	}
	return DefinitionPath{}, false, nil
}

func flat(parts []string, kind, ext, layout string) (DefinitionPath, bool, error) {
	if len(parts) == 2 {
		if name, ok := strings.CutSuffix(parts[1], ext); ok && name != "" {
			return DefinitionPath{Kind: kind, Name: name}, true, nil
		}
	}
	return DefinitionPath{}, true, fmt.Errorf("unexpected file: %s", layout)
}

// skillPath reads <skill>/SKILL.md or <skill>/<any file of the skill>.
func skillPath(rest []string, owner string) (DefinitionPath, bool, error) {
	if len(rest) < 2 {
		where := "skills/<skill>/SKILL.md"
		if owner != "" {
			where = "agents/<name>/skills/<skill>/SKILL.md"
		}
		return DefinitionPath{}, true, fmt.Errorf("unexpected file: a skill is a folder, %s, with any files it needs beside SKILL.md", where)
	}
	d := DefinitionPath{Kind: FileSkill, Name: rest[0], Owner: owner}
	if len(rest) > 2 || rest[1] != SkillFile {
		d.Kind, d.Asset = FileSkillAsset, path.Join(rest[1:]...)
	}
	return d, true, nil
}

// IsKnownDir reports whether name is one of the top-level folders.
func IsKnownDir(name string) bool {
	for _, d := range KnownDirs {
		if d == name {
			return true
		}
	}
	return false
}

// WebhookFile is the path of a webhook's file.
func WebhookFile(key string) string { return path.Join(WebhooksDir, key+".yaml") }

// AutomationFile is the path of a flat automation's file.
func AutomationFile(key string) string { return path.Join(AutomationsDir, key+".md") }

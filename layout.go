package factory

import "path"

// The layout of a factory repository (docs/spec/definitions.md): the one place that
// knows it. Sources read these paths, the loader sorts files by them, the
// plan and its messages name them, and the watcher watches them.
const (
	// SettingsFile is the optional factory.yaml at the root.
	SettingsFile = "factory.yaml"
	// WebhooksDir holds one webhook per <name>.yaml file.
	WebhooksDir = "webhooks"
	// AutomationsDir holds one automation per <name>.md file.
	AutomationsDir = "automations"
)

// DefinitionDir is a folder of definitions: each file in it is one
// definition named by its file name without the extension.
type DefinitionDir struct {
	Dir, Ext string
}

// DefinitionDirs are the folders whose every entry is a definition.
var DefinitionDirs = []DefinitionDir{{WebhooksDir, ".yaml"}, {AutomationsDir, ".md"}}

// DefinitionExt is the extension of the files of a definition folder, or
// "" when dir is not one.
func DefinitionExt(dir string) string {
	for _, d := range DefinitionDirs {
		if d.Dir == dir {
			return d.Ext
		}
	}
	return ""
}

// WebhookFile is the path of a webhook's file.
func WebhookFile(key string) string { return path.Join(WebhooksDir, key+".yaml") }

// AutomationFile is the path of an automation's file.
func AutomationFile(key string) string { return path.Join(AutomationsDir, key+".md") }

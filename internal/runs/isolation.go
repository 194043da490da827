package runs

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"factory/internal/confine"
)

// Isolation says how the agents this process runs are kept from the server
// and from each other: their confinement (Landlock, or none and why), and
// a warning for each case where they are not (docs/security.md). serve
// logs it at start; status shows it.
type Isolation struct {
	Confinement string   `json:"confinement"`
	Confined    bool     `json:"confined"`
	Warnings    []string `json:"warnings,omitempty"`
}

// Isolation is this manager's.
func (m *Manager) Isolation() Isolation {
	how, ok := confine.Describe()
	iso := Isolation{Confinement: how, Confined: ok && m.cfg.Confinement != nil}
	if ok && m.cfg.Confinement == nil {
		iso.Confinement = "none: turned off (runtime.confine: false)"
	}
	var unconfined []string
	byUser := map[uint32][]string{}
	for _, name := range slices.Sorted(maps.Keys(m.cfg.Environments)) {
		env := m.cfg.Environments[name]
		confined := iso.Confined && !env.Unconfined
		switch {
		case env.RunAs != nil && !confined:
			byUser[env.RunAs.Uid] = append(byUser[env.RunAs.Uid], name)
		case env.RunAs == nil && !confined:
			unconfined = append(unconfined, name)
		case env.RunAs == nil && os.Geteuid() == 0:
			iso.Warnings = append(iso.Warnings, fmt.Sprintf("environment %s: its agents run as root, the server's user: confined to their "+
				"folders, they still read other processes' environments through /proc (root may trace any process); run the server as a user of its own", name))
		}
	}
	if len(unconfined) > 0 {
		iso.Warnings = append(iso.Warnings, fmt.Sprintf("%s: agents run as the server's user, unconfined: each can read "+
			"the data directory (its keys, its store) and every run's workspace; confine them (Landlock) or give them a user:",
			environments(unconfined)))
	}
	for _, uid := range slices.Sorted(maps.Keys(byUser)) {
		names := byUser[uid]
		if len(names) > 1 || m.cfg.MaxConcurrent > 1 {
			iso.Warnings = append(iso.Warnings, fmt.Sprintf("%s: agents run as user %d, unconfined: runs that share a "+
				"user share everything: each reads the others' workspaces and, through /proc, their environments and secrets",
				environments(names), uid))
		}
	}
	return iso
}

// environments names environments in a warning.
func environments(names []string) string {
	if len(names) == 1 {
		return "environment " + names[0]
	}
	return "environments " + strings.Join(names, ", ")
}

// EnvironmentIsolation is the warning that applies to an environment's
// runs ("environment NAME: ..."), or "" when they are kept from the
// server's files and from each other: for a plan that names the agents
// they would run.
func (m *Manager) EnvironmentIsolation(name string) string {
	env, ok := m.cfg.Environments[name]
	_, landlock := confine.Describe()
	if !ok || landlock && m.cfg.Confinement != nil && !env.Unconfined {
		return ""
	}
	if env.RunAs == nil {
		return fmt.Sprintf("environment %s: its agents run as the server's user, unconfined: each can read the data directory "+
			"(its keys, its store) and every run's workspace", name)
	}
	var sharing []string
	for other, e := range m.cfg.Environments {
		if other != name && e.RunAs != nil && e.RunAs.Uid == env.RunAs.Uid {
			sharing = append(sharing, other)
		}
	}
	if len(sharing) == 0 && m.cfg.MaxConcurrent <= 1 {
		return ""
	}
	slices.Sort(sharing)
	with := "runs of it at the same time"
	if len(sharing) > 0 {
		with = "environments " + strings.Join(sharing, ", ") + " and runs of it at the same time"
	}
	return fmt.Sprintf("environment %s: its agents run as user %d, unconfined, shared with %s: runs that share a user share "+
		"everything: each reads the others' workspaces and, through /proc, their environments and secrets", name, env.RunAs.Uid, with)
}

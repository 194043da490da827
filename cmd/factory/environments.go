package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"syscall"
	"time"

	"factory/internal/harness"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/secrets"
	"factory/internal/server"
	"factory/internal/store"
)

// DefaultEnvironment is the built-in environment of a server without a
// configuration file: the bundled demo agent, over ACP (docs/spec/runtime.md).
const DefaultEnvironment = "default"

type runtimeConfig struct {
	MaxConcurrentRuns  int               `json:"maxConcurrentRuns"`
	DefaultEnvironment string            `json:"defaultEnvironment"`
	Harnesses          map[string]string `json:"harnesses"`
	// Confine confines every agent of this process to its run's folders
	// (Landlock, where the kernel has it): true unless set false.
	Confine         *bool  `json:"confine"`
	ApprovalTimeout string `json:"approvalTimeout"`
}

type environmentConfig struct {
	Executor    string            `json:"executor"`
	Command     []string          `json:"command"`
	Env         map[string]string `json:"env"`
	Timeout     string            `json:"timeout"`
	Permissions string            `json:"permissions"`
	// ApprovalTimeout is how long its tool calls wait for a person
	// (permissions ask), over runtime.approvalTimeout.
	ApprovalTimeout string `json:"approvalTimeout"`
	// User runs the agents as this user (the server must be root or hold
	// CAP_SETUID and CAP_SETGID): the data directory's keys are then out
	// of their reach.
	User string `json:"user"`
	// Confine false runs this environment's agents unconfined; ReadOnly
	// are more paths its confined agents read (where its harness is
	// installed, beyond the folders of the programs its command names).
	Confine  *bool    `json:"confine"`
	ReadOnly []string `json:"readOnly"`
}

// runManager builds the run manager of a server from its configuration:
// the environments it defines, or the built-in demo environment.
// hosts, when set, gives it the workers as a host of turns.
// maxConcurrentRuns is runtime.maxConcurrentRuns, or the run manager's
// default (4); a configuration that does not read is runManager's to say.
func maxConcurrentRuns(cfg *server.FileConfig) int {
	var rc runtimeConfig
	if json.Unmarshal(cfg.Runtime, &rc) != nil || rc.MaxConcurrentRuns <= 0 {
		return 4
	}
	return rc.MaxConcurrentRuns
}

// runManager builds the run manager of a server from its configuration:
// the environments it defines, or the built-in demo environment. hidden
// are paths no agent may reach besides the data directory (the
// configuration file, credentials files); hosts, when set, gives it the
// workers as a host of turns. It logs how its agents are confined.
func runManager(cfg *server.FileConfig, s *store.Store, kr *secrets.Keyring, dataDir string, hidden []string, log *slog.Logger, hosts func(*runs.Config)) (*runs.Manager, error) {
	var rc runtimeConfig
	if len(cfg.Runtime) > 0 {
		if err := json.Unmarshal(cfg.Runtime, &rc); err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
	}
	envs, err := environments(cfg)
	if err != nil {
		return nil, err
	}
	def := rc.DefaultEnvironment
	if def == "" {
		def = DefaultEnvironment
	}
	if _, ok := envs[def]; !ok {
		return nil, fmt.Errorf("runtime.defaultEnvironment %q names no environment", def)
	}
	for harness, env := range rc.Harnesses {
		if _, ok := envs[env]; !ok {
			return nil, fmt.Errorf("runtime.harnesses.%s: %q names no environment", harness, env)
		}
	}
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	if rc.Harnesses, err = harnessEnvironments(envs, rc.Harnesses, filepath.Join(dir, "harnesses")); err != nil {
		return nil, err
	}
	approval, _ := time.ParseDuration(rc.ApprovalTimeout) // the schema has checked it
	c := runs.Config{Store: s, DataDir: dir, Environments: envs, DefaultEnvironment: def, ApprovalTimeout: approval,
		MaxConcurrent: rc.MaxConcurrentRuns, Log: log, Harnesses: rc.Harnesses,
		SecretValue: func(name string) ([]byte, error) { return secrets.Current(s, kr, name) },
		Unconfined:  rc.Confine != nil && !*rc.Confine, Confinement: &runtime.Confinement{Hidden: hidden}}
	if hosts != nil {
		hosts(&c)
	}
	m := runs.NewManager(c)
	iso := m.Isolation()
	log.Info("agents", "confinement", iso.Confinement)
	for _, w := range iso.Warnings {
		log.Warn("agents: " + w)
	}
	return m, nil
}

// environments are the configuration's environments, or the built-in
// demo environment when it has none.
func environments(cfg *server.FileConfig) (map[string]runs.Environment, error) {
	envs := map[string]runs.Environment{}
	var defs map[string]environmentConfig
	if len(cfg.Environments) > 0 {
		if err := json.Unmarshal(cfg.Environments, &defs); err != nil {
			return nil, fmt.Errorf("environments: %w", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		env, err := environmentOf(name, defs[name])
		if err != nil {
			return nil, err
		}
		envs[name] = env
	}
	if len(envs) == 0 {
		self, err := selfPath()
		if err != nil {
			return nil, err
		}
		envs[DefaultEnvironment] = runs.Environment{Executor: &runtime.ACPExecutor{Command: []string{self, "demo-agent", "--acp"}}, Timeout: 10 * time.Minute}
	}
	return envs, nil
}

// harnessEnvironments maps the built-in harnesses to environments: the
// one runtime.harnesses names, else the configuration's environment of the
// harness's name, else, when the harness is installed under dir, an
// environment of its own of that name (its agent over ACP, through
// factory harnesses exec), which runs that harness
// (runs.Environment.Harness). It returns the harnesses' mapping. Whatever
// environment runs it, a harness's agent reaches its model through the
// model gateway (runs.Config.HarnessSetup).
func harnessEnvironments(envs map[string]runs.Environment, mapped map[string]string, dir string) (map[string]string, error) {
	out := maps.Clone(mapped)
	if out == nil {
		out = map[string]string{}
	}
	for _, h := range harness.Harnesses {
		if _, ok := out[h.Name]; ok {
			continue
		}
		if _, ok := envs[h.Name]; ok {
			out[h.Name] = h.Name
			continue
		}
		if h.Installed(dir) == "" {
			continue
		}
		self, err := selfPath()
		if err != nil {
			return nil, err
		}
		envs[h.Name] = runs.Environment{Executor: &runtime.ACPExecutor{Command: []string{self, "harnesses", "exec", h.Name}},
			Timeout: HarnessTimeout, Harness: h.Name, ReadOnly: []string{dir}} // confined agents read their harness's programs
		out[h.Name] = h.Name
	}
	return out, nil
}

// HarnessTimeout bounds a turn of an installed harness's own environment
// (a budget's maxDuration bounds a run).
const HarnessTimeout = time.Hour

// environmentOf is a configured environment as the run manager takes it.
func environmentOf(name string, d environmentConfig) (runs.Environment, error) {
	env := runs.Environment{Executor: &runtime.ExecExecutor{Command: d.Command}}
	if d.Executor == "acp" {
		env.Executor = &runtime.ACPExecutor{Command: d.Command, Permissions: d.Permissions}
	}
	for k, v := range d.Env {
		env.Env = append(env.Env, k+"="+os.ExpandEnv(v)) // "${GEMINI_API_KEY}" comes from the server's environment
	}
	sort.Strings(env.Env)
	if d.User != "" {
		cred, err := credentialOf(d.User)
		if err != nil {
			return env, fmt.Errorf("environment %s: user: %w", name, err)
		}
		env.RunAs = cred
	}
	env.Unconfined, env.ReadOnly = d.Confine != nil && !*d.Confine, d.ReadOnly
	for _, t := range []struct {
		key, value string
		into       *time.Duration
	}{{"timeout", d.Timeout, &env.Timeout}, {"approvalTimeout", d.ApprovalTimeout, &env.ApprovalTimeout}} {
		if t.value == "" {
			continue
		}
		v, err := time.ParseDuration(t.value)
		if err != nil {
			return env, fmt.Errorf("environment %s: %s: %w", name, t.key, err)
		}
		*t.into = v
	}
	return env, nil
}

// selfPath is this binary, as an absolute path: runs execute in their
// workspaces, where a relative ./bin/factory would not resolve.
func selfPath() (string, error) {
	self := os.Args[0]
	if filepath.Base(self) == self {
		return exec.LookPath(self)
	}
	return filepath.Abs(self)
}

// credentialOf looks a user up by name or numeric ID.
func credentialOf(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("no user %q on this machine", name)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q has no numeric IDs", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: false}, nil
}

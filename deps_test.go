package factory_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependencies pins the shape of the tree: the domain package at the
// root depends on nothing outside the standard library, and the Go client
// depends on nothing but the domain, so that a program embedding the client
// does not link the store, git, the watcher or the agent protocol. The
// firing decision (trigger) reads events and filters, never the store.
func TestDependencies(t *testing.T) {
	for pkg, allowed := range map[string][]string{
		"factory":        {"factory"},
		"factory/client": {"factory", "factory/client"},
		"factory/internal/trigger": {"factory", "factory/internal/trigger", "factory/internal/events", "factory/internal/filter",
			"github.com/robfig/cron/v3"},
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if !slices.Contains(allowed, dep) {
				t.Errorf("%s depends on %s: it may depend on %s and the standard library only", pkg, dep, strings.Join(allowed, ", "))
			}
		}
	}
	// A worker (factory worker) holds only the turns it is given: its
	// package reaches neither the control plane's store nor its NATS
	// server, and the executors it runs turns with do not either.
	for _, pkg := range []string{"factory/internal/worker", "factory/internal/runtime", "factory/internal/docker"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "factory/internal/store" || dep == "github.com/cockroachdb/pebble" || dep == "github.com/nats-io/nats-server/v2/server" {
				t.Errorf("%s depends on %s: a worker must not link the control plane's store or NATS server", pkg, dep)
			}
		}
	}
	// The heavy dependencies each stay in their room: the store, the git
	// source (and its test helper), the watcher, the runtime's client side
	// of ACP (and the demo agent's agent side), the schema validator, NATS,
	// the Docker client, Landlock.
	rooms := map[string][]string{
		"github.com/cockroachdb/pebble":                {"factory/internal/store"},
		"github.com/go-git/go-git/v5":                  {"factory/internal/reconciler/gitsource", "factory/internal/reconciler/gitsource/gittest"},
		"github.com/fsnotify/fsnotify":                 {"factory/internal/reconciler/watch"},
		"github.com/coder/acp-go-sdk":                  {"factory/internal/runtime", "factory/cmd/factory"},
		"github.com/santhosh-tekuri/jsonschema/v5":     {"factory/internal/schema", "factory/internal/apicheck"},
		"github.com/google/go-github/v88/github":       {"factory/internal/codehost/github"},
		"github.com/bradleyfalzon/ghinstallation/v2":   {"factory/internal/codehost/github"},
		"gitlab.com/gitlab-org/api/client-go":          {"factory/internal/codehost/gitlab"},
		"github.com/nats-io/nats-server/v2/server":     {"factory/internal/workers"},
		"github.com/nats-io/nats.go":                   {"factory/internal/workers", "factory/internal/worker"},
		"github.com/nats-io/nats.go/jetstream":         {"factory/internal/workers", "factory/internal/worker"},
		"github.com/moby/moby/client":                  {"factory/internal/docker", "factory/internal/docker/dockertest"},
		"github.com/modelcontextprotocol/go-sdk/mcp":   {"factory/internal/mcpserver", "factory/cmd/factory"},
		"github.com/modelcontextprotocol/go-sdk/auth":  {"factory/internal/mcpserver"},
		"github.com/landlock-lsm/go-landlock/landlock": {"factory/internal/confine"},
		// OpenTelemetry: the rest of the server starts spans through
		// internal/tracing's API.
		"go.opentelemetry.io/otel":                                        {"factory/internal/tracing"},
		"go.opentelemetry.io/otel/trace":                                  {"factory/internal/tracing"},
		"go.opentelemetry.io/otel/attribute":                              {"factory/internal/tracing"},
		"go.opentelemetry.io/otel/codes":                                  {"factory/internal/tracing"},
		"go.opentelemetry.io/otel/propagation":                            {"factory/internal/tracing"},
		"go.opentelemetry.io/otel/sdk/trace":                              {"factory/internal/tracing"},
		"go.opentelemetry.io/otel/sdk/resource":                           {"factory/internal/tracing"},
		"go.opentelemetry.io/otel/semconv/v1.43.0":                        {"factory/internal/tracing"},
		"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp": {"factory/internal/tracing"},
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for dep, importers := range rooms {
			if slices.Contains(f[1:], dep) && !slices.Contains(importers, f[0]) {
				t.Errorf("%s imports %s: only %s may", f[0], dep, strings.Join(importers, ", "))
			}
		}
	}
}

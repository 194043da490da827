package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/client"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
	"factory/internal/testbin"
)

// TestHostsAlike: wherever a run's turns run (NATS off, the default, on a
// worker), the environments list names its agent's kind the same (the ACP
// demo agent is acp), and the MCP servers its creator gave in
// config.mcp_servers are offered to the agent. The bugs it pins: with
// workers on, the demo agent was listed as exec; config.mcp_servers was
// accepted and offered to no agent.
func TestHostsAlike(t *testing.T) {
	bin := testbin.Factory(t)
	for _, mode := range []string{"off", "default", "workers"} {
		t.Run(mode, func(t *testing.T) {
			h := startWith(t, func(s *store.Store, data string) *runs.Manager {
				cfg := runs.Config{Store: s, DataDir: data, DefaultEnvironment: "demo", Log: slog.New(slog.DiscardHandler),
					Environments: map[string]runs.Environment{
						"demo": {Executor: &runtime.ACPExecutor{Command: []string{bin, "demo-agent", "--acp", "--delay", "1ms"}}},
						"sh":   {Executor: &runtime.ExecExecutor{Command: []string{"true"}}}}}
				claims := func(*runs.Manager) {}
				if mode != "off" {
					claims = hostsOnNATS(t, s, data, &cfg, mode == "workers")
				}
				m := runs.NewManager(cfg)
				claims(m)
				return m
			})
			var envs struct {
				Environments []struct {
					Name   string         `json:"name"`
					Config map[string]any `json:"config"`
				} `json:"environments"`
			}
			if err := h.c.Do(context.Background(), "GET", "/v1/agent/environments", nil, &envs); err != nil {
				t.Fatal(err)
			}
			kinds := map[string]any{}
			for _, e := range envs.Environments {
				kinds[e.Name] = e.Config["executor"]
			}
			if kinds["demo"] != "acp" || kinds["sh"] != "exec" {
				t.Errorf("environments: %v", kinds)
			}
			r, err := h.c.CreateRun(context.Background(), client.RunRequest{Prompt: "Summarise.",
				Config: map[string]any{"mcp_servers": map[string]any{"docs": map[string]any{"command": "docs-mcp", "args": []string{"--stdio"}}}}})
			if err != nil {
				t.Fatal(err)
			}
			var run *factory.Run
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if run, err = h.store.Run(r.RunID); err == nil && run.State.Terminal() || time.Now().After(deadline) {
					break
				}
			}
			if run == nil || run.State != factory.StateSucceeded {
				t.Fatalf("the run: %+v %v", run, err)
			}
			events, _ := h.store.RunEvents(r.RunID)
			b, _ := json.Marshal(events)
			if !strings.Contains(string(b), "was offered MCP servers: docs") {
				t.Errorf("the agent was not offered config.mcp_servers:\n%s", b)
			}
		})
	}
}

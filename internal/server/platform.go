package server

import (
	"math"
	"net/http"
	"sort"
	"time"

	"factory"
)

// The rest of the platform API's calls (docs/agents-api.md): the models
// the configured harnesses offer, the ranges outbound traffic comes from,
// and what a run used, left behind and was scored.

func (s *Server) platformRoutes(mux *routes) {
	read := func(h handler) http.Handler { return s.auth(h, factory.ScopeRuns, factory.ScopeRead) }
	readRuns := func(h handler) http.Handler { return s.auth(s.needRuns(h), factory.ScopeRuns, factory.ScopeRead) }
	mux.Handle("GET /v1/agent/models", read(s.listModels))
	mux.Handle("GET /v1/networking/egress-ranges", read(s.egressRanges))
	mux.Handle("GET /v1/agent/runs/{runId}/harness-usage", readRuns(s.harnessUsage))
	mux.Handle("GET /v1/agent/runs/{runId}/handoff/attachments", readRuns(s.handoffAttachments))
}

// harnessTypes are the harnesses an environment can be mapped to.
var harnessTypes = []string{factory.HarnessOz, factory.HarnessClaude, factory.HarnessCodex, factory.HarnessGemini}

// providerOfHarness is the provider of a model named for a harness.
var providerOfHarness = map[string]string{factory.HarnessOz: "UNKNOWN", factory.HarnessClaude: "ANTHROPIC",
	factory.HarnessCodex: "OPENAI", factory.HarnessGemini: "GOOGLE"}

// autoModel is the product's model ID for "the harness's own choice".
const autoModel = "auto"

// listModels is GET /v1/agent/models: the models the environments that
// run harnesses offer (environments.<name>.models), then the models the
// applied factories name that those do not list; the default is
// runtime.defaultModel, else the default environment's first, else auto.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) error {
	models := []map[string]any{}
	seen := map[string]bool{}
	add := func(m Model, harness string) {
		if seen[m.ID] {
			return
		}
		seen[m.ID] = true
		o := map[string]any{"id": m.ID, "display_name": m.Name, "provider": m.Provider, "vision_supported": m.Vision}
		if m.Name == "" {
			o["display_name"] = m.ID
		}
		if m.Provider == "" {
			o["provider"] = providerOfHarness[harness]
		}
		if m.Description != "" {
			o["description"] = m.Description
		}
		if m.ReasoningLevel != "" {
			o["reasoning_level"] = m.ReasoningLevel
		}
		if harness != "" {
			o["harness"] = harness
		}
		models = append(models, o)
	}
	def := s.cfg.DefaultModel
	if s.cfg.Runs != nil {
		if envModels := s.cfg.Models[s.cfg.Runs.DefaultEnvironment()]; def == "" && len(envModels) > 0 {
			def = envModels[0].ID
		}
		for _, h := range harnessTypes {
			if env, ok := s.cfg.Runs.HarnessEnvironment(h); ok {
				for _, m := range s.cfg.Models[env] {
					add(m, h)
				}
			}
		}
	}
	named, err := s.namedModels()
	if err != nil {
		return err
	}
	for _, nm := range named {
		add(Model{ID: nm[0], Description: "named by the factories' definitions"}, nm[1])
	}
	if def == "" {
		def = autoModel
	}
	if !seen[def] {
		add(Model{ID: def, Description: "the harness's own choice of model"}, factory.HarnessOz)
	}
	writeJSON(w, http.StatusOK, map[string]any{"default_model_id": def, "models": models})
	return nil
}

// namedModels are the models (with their harness) that the applied
// factories' agent defaults and agents name, sorted.
func (s *Server) namedModels() ([][2]string, error) {
	agents, err := s.factoryAgents()
	if err != nil {
		return nil, err
	}
	set := map[[2]string]bool{}
	for _, a := range agents {
		if h := a.exec.EffectiveHarness(); h != nil && h.Model != "" {
			set[[2]string{h.Model, h.Type}] = true
		}
	}
	out := make([][2]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] || out[i][0] == out[j][0] && out[i][1] < out[j][1] })
	return out, nil
}

// egressRanges is GET /v1/networking/egress-ranges: the ranges this
// server's outbound traffic comes from, as its config lists them
// (networking.egressRanges); empty when it lists none.
func (s *Server) egressRanges(w http.ResponseWriter, r *http.Request) error {
	cidrs := s.cfg.EgressRanges
	if cidrs == nil {
		cidrs = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"cidrs": cidrs})
	return nil
}

// harnessUsage is GET /v1/agent/runs/{id}/harness-usage: what the run's
// agent consumed through the model gateway (docs/harnesses.md): its
// tokens and cost by model, its budget and what it spent, and its model
// calls (the newest maxUsageCalls). available is false until it made one;
// age_seconds is how long ago its last call was.
func (s *Server) harnessUsage(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	calls, err := s.store.ModelCalls(run.ID)
	if err != nil {
		return err
	}
	out := map[string]any{"available": len(calls) > 0, "run_id": run.ID, "conversation_id": run.Conversation(), "age_seconds": nil}
	if len(calls) == 0 {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	if sp := run.Spent; sp != nil && sp.LastCall != nil {
		out["age_seconds"] = math.Round(time.Since(*sp.LastCall).Seconds()*1000) / 1000
	}
	calls = calls[max(0, len(calls)-maxUsageCalls):]
	usage := map[string]any{"request_usage": run.Usage, "calls": calls, "spent": run.Spent}
	if run.Setup != nil && run.Setup.Budget != nil {
		usage["budget"] = run.Setup.Budget
	}
	if run.Exceeded != nil {
		usage["budget_exceeded"] = run.Exceeded
	}
	out["usage"] = usage
	writeJSON(w, http.StatusOK, out)
	return nil
}

// maxUsageCalls bounds the model calls harness-usage lists.
const maxUsageCalls = 1000

// handoffAttachments is GET /v1/agent/runs/{id}/handoff/attachments: the
// files the run's ended turns left (its FILE and SCREENSHOT artifacts),
// each with a download URL; attachment_id is the artifact's UID, which a
// follow-up's attachments take. Empty before a turn has ended.
func (s *Server) handoffAttachments(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, a := range run.Artifacts {
		if !a.HasBytes() || a.Type != factory.ArtifactFile && a.Type != factory.ArtifactScreenshot {
			continue
		}
		u, _, err := s.artifactDownloadURL(r, a.Data.UID)
		if err != nil {
			return err
		}
		name := a.Data.Filename
		if name == "" {
			name = a.Data.UID
		}
		o := map[string]any{"attachment_id": a.Data.UID, "download_url": u, "filename": name}
		if a.Data.MimeType != "" {
			o["mime_type"] = a.Data.MimeType
		}
		out = append(out, o)
	}
	writeJSON(w, http.StatusOK, map[string]any{"attachments": out})
	return nil
}

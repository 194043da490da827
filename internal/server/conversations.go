package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"factory"
	"factory/internal/cursor"
	"factory/internal/store"
)

// Conversations (docs/agents-api.md, "Conversations"): a conversation is
// the runs that share a conversation_id (a run's own, unless it was
// created with one), in the order they were created. The conversation
// paths address its newest run; its transcript and steps are those of
// every run.

func (s *Server) conversationRoutes(mux *routes) {
	runs := func(h handler) http.Handler { return s.auth(s.needRuns(h), factory.ScopeRuns) }
	readRuns := func(h handler) http.Handler { return s.auth(s.needRuns(h), factory.ScopeRuns, factory.ScopeRead) }
	mux.Handle("GET /v1/agent/conversations/{conversationId}", readRuns(s.getConversation))
	mux.Handle("GET /v1/agent/conversations/{conversationId}/redirect", handlerFunc(s, noRedirect))
	mux.Handle("GET /v1/agent/sessions/{sessionUuid}/redirect", handlerFunc(s, noRedirect))
	mux.Handle("GET /v1/agent/conversations/{conversationId}/transcript", readRuns(s.conversationTranscript))
	mux.Handle("GET /v1/agent/conversations/{conversationId}/transcript/download", s.withTokenOrKey(s.sendConversationTranscript))
	mux.Handle("GET /v1/agent/conversations/{conversationId}/screenshots/{screenshotUid}/download", readRuns(s.conversationScreenshot))
	mux.Handle("POST /v1/agent/conversations/{conversationId}/interrupt", runs(s.interruptConversation))
	mux.Handle("POST /v1/agent/conversations/{conversationId}/followups", runs(s.followUpConversation))
	mux.Handle("GET /v1/agent/runs/{runId}/transcript", readRuns(s.runTranscript))
	mux.Handle("GET /v1/agent/runs/{runId}/transcript/download", s.withTokenOrKey(s.sendRunTranscript))
}

// maxConversationRuns bounds the runs a conversation's answers read.
const maxConversationRuns = 500

// conversationRuns are the runs of a conversation, oldest first; 404
// when it has none.
func (s *Server) conversationRuns(id string) ([]*factory.Run, error) {
	page, err := s.store.ListRuns(store.RunQuery{Equal: map[string]string{"conversation": id}, SortBy: "created_at", Asc: true,
		Limit: maxConversationRuns})
	if err != nil {
		return nil, err
	}
	if len(page.Runs) == 0 {
		return nil, errorf(CodeNotFound, fmt.Sprintf("no conversation %s", id))
	}
	return page.Runs, nil
}

// newestRun is the run a conversation's follow-ups and interrupts go to.
func (s *Server) newestRun(r *http.Request) (*factory.Run, error) {
	rs, err := s.conversationRuns(r.PathValue("conversationId"))
	if err != nil {
		return nil, err
	}
	return rs[len(rs)-1], nil
}

// getConversation is GET /v1/agent/conversations/{id}: every run's turns
// as steps, oldest first.
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("conversationId")
	rs, err := s.conversationRuns(id)
	if err != nil {
		return err
	}
	steps := []factory.ConversationStep{}
	ids := []string{}
	for _, run := range rs {
		events, err := s.store.RunEvents(run.ID)
		if err != nil {
			return err
		}
		steps = append(steps, factory.BuildConversation(run, events).Steps...)
		ids = append(ids, run.ID)
	}
	writeJSON(w, http.StatusOK, map[string]any{"conversation_id": id, "steps": steps, "run_ids": ids})
	return nil
}

// noRedirect answers the redirect checks: runs here have no shared
// session to send a viewer to, nor a session to send back to a
// conversation, so the answer is always that no redirect is needed. The
// checks are unauthenticated (the SDKs send no key), so the answer says
// nothing about what exists.
func noRedirect(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// interruptConversation is POST .../conversations/{id}/interrupt: the
// newest run's turn stops, as POST /v1/agent/runs/{id}/interrupt.
func (s *Server) interruptConversation(w http.ResponseWriter, r *http.Request) error {
	run, err := s.newestRun(r)
	if err != nil {
		return err
	}
	if err := s.runs.Interrupt(r.Context(), run.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": run.ID})
	return nil
}

// followUpConversation is POST .../conversations/{id}/followups: a
// follow-up of the newest run, answered with that run's ID.
func (s *Server) followUpConversation(w http.ResponseWriter, r *http.Request) error {
	run, err := s.newestRun(r)
	if err != nil {
		return err
	}
	ans, err := s.sendFollowUp(r, run.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"followup_id": ans.ID, "outcome": ans.Outcome, "run_id": run.ID})
	return nil
}

// conversationScreenshot is GET .../conversations/{id}/screenshots/{uid}/
// download: a redirect to the download URL of a screenshot one of the
// conversation's runs reported.
func (s *Server) conversationScreenshot(w http.ResponseWriter, r *http.Request) error {
	uid := r.PathValue("screenshotUid")
	runID, a, err := s.store.Artifact(uid)
	notFound := errorf(CodeNotFound, fmt.Sprintf("conversation %s has no screenshot %s", r.PathValue("conversationId"), uid))
	if errors.Is(err, store.ErrNotFound) {
		return notFound
	}
	if err != nil {
		return err
	}
	run, err := s.store.Run(runID)
	if err != nil {
		return err
	}
	if a.Type != factory.ArtifactScreenshot || run.Conversation() != r.PathValue("conversationId") {
		return notFound
	}
	u, _, err := s.artifactDownloadURL(r, uid)
	if err != nil {
		return err
	}
	http.Redirect(w, r, u, http.StatusFound)
	return nil
}

// A transcript is the runs' timelines, one event a line (JSON Lines):
// every status message, tool call, plan and turn of the runs, as the
// timeline shows them. GET .../transcript answers 302 to a download URL
// that works without an API key for a while, as the platform's does.

const transcriptScope = "transcript:"

// runTranscript is GET /v1/agent/runs/{id}/transcript.
func (s *Server) runTranscript(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	return s.redirectToDownload(w, r, "/v1/agent/runs/"+url.PathEscape(run.ID)+"/transcript/download", "run:"+run.ID)
}

// conversationTranscript is GET /v1/agent/conversations/{id}/transcript.
func (s *Server) conversationTranscript(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("conversationId")
	if _, err := s.conversationRuns(id); err != nil {
		return err
	}
	return s.redirectToDownload(w, r, "/v1/agent/conversations/"+url.PathEscape(id)+"/transcript/download", "conversation:"+id)
}

// redirectToDownload answers 302 to path with a token for what (valid
// for downloadURLLifetime).
func (s *Server) redirectToDownload(w http.ResponseWriter, r *http.Request, path, what string) error {
	key, err := s.cursorKey()
	if err != nil {
		return err
	}
	expires := time.Now().Add(downloadURLLifetime).Unix()
	token := cursor.Seal(key, transcriptScope+what, strconv.FormatInt(expires, 10))
	http.Redirect(w, r, s.baseURL(r)+path+"?token="+url.QueryEscape(token), http.StatusFound)
	return nil
}

// withTokenOrKey serves a download to a request with its URL's token, or
// with an API key that may read runs. The handler checks the token with
// checkTranscriptToken.
func (s *Server) withTokenOrKey(h handler) http.Handler {
	withKey := s.auth(s.needRuns(h), factory.ScopeRuns, factory.ScopeRead)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("token") == "" {
			withKey.ServeHTTP(w, r)
			return
		}
		if err := s.needRuns(h)(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// checkTranscriptToken accepts a request without a token (withTokenOrKey
// has checked its key) or with a token made for what, unexpired.
func (s *Server) checkTranscriptToken(r *http.Request, what string) error {
	token := r.URL.Query().Get("token")
	if token == "" {
		return nil
	}
	key, err := s.cursorKey()
	if err != nil {
		return err
	}
	v, err := cursor.Open(key, transcriptScope+what, token)
	if err != nil {
		return errorf(CodeNotAuthorized, "token: not a download token of this transcript")
	}
	if exp, _ := strconv.ParseInt(v, 10, 64); time.Now().Unix() > exp {
		return errorf(CodeNotAuthorized, "token: this download URL has expired; ask for the transcript again")
	}
	return nil
}

func (s *Server) sendRunTranscript(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	if err := s.checkTranscriptToken(r, "run:"+run.ID); err != nil {
		return err
	}
	return s.sendTranscript(w, run.ID+".jsonl", []*factory.Run{run})
}

func (s *Server) sendConversationTranscript(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("conversationId")
	if err := s.checkTranscriptToken(r, "conversation:"+id); err != nil {
		return err
	}
	rs, err := s.conversationRuns(id)
	if err != nil {
		return err
	}
	return s.sendTranscript(w, id+".jsonl", rs)
}

// sendTranscript writes the runs' timelines as JSON Lines.
func (s *Server) sendTranscript(w http.ResponseWriter, name string, rs []*factory.Run) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, run := range rs {
		events, err := s.store.RunEvents(run.ID)
		if err != nil {
			return err
		}
		for _, e := range factory.Timeline(run.ID, events) {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
	}
	sendUntrusted(w, "application/x-ndjson", name, buf.Bytes())
	return nil
}

package server

import (
	"context"
	"encoding/json"
	"net/http"

	"factory"
	"factory/internal/problem"
)

// Talkback is what the server asks of the factories' chats and trackers:
// the Teams bot a factory has, and the check of the Bot Framework's token
// on an activity to it (internal/talkback's Registry).
type Talkback interface {
	TeamsApp(factoryName string) string
	VerifyTeams(ctx context.Context, factoryName, authorization string, activity []byte) error
}

// teamsActivity is POST /hooks/teams/<factory uid> (docs/spec/talkback.md): a
// Bot Framework activity to the factory's Teams bot. Its token is verified
// (401, counted against the failed-authentication budget, when it does
// not verify); then it is a delivery as any provider's is, whose events
// fire the factory's teams triggers or continue the run of their thread.
func (s *Server) teamsActivity(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.store.Factories()
	if err != nil {
		return err
	}
	var f *factory.Factory
	for _, c := range fs {
		if c.UID == r.PathValue("uid") {
			f = c
		}
	}
	if f == nil || s.cfg.Talkback == nil || s.cfg.Talkback.TeamsApp(f.Name) == "" {
		return problem.Errorf(problem.NotFound, "no such Teams bot")
	}
	verify := func(r *http.Request, body []byte) string {
		if err := s.cfg.Talkback.VerifyTeams(r.Context(), f.Name, r.Header.Get("Authorization"), body); err != nil {
			return "Bot Framework token: " + err.Error()
		}
		return ""
	}
	s.ingress.ServeVerified(w, r, factory.TeamsWebhook(f), verify, activityID)
	return nil
}

// activityID is an activity's ID: the Bot Framework sends an activity again
// with the same one.
func activityID(body []byte) string {
	var a struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &a) != nil || len(a.ID) > 256 {
		return ""
	}
	return a.ID
}

package automations

import (
	"errors"

	"factory"
	"factory/internal/store"
)

// prStatus is the status a pull (merge) request has after an event of it.
var prStatus = map[string]string{"pull_request_merged": "merged", "pull_request_closed": "closed", "pull_request_opened": "open",
	"pull_request_reopened": "open", "pull_request_ready": "open", "pull_request_synchronized": "open",
	"merge_request_merged": "merged", "merge_request_closed": "closed", "merge_request_opened": "open", "merge_request_reopened": "open"}

// mrActions are the statuses a GitLab merge request has after its
// event's action.
var mrActions = map[string]string{"merge": "merged", "close": "closed", "open": "open", "reopen": "open", "update": "open"}

// trackPullRequests keeps the status of a run's PULL_REQUEST artifacts
// as its code host's events say it: a pull request a run opened that is
// merged or closed reads so on the run (docs/spec/codehosts.md, Pull
// requests). A pull request of no run changes nothing.
func (e *Evaluator) trackPullRequests(evs []*factory.ProviderEvent) {
	for _, ev := range evs {
		status, ok := prStatus[ev.Event]
		if ev.Event == "merge_request" && len(ev.Fields["actions"]) > 0 {
			status, ok = mrActions[ev.Fields["actions"][0]]
		}
		if !ok || ev.Link == "" {
			continue
		}
		runID, err := e.Store.RunByExternalReference(ev.Link)
		if err != nil {
			continue
		}
		_, err = e.Store.UpdateRun(runID, true, func(r *factory.Run, b *store.Batch) error {
			changed := false
			for i := range r.Artifacts {
				a := &r.Artifacts[i]
				if a.Type == factory.ArtifactPullRequest && a.Data.URL == ev.Link && a.Data.Status != status {
					a.Data.Status, changed = status, true
				}
			}
			if !changed {
				return store.ErrNoChange
			}
			return nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			e.Log.Error("a pull request's status", "run", runID, "url", ev.Link, "err", err)
		}
	}
}

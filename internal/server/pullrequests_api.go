package server

import (
	"net/http"
	"slices"
	"time"

	"factory/internal/store"
)

// pullRequests is GET /v1/factory/{uid}/pull-requests: the pull requests
// the factory's runs produced, newest first (by when first seen), with
// the docs' filters.
func (s *Server) pullRequests(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	scope := "pull-requests/" + f.UID
	limit, pos, err := s.pageOf(r, scope, 50, 500)
	if err != nil {
		return err
	}
	keep, err := prFilter(r)
	if err != nil {
		return err
	}
	prs, last, more, err := s.store.PullRequests(f.UID, pos, limit, keep)
	if err != nil {
		return err
	}
	team, err := s.teamUID()
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, pr := range prs {
		out = append(out, prObject(pr, team))
	}
	info, err := s.sealedPage(scope, last, more)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"pull_requests": out, "page_info": info, "as_of": time.Now().UTC(), "team_uid": team, "factory_uid": f.UID})
	return nil
}

// prFilter reads the pull request list's filters.
func prFilter(r *http.Request) (func(*store.PullRequestRecord) bool, error) {
	v := r.URL.Query()
	times := map[string]*time.Time{}
	for _, k := range []string{"opened_after", "opened_before", "merged_after", "merged_before", "updated_after"} {
		if raw := v.Get(k); raw != "" {
			t, err := time.Parse(time.RFC3339, raw)
			if err != nil {
				return nil, errorf(CodeInvalidRequest, k+": an RFC 3339 time")
			}
			times[k] = &t
		}
	}
	states := v["state"]
	for _, st := range states {
		if !slices.Contains([]string{"open", "draft", "merged", "closed"}, st) {
			return nil, errorf(CodeInvalidRequest, "state: open, draft, merged or closed")
		}
	}
	repo := v.Get("repo")
	return func(pr *store.PullRequestRecord) bool {
		merged := pr.MergedAt
		return (repo == "" || pr.Repo == repo) && (len(states) == 0 || slices.Contains(states, pr.State)) &&
			after(&pr.FirstSeen, times["opened_after"]) && before(&pr.FirstSeen, times["opened_before"]) &&
			after(merged, times["merged_after"]) && before(merged, times["merged_before"]) && after(&pr.UpdatedAt, times["updated_after"])
	}, nil
}

// after and before compare a time with a bound; no bound passes, a bound
// on a time not known fails.
func after(t, bound *time.Time) bool  { return bound == nil || t != nil && !t.Before(*bound) }
func before(t, bound *time.Time) bool { return bound == nil || t != nil && t.Before(*bound) }

// prObject is a pull request as the metrics API's record. What only the
// code host's events of the pull request would say (size, reviews, human
// interactions) is not collected here: null, and history_complete false.
func prObject(pr *store.PullRequestRecord, team string) map[string]any {
	runs := []map[string]any{}
	for _, r := range pr.Runs {
		runs = append(runs, map[string]any{"run_id": r.RunID, "root_run_id": r.RootRunID, "created_at": r.CreatedAt})
	}
	var toPR, toMerge any
	if d := pr.FirstSeen.Sub(pr.KickoffAt).Seconds(); d >= 0 {
		toPR = d
	}
	if pr.MergedAt != nil {
		toMerge = pr.MergedAt.Sub(pr.KickoffAt).Seconds()
	}
	return map[string]any{"provider": pr.Provider, "repo_full_name": pr.Repo, "pr_number": pr.Number, "url": pr.URL, "title": pr.Title,
		"author_login": nil, "factory_uid": pr.Factory, "team_uid": team, "state": pr.State, "opened_at": pr.FirstSeen,
		"first_human_review_at": nil, "merged_at": pr.MergedAt, "closed_at": pr.ClosedAt, "updated_at": pr.UpdatedAt,
		"additions": nil, "deletions": nil, "changed_files": nil, "num_commits": nil, "human_interactions": nil,
		"human_code_change": nil, "history_complete": false, "runs": runs, "kickoff_at": pr.KickoffAt,
		"cycle_time": map[string]any{"kickoff_to_pr": toPR, "pr_to_first_review": nil, "first_review_to_merge": nil, "kickoff_to_merge": toMerge}}
}

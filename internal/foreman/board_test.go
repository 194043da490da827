package foreman_test

import (
	"testing"

	"factory"
	"factory/internal/foreman"
)

// TestBoard: each stage's tasks, the newest changed first, at most the
// number asked for (more says a stage holds others); the query's search
// applies to every stage; a deleted task is on no board.
func TestBoard(t *testing.T) {
	w := newWorld(t, factory.Settings{})
	var uids []string
	for _, title := range []string{"alpha one", "beta", "alpha two", "alpha three", "gone"} {
		r := w.run(t)
		tk, err := w.f.CreateTask(w.fac, r.Conversation(), foreman.TaskFields{Title: &title}, nil)
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, tk.UID)
	}
	review := factory.StageReview
	if _, err := w.f.UpdateTask(w.fac, uids[1], foreman.TaskFields{Stage: &review}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.f.UpdateTask(w.fac, uids[0], foreman.TaskFields{Description: new(string)}); err != nil { // the newest change
		t.Fatal(err)
	}
	if err := w.f.DeleteTask(w.fac, uids[4]); err != nil {
		t.Fatal(err)
	}
	cols, more, err := w.f.Board(w.fac, foreman.TaskQuery{CurrentRun: true}, 2)
	if err != nil {
		t.Fatal(err)
	}
	triage := cols[factory.StageTriage]
	if len(triage) != 2 || triage[0].UID != uids[0] || triage[1].UID != uids[3] || !more[factory.StageTriage] || triage[0].CurrentRun == nil {
		t.Errorf("TRIAGE: %+v (more: %v)", triage, more)
	}
	if rv := cols[factory.StageReview]; len(rv) != 1 || rv[0].UID != uids[1] || more[factory.StageReview] {
		t.Errorf("REVIEW: %+v (more: %v)", rv, more)
	}
	cols, _, err = w.f.Board(w.fac, foreman.TaskQuery{Search: "ALPHA"}, 10)
	if err != nil || len(cols[factory.StageTriage]) != 3 || len(cols[factory.StageReview]) != 0 || cols[factory.StageTriage][0].CurrentRun != nil {
		t.Errorf("searching alpha: %+v %v", cols, err)
	}
}

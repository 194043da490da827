package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"factory"
	"factory/internal/store/storetest"
)

// BenchmarkDashboardPages times each dashboard page, as a signed-in admin
// over loopback, on a server whose store holds 10,000 runs and on one with
// 1,000,000 (BENCH_LARGE_RUNS changes the large size), each with a full
// delivery log (100,000 deliveries over the seven days the log keeps, on
// one webhook). Runs are one second apart and end now, so "today" holds
// 10,000 runs of the small store and 86,400 of the large one. The target
// (docs/spec/dashboard.md): each page at most 1.5x its time at 10,000 runs,
// and at most 50 ms.
func BenchmarkDashboardPages(b *testing.B) {
	large := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_LARGE_RUNS")); err == nil {
		large = v
	}
	for _, n := range []int{10_000, large} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			h, c, pages := dashboardAt(b, n)
			for _, p := range pages {
				b.Run("page="+p.name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						resp, err := c.Get(h.url + p.path)
						if err != nil {
							b.Fatal(err)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Fatalf("%s: %d", p.path, resp.StatusCode)
						}
					}
				})
			}
		})
	}
}

type benchPage struct{ name, path string }

// dashboardAt serves the v1alpha1 example with n runs and a full delivery
// log, and signs in.
func dashboardAt(b *testing.B, n int) (*harness, *http.Client, []benchPage) {
	root := b.TempDir()
	copyTree(b, filepath.Join("..", "..", "examples", "v1alpha1"), root)
	os.RemoveAll(filepath.Join(root, "automations", "deploy-failed")) // it names a webhook UID the example's setup imports
	if err := os.WriteFile(filepath.Join(root, "webhooks", "ci.yaml"), []byte("authMode: token\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	h := runsServerWith(b, root)
	if _, err := h.c.CreateSecret(context.Background(), "deploys-signing-secret", nil, false); err != nil {
		b.Fatal(err)
	}
	st, err := h.c.SyncFactory(context.Background(), h.status("acme").UID)
	if err != nil || !st.Ready {
		b.Fatal(err, st)
	}
	uid := webhookUID(h, "ci")
	start := time.Now()
	now := time.Now().UTC()
	storetest.FillRuns(b, h.store, n, now.Add(-time.Duration(n)*storetest.RunSpacing), st.UID)
	storetest.FillDeliveries(b, h.store, uid, 100_000, now, 7*24*time.Hour)
	if err := h.store.Compact(); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %d runs and 100,000 deliveries in %v", n, time.Since(start).Round(time.Second))
	task := fillTasks(b, h, st.UID, n)
	c := signIn(b, h, adminKey)
	lastRun := fmt.Sprintf("run_%024d", n-1)
	return h, c, []benchPage{
		{"overview", "/ui/"},
		{"definition", "/ui/definition"},
		{"webhooks", "/ui/webhooks"},
		{"webhook", "/ui/webhooks/" + uid},
		{"deliveries", "/ui/webhooks/" + uid + "/deliveries"},
		{"automations", "/ui/automations"},
		{"runs", "/ui/runs"},
		{"runs-state", "/ui/runs?state=FAILED"},
		{"runs-factory", "/ui/runs?factory_uid=" + st.UID},
		{"runs-search", "/ui/runs?q=topic07"},
		{"run", "/ui/runs/" + lastRun},
		{"run-live", "/ui/runs/" + lastRun + "/live"},
		{"schedules", "/ui/schedules"},
		{"tasks", "/ui/tasks"},
		{"task", "/ui/factories/" + st.UID + "/tasks/" + task},
		{"inbox", "/ui/inbox"},
	}
}

// benchTasks is how many tasks the dashboard's benchmark keeps (bound to
// the newest runs, spread over the stages), each with an open inbox item.
const benchTasks = 300

// fillTasks binds the newest runs to tasks with an inbox item each, and
// returns the newest task's UID.
func fillTasks(b *testing.B, h *harness, factoryUID string, n int) string {
	batch := h.store.NewLogBatch()
	var uid string
	for i := range benchTasks {
		r, err := h.store.Run(fmt.Sprintf("run_%024d", n-1-i))
		if err != nil {
			b.Fatal(err)
		}
		at := r.CreatedAt
		uid = fmt.Sprintf("task_%020d", i)
		batch.PutTask(&factory.Task{UID: uid, FactoryUID: factoryUID, ConversationID: r.Conversation(), RunID: r.ID, Title: "Task " + r.Title,
			Stage: factory.TaskStages[i%len(factory.TaskStages)], CreatedAt: at, UpdatedAt: at})
		batch.PutInboxItem(&factory.InboxItem{UID: fmt.Sprintf("ntf_%021d", i), FactoryUID: factoryUID, TaskUID: uid, RunID: r.ID,
			Kind: factory.InboxQuestion, Title: "Which one?", Options: []string{"this", "that"}, CreatedAt: at})
	}
	if err := batch.Commit(); err != nil {
		b.Fatal(err)
	}
	return uid
}

package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/store"
)

// readKey is a read-only key of the task pages' tests.
const readKey = "fk_test_read_key_00000000000000000000000000"

// taskFixture is a factory without agents whose runs work for half a
// minute; one run of it, bound to a task whose title holds markup, and
// three open inbox items of the run: a spec review, a question with
// options, a tool call awaiting approval.
type taskFixture struct {
	h                        *harness
	fac, run, task           string
	spec, question, approval string
}

func newTaskFixture(t *testing.T) *taskFixture {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"webhooks/ci.yaml": "authMode: token\n"})
	h := startWith(t, func(s *store.Store, data string) *runs.Manager {
		b := s.NewBatch()
		b.PutAPIKey(runsKey, &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, Prefix: runsKey[:8], CreatedAt: time.Now()})
		b.PutAPIKey(readKey, &factory.APIKey{Name: "viewer", Scope: factory.ScopeRead, Prefix: readKey[:16], CreatedAt: time.Now()})
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "sh", Log: slog.New(slog.DiscardHandler),
			Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sleep", "30"}, Grace: 100 * time.Millisecond}}}})
	}, dirSource("acme", root))
	fx := &taskFixture{h: h, fac: h.status("acme").UID}
	var conv string
	fx.run, conv = dispatchOnly(t, h, fx.fac)
	for r, _ := h.store.Run(fx.run); r.State != factory.StateInProgress; r, _ = h.store.Run(fx.run) {
		if r.State.Terminal() {
			t.Fatalf("the run ended: %s", r.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	status, b := call(t, h, "POST", "/v1/factory/"+fx.fac+"/tasks", map[string]any{"conversation_id": conv, "title": "Widgets <script>alert(1)</script>"})
	if fx.task = between(string(b), `"uid":"`, `"`); status != 200 || fx.task == "" {
		t.Fatalf("create the task: %d %s", status, b)
	}
	now := time.Now().UTC()
	items := []*factory.InboxItem{
		{Kind: factory.InboxSpecReview, Title: "Approve the spec?", Body: "Approve the spec?\n\n<b>the plan</b>", Options: []string{factory.AnswerApprove, factory.AnswerRequestChanges}},
		{Kind: factory.InboxQuestion, Title: "Ship on Friday?", Options: []string{"yes", "no"}},
		{Kind: factory.InboxApproval, Title: "rm -rf build/", Approval: &factory.Approval{ToolCallID: "call-1", Title: "rm -rf build/", Kind: "execute",
			Options: []factory.ApprovalOption{{ID: "allow", Name: "Allow once", Kind: "allow_once"}, {ID: "reject", Name: "Reject", Kind: "reject_once"}}}},
	}
	batch := h.store.NewLogBatch()
	for i, it := range items {
		it.UID, it.FactoryUID, it.TaskUID, it.RunID = factory.NewUID(factory.PrefixInbox), fx.fac, fx.task, fx.run
		it.CreatedAt = now.Add(time.Duration(i) * time.Second)
		batch.PutInboxItem(it)
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	fx.spec, fx.question, fx.approval = items[0].UID, items[1].UID, items[2].UID
	return fx
}

// page GETs a dashboard page as a session: its status and body.
func page(t *testing.T, c *http.Client, h *harness, path string) (int, string) {
	t.Helper()
	resp, err := c.Get(h.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// submit posts a dashboard form as a session, with a CSRF token (none
// when csrf is ""), following the redirect: the status and page it ends
// on.
func submit(t *testing.T, c *http.Client, h *harness, path, csrf string, form url.Values) (int, string) {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if csrf != "" {
		form.Set("csrf", csrf)
	}
	resp, err := c.PostForm(h.url+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// fillDoneTasks writes n COMPLETE tasks of a factory, each of a
// conversation of its own.
func fillDoneTasks(t *testing.T, h *harness, factoryUID string, n int) {
	t.Helper()
	b := h.store.NewLogBatch()
	at := time.Now().UTC().Add(-time.Hour)
	for i := range n {
		uid := factory.NewUID(factory.PrefixTask)
		b.PutTask(&factory.Task{UID: uid, FactoryUID: factoryUID, ConversationID: "conv-" + uid, RunID: "run-" + uid, Stage: factory.StageComplete,
			Title: "Done " + strconv.Itoa(i), TicketSource: "github", TicketID: "acme/widgets#" + strconv.Itoa(100+i), CreatedAt: at, UpdatedAt: at.Add(time.Duration(i) * time.Second)})
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestDashboardTaskPages: the Tasks board, a task's page (its run tree and
// pending items), the Inbox and a run's page answer every kind of key,
// with the security headers; markup in a title or a question is text; the
// navigation counts the unread items; a read key is offered no action.
func TestDashboardTaskPages(t *testing.T) {
	fx := newTaskFixture(t)
	h := fx.h
	fillDoneTasks(t, h, fx.fac, 30)
	taskPage := "/ui/factories/" + fx.fac + "/tasks/" + fx.task
	for _, key := range []string{adminKey, runsKey, readKey} {
		c := signIn(t, h, key)
		pages := map[string]string{}
		for _, path := range []string{"/ui/tasks", "/ui/tasks?factory_uid=" + fx.fac + "&q=widg", "/ui/tasks/board?factory_uid=" + fx.fac,
			"/ui/tasks?factory_uid=" + fx.fac + "&stage=TRIAGE", "/ui/tasks?factory_uid=" + fx.fac + "&stage=COMPLETE", taskPage, taskPage + "/live", "/ui/inbox", "/ui/inbox?resolved=1", "/ui/inbox/items", "/ui/inbox/count",
			"/ui/runs/" + fx.run + "/live"} {
			resp, err := c.Get(h.url + path)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s as %s: %v %v", path, key[:12], err, resp)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || resp.Header.Get("X-Frame-Options") != "DENY" {
				t.Fatalf("%s: headers %v", path, resp.Header)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), "<script>alert(1)") || strings.Contains(string(b), "<b>the plan") {
				t.Fatalf("%s shows markup as markup:\n%s", path, b)
			}
			pages[path] = string(b)
		}
		checkTaskPages(t, fx, key, pages)
	}
	// Without a session, a part of a page that reloads itself sends the
	// whole page to sign-in.
	req, _ := http.NewRequest("GET", h.url+"/ui/inbox/count", nil)
	req.Header.Set("HX-Request", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 401 || resp.Header.Get("HX-Redirect") != "/ui/login" {
		t.Fatalf("a part's reload without a session: %v %v", err, resp)
	}
	resp.Body.Close()
}

// checkTaskPages checks what the pages of TestDashboardTaskPages show a
// key: the board first.
func checkTaskPages(t *testing.T, fx *taskFixture, key string, pages map[string]string) {
	t.Helper()
	board := pages["/ui/tasks"]
	if col := between(board, `id="col-TRIAGE"`, `id="col-SPEC"`); !strings.Contains(col, `id="task-`+fx.task+`"`) ||
		!strings.Contains(col, "Widgets &lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(col, "INPROGRESS") {
		t.Errorf("as %s: the board's TRIAGE column:\n%s", key[:12], board)
	}
	if !strings.Contains(board, `sse-connect="/v1/events?factory_uid=`+fx.fac) || !strings.Contains(board, `hx-get="/ui/inbox/count"`) {
		t.Errorf("as %s: the board follows no event stream, or its navigation counts no unread items:\n%s", key[:12], board)
	}
	if count := pages["/ui/inbox/count"]; !strings.Contains(count, `<span data-unread="3"> <span class="badge" id="unread" title="unread open items">3</span>`) {
		t.Errorf("as %s: the navigation's count: %s", key[:12], count)
	}
	if strings.Contains(pages["/ui/tasks?factory_uid="+fx.fac+"&stage=TRIAGE"], `id="col-SPEC"`) {
		t.Errorf("as %s: a stage's page shows the other columns", key[:12])
	}
	done := between(board, `id="col-COMPLETE"`, `id="col-CANCELLED"`)
	if n := strings.Count(done, `class="card"`); n != 25 || !strings.Contains(done, "Done 29") || strings.Contains(done, "Done 4<") ||
		!strings.Contains(done, "github acme/widgets#129") || !strings.Contains(done, `href="/ui/tasks?factory_uid=`+fx.fac+`&amp;stage=COMPLETE" class="more"`) {
		t.Errorf("as %s: the COMPLETE column of 30 tasks shows %d, the newest first, then a link to the rest:\n%s", key[:12], n, done)
	}
	if stage := pages["/ui/tasks?factory_uid="+fx.fac+"&stage=COMPLETE"]; strings.Count(stage, `class="card"`) != 30 || !strings.Contains(stage, "github acme/widgets#100") {
		t.Errorf("as %s: the COMPLETE stage's page does not list its 30 tasks with their tickets:\n%s", key[:12], stage)
	}
	checkTaskAndInboxPages(t, fx, key, pages)
}

// checkTaskAndInboxPages checks the task's page, the Inbox and the run's
// page of TestDashboardTaskPages as a key sees them.
func checkTaskAndInboxPages(t *testing.T, fx *taskFixture, key string, pages map[string]string) {
	t.Helper()
	taskPage := "/ui/factories/" + fx.fac + "/tasks/" + fx.task
	task := pages[taskPage]
	if !strings.Contains(task, `id="node-`+fx.run+`"`) || !strings.Contains(task, "&lt;b&gt;the plan&lt;/b&gt;") || !strings.Contains(task, `id="item-`+fx.question+`"`) {
		t.Errorf("as %s: the task page has no run tree or pending items:\n%s", key[:12], task)
	}
	inbox := pages["/ui/inbox"]
	if strings.Index(inbox, fx.approval) > strings.Index(inbox, fx.question) || strings.Index(inbox, fx.question) > strings.Index(inbox, fx.spec) ||
		!strings.Contains(inbox, "Allow once") || !strings.Contains(inbox, "Reject") || !strings.Contains(inbox, `id="read-`+fx.spec+`"`) {
		t.Errorf("as %s: the inbox, newest first, with the approval's options and read marks:\n%s", key[:12], inbox)
	}
	if strings.Contains(inbox, `action="/ui/inbox/items/`+fx.approval+`/answer"`) {
		t.Errorf("as %s: the inbox offers to answer a tool call's approval", key[:12])
	}
	if !strings.Contains(pages["/ui/runs/"+fx.run+"/live"], `<p id="run-task">Task <a href="`+taskPage+`">`) {
		t.Errorf("as %s: the run page does not link to its task:\n%s", key[:12], pages["/ui/runs/"+fx.run+"/live"])
	}
	acts := strings.Contains(task, `id="move"`) && strings.Contains(task, `id="cancel-task"`) && strings.Contains(inbox, `id="approve-`+fx.spec+`"`) &&
		strings.Contains(inbox, `id="option-`+fx.question+`-0"`) && strings.Contains(task, `id="approve-`+fx.spec+`"`)
	if acts != (key != readKey) {
		t.Errorf("as %s: actions offered: %v\n%s\n%s", key[:12], acts, task, inbox)
	}
}

// TestDashboardTaskActions: a form without the session's CSRF token is
// refused and changes nothing; a read key's forged move, cancel and answer
// are refused and change nothing, while its read marks are its own; a runs
// key moves the task (which reaches the factory's event stream), answers a
// question (a wrong answer is said in words), requests changes on the spec
// with a comment from the task's page, and cancels the task, its run with
// it.
func TestDashboardTaskActions(t *testing.T) {
	fx := newTaskFixture(t)
	h := fx.h
	taskPage := "/ui/factories/" + fx.fac + "/tasks/" + fx.task
	forms := []struct {
		path string
		form url.Values
	}{{taskPage + "/stage", url.Values{"stage": {"REVIEW"}}}, {taskPage + "/cancel", nil},
		{"/ui/inbox/items/" + fx.question + "/answer", url.Values{"answer": {"yes"}}}}
	for _, key := range []string{runsKey, readKey} {
		c := signIn(t, h, key)
		_, inbox := page(t, c, h, "/ui/inbox")
		csrf := between(inbox, `name="csrf" value="`, `"`)
		for _, f := range append(forms, struct {
			path string
			form url.Values
		}{"/ui/inbox/items/" + fx.spec + "/read", nil}) {
			if status, _ := submit(t, c, h, f.path, "", f.form); status != 403 {
				t.Errorf("as %s, %s without the CSRF token: %d", key[:12], f.path, status)
			}
		}
		if key != readKey {
			continue
		}
		for _, f := range forms {
			if status, body := submit(t, c, h, f.path, csrf, f.form); status != 403 || !strings.Contains(body, "needs runs or admin") {
				t.Errorf("a read key's %s: %d\n%s", f.path, status, body)
			}
		}
		status, body := submit(t, c, h, "/ui/inbox/items/"+fx.spec+"/read", csrf, url.Values{"back": {"inbox"}})
		if _, count := page(t, c, h, "/ui/inbox/count"); status != 200 || !strings.Contains(body, `id="unread-`+fx.spec+`"`) || !strings.Contains(count, `data-unread="2"`) {
			t.Errorf("a read key marks an item read: %d %s\n%s", status, count, body)
		}
	}
	checkUnchanged(t, fx)
	checkRunsKeyActions(t, fx, signIn(t, h, runsKey))
}

// checkUnchanged: the task is where it was, its run goes on, and its
// items wait; the runs key still has the spec review unread (the read
// key's mark was its own).
func checkUnchanged(t *testing.T, fx *taskFixture) {
	t.Helper()
	task := getJSON(t, fx.h, "/v1/factory/"+fx.fac+"/tasks/"+fx.task)
	if task["stage"] != "TRIAGE" || task["current_run"].(map[string]any)["state"] == "CANCELLED" {
		t.Fatalf("the task after refused forms: %v", task)
	}
	for _, it := range getJSON(t, fx.h, "/v1/factory-inbox")["items"].([]any) {
		if m := it.(map[string]any); m["resolved"] == true || m["is_read"] == true {
			t.Fatalf("an item after refused forms, as the runs key reads it: %v", m)
		}
	}
}

// checkRunsKeyActions: what a runs key does from the pages.
func checkRunsKeyActions(t *testing.T, fx *taskFixture, c *http.Client) {
	t.Helper()
	h := fx.h
	taskPage := "/ui/factories/" + fx.fac + "/tasks/" + fx.task
	_, inbox := page(t, c, h, "/ui/inbox")
	csrf := between(inbox, `name="csrf" value="`, `"`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events := make(chan sseEvent, 64)
	go readSSE(t, ctx, h.url+"/v1/events?factory_uid="+fx.fac, runsKey, strconv.FormatInt(time.Now().UnixNano(), 10), events)
	if status, body := submit(t, c, h, taskPage+"/stage", csrf, url.Values{"stage": {"REVIEW"}}); status != 200 || !strings.Contains(body, `id="stage-now">REVIEW<`) {
		t.Fatalf("move to REVIEW: %d\n%s", status, body)
	}
	awaitTaskEvent(t, ctx, events, fx.task, "REVIEW")
	if status, body := submit(t, c, h, taskPage+"/stage", csrf, url.Values{"stage": {"DONE"}}); status != 400 || !strings.Contains(body, "stage: one of TRIAGE") {
		t.Errorf("move to a stage that is none: %d\n%s", status, body)
	}
	if status, body := submit(t, c, h, "/ui/inbox/items/"+fx.question+"/answer", csrf, url.Values{"answer": {"maybe"}}); status != 400 || !strings.Contains(body, "answer: one of yes, no") {
		t.Errorf("an answer not offered: %d\n%s", status, body)
	}
	if status, body := submit(t, c, h, "/ui/inbox/items/"+fx.question+"/answer", csrf, url.Values{"answer": {"yes"}, "back": {"inbox"}}); status != 200 ||
		strings.Contains(body, `id="item-`+fx.question+`"`) {
		t.Errorf("answer yes: %d (the item is still open)\n%s", status, body)
	}
	status, body := submit(t, c, h, "/ui/inbox/items/"+fx.spec+"/answer", csrf, url.Values{"answer": {"request_changes"}, "comment": {"more tests"}, "back": {"task"}})
	if it, err := h.store.InboxItem(fx.spec); status != 200 || !strings.Contains(body, `id="stage-now"`) || err != nil || it.Answer != "request_changes" || it.Comment != "more tests" {
		t.Errorf("request changes from the task page: %d %v %+v\n%s", status, err, it, body)
	}
	if _, body := page(t, c, h, "/ui/inbox?resolved=1"); !strings.Contains(between(body, `id="item-`+fx.question+`"`, "</article>"), `<strong class="answer">yes</strong>`) {
		t.Errorf("the resolved items do not show the answer:\n%s", body)
	}
	if status, body := submit(t, c, h, taskPage+"/cancel", csrf, nil); status != 200 || !strings.Contains(body, `id="stage-now">CANCELLED<`) {
		t.Fatalf("cancel: %d\n%s", status, body)
	}
	if r, _ := h.store.Run(fx.run); r.State != factory.StateCancelled {
		t.Errorf("the task's run after its cancel: %s", r.State)
	}
	if _, board := page(t, c, h, "/ui/tasks"); !strings.Contains(between(board, `id="col-CANCELLED"`, "</div>"), `id="task-`+fx.task+`"`) {
		t.Errorf("the board's CANCELLED column:\n%s", board)
	}
}

// awaitTaskEvent waits for the factory's event stream to say the task is
// in a stage.
func awaitTaskEvent(t *testing.T, ctx context.Context, events <-chan sseEvent, task, stage string) {
	t.Helper()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the factory's event stream ended")
			}
			if ev.event == "task" && strings.Contains(ev.data, `"uid":"`+task+`"`) && strings.Contains(ev.data, `"stage":"`+stage+`"`) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the factory's event stream never said task %s is %s", task, stage)
		}
	}
}

// TestDashboardTasksWithoutRuns: a server that runs no runs keeps no
// tasks and no inbox; its Tasks and Inbox pages say so, and its forms
// are refused in words.
func TestDashboardTasksWithoutRuns(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"webhooks/ci.yaml": "authMode: token\n"})
	h := start(t, dirSource("acme", root))
	c := signIn(t, h, adminKey)
	var csrf string
	for _, path := range []string{"/ui/tasks", "/ui/inbox"} {
		status, body := page(t, c, h, path)
		if status != 200 || !strings.Contains(body, `<p class="muted" id="note">This server does not execute runs`) {
			t.Fatalf("%s: %d\n%s", path, status, body)
		}
		csrf = between(body, `name="csrf" value="`, `"`)
	}
	status, body := submit(t, c, h, "/ui/inbox/items/ntf_none/answer", csrf, url.Values{"answer": {"yes"}})
	if status != 400 || !strings.Contains(body, "This server does not execute runs") {
		t.Fatalf("an answer: %d\n%s", status, body)
	}
}

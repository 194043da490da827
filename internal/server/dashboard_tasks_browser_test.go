package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"factory"
	"factory/internal/codehost/github/githubtest"
)

// TestTasksAndInboxInABrowser drives the Tasks board and the Inbox in a
// real browser through the foreman's loop (foremanTree: the demo agent
// calling Factory MCP tools): the board, open before the GitHub issue
// arrives, shows its task's card coming, moving to SPEC and its run
// BLOCKED on the spec review, without a reload; the navigation counts the
// item; it is marked read and unread; it is approved from the Inbox with a
// comment; the foreman's run page and the task's page, open meanwhile in
// tabs of their own, follow the run on to SUCCEEDED and the task to
// COMPLETE (the tree of five runs, the pull request among the outputs);
// the task is moved to REVIEW and cancelled from its page.
func TestTasksAndInboxInABrowser(t *testing.T) {
	chromium(t)
	f := githubtest.New(t)
	f.AddRepo("acme", "widgets", map[string]string{"README.md": "# Widgets\n"})
	h, hook, _ := codeHostServerTree(t, f, foremanTree)
	addRunsKey(t, h)
	fac := h.status("acme")
	b := browserFor(t, 150*time.Second)
	run(t, b.ctx, chromedp.Navigate(h.url+"/ui/login"), chromedp.WaitVisible("#key", chromedp.ByID), chromedp.SendKeys("#key", adminKey, chromedp.ByID),
		chromedp.Click("#signin", chromedp.ByID), chromedp.WaitVisible("h2", chromedp.ByQuery),
		chromedp.Navigate(h.url+"/ui/tasks"), chromedp.WaitVisible("#no-tasks", chromedp.ByID), chromedp.Evaluate(`window.stay = 1`, nil))

	opened := githubtest.Payload(t, "issues", "opened", "acme", "widgets", nil)
	opened["issue"].(map[string]any)["number"] = 12
	body, _ := json.Marshal(opened)
	ghPost(t, hook, "issues", "d-1", string(body))
	posted := time.Now()
	card := waitJS(t, b.ctx, `(function () { var c = document.querySelector("#board .card"); if (!c) return "";
		var s = c.querySelector(".state"), a = c.querySelector("a");
		return [c.closest(".column").id, s ? s.textContent : "", window.stay, a.getAttribute("href"), a.textContent].join("\n"); })()`,
		func(v string) bool { return strings.HasPrefix(v, "col-SPEC\nBLOCKED\n") }, 90*time.Second)
	t.Logf("the card showed the run BLOCKED on the spec review %v after the issue was posted", time.Since(posted).Round(time.Millisecond))
	parts := strings.SplitN(card, "\n", 5)
	taskPage := parts[3]
	task := getJSON(t, h, "/v1/factory/"+fac.UID+"/tasks/"+taskPage[strings.LastIndexByte(taskPage, '/')+1:])
	if parts[2] != "1" || parts[4] != task["title"] || !strings.HasPrefix(parts[3], "/ui/factories/"+fac.UID+"/tasks/task_") {
		t.Fatalf("the board's card (reloaded %v; the task's title %q): %q", parts[2] != "1", task["title"], card)
	}
	screenshot(t, b.ctx, "dashboard-tasks.png")
	root := awaitTaskRun(t, h, fac.UID, func(r *factory.Run) bool { return r.State == factory.StateBlocked })
	runTab, taskTab := openWatchers(t, b, h, root.ID, taskPage)
	uid := checkInboxInABrowser(t, b.ctx, task["title"].(string))
	checkWatchers(t, runTab, taskTab)
	checkTaskActionsInABrowser(t, b.ctx, h, fac.UID, taskPage, uid)
}

// run runs browser actions, failing the test on an error.
func run(t *testing.T, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// waitJS evaluates a script on a page until ok takes its value (a
// string), for up to d; the page may replace its parts meanwhile.
func waitJS(t *testing.T, ctx context.Context, js string, ok func(string) bool, d time.Duration) string {
	t.Helper()
	var v string
	var err error
	for deadline := time.Now().Add(d); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		if err = chromedp.Run(ctx, chromedp.Evaluate(js, &v)); err == nil && ok(v) {
			return v
		}
	}
	t.Fatalf("the page says %q (%v), waiting on\n%s", v, err, js)
	return ""
}

// openWatchers opens the foreman's run page and the task's page in tabs
// of their own, while the run waits for the spec review: each shows that
// much, and is marked to tell a reload from a live update.
func openWatchers(t *testing.T, b *tab, h *harness, rootID, taskPage string) (runTab, taskTab context.Context) {
	t.Helper()
	runTab, cancelRun := chromedp.NewContext(b.ctx)
	taskTab, cancelTask := chromedp.NewContext(b.ctx)
	t.Cleanup(func() { cancelRun(); cancelTask() })
	run(t, runTab, chromedp.Navigate(h.url+"/ui/runs/"+rootID), chromedp.WaitVisible(`//span[@id="runstate"][text()="BLOCKED"]`, chromedp.BySearch),
		chromedp.Evaluate(`window.stay = 1`, nil))
	var agents string
	run(t, taskTab, chromedp.Navigate(h.url+taskPage), chromedp.WaitVisible(`//span[@id="stage-now"][text()="SPEC"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#task button[id^="approve-"]`, chromedp.ByQuery), chromedp.Evaluate(`window.stay = 1`, nil),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#tree .agent")).map(function (e) { return e.textContent; }).join(" ")`, &agents))
	if agents != "foreman triage spec" {
		t.Fatalf("the task's run tree while the spec is reviewed: %q", agents)
	}
	return runTab, taskTab
}

// checkInboxInABrowser: the navigation counts the open spec review; the
// Inbox shows it with its task; it is marked read, then unread; it is
// approved with a comment, and then shows among the resolved items only.
// It returns the item's UID.
func checkInboxInABrowser(t *testing.T, ctx context.Context, title string) string {
	t.Helper()
	var unread, id, text string
	run(t, ctx, chromedp.Click(`header a[href="/ui/inbox"]`, chromedp.ByQuery), chromedp.WaitVisible("#inbox article.item", chromedp.ByQuery),
		chromedp.WaitVisible("#unread", chromedp.ByID), chromedp.Text("#unread", &unread, chromedp.ByID),
		chromedp.AttributeValue("#inbox article.item", "id", &id, nil, chromedp.ByQuery),
		chromedp.Text("#inbox article.item", &text, chromedp.ByQuery))
	uid := strings.TrimPrefix(id, "item-")
	if unread != "1" || !strings.Contains(text, "spec_review") || !strings.Contains(text, "Approve the spec?") || !strings.Contains(text, title) {
		t.Fatalf("the inbox (unread %q): %q", unread, text)
	}
	screenshot(t, ctx, "dashboard-inbox.png")
	var badge bool
	run(t, ctx, chromedp.Click("#read-"+uid, chromedp.ByID), chromedp.WaitVisible("#unread-"+uid, chromedp.ByID),
		chromedp.WaitReady("#inbox-count [data-unread]", chromedp.ByQuery), chromedp.AttributeValue("#inbox-count [data-unread]", "data-unread", &unread, nil, chromedp.ByQuery),
		chromedp.Evaluate(`!!document.getElementById("unread")`, &badge))
	if unread != "0" || badge {
		t.Fatalf("the navigation still counts the item marked read: %q", unread)
	}
	run(t, ctx, chromedp.Click("#unread-"+uid, chromedp.ByID), chromedp.WaitVisible("#read-"+uid, chromedp.ByID),
		chromedp.WaitVisible("#unread", chromedp.ByID), chromedp.Text("#unread", &unread, chromedp.ByID))
	if unread != "1" {
		t.Fatalf("the count after marking the item unread: %q", unread)
	}
	var answer string
	run(t, ctx, chromedp.SendKeys("#comment-"+uid, "Looks good, ship it", chromedp.ByID), chromedp.Click("#approve-"+uid, chromedp.ByID),
		chromedp.WaitVisible("#empty-inbox", chromedp.ByID), chromedp.Click("#show-resolved", chromedp.ByID),
		chromedp.WaitVisible("#item-"+uid, chromedp.ByID), chromedp.Text("#item-"+uid+" .answer", &answer, chromedp.ByQuery))
	if answer != "approve" {
		t.Fatalf("the resolved item's answer: %q", answer)
	}
	return uid
}

// checkWatchers: the run page, open since the run was BLOCKED, follows it
// to SUCCEEDED with the approval and its comment in its conversation and
// its four children; the task's page follows the task to COMPLETE, with
// the tree of five runs and the pull request among its outputs. Neither
// page was reloaded.
func checkWatchers(t *testing.T, runTab, taskTab context.Context) {
	t.Helper()
	got := waitJS(t, runTab, `[document.getElementById("runstate").textContent, window.stay, document.querySelectorAll("#children > li").length,
		document.getElementById("run").textContent.indexOf("Looks good, ship it") >= 0, document.querySelector("#run-task a").getAttribute("href")].join(" ")`,
		func(v string) bool { return strings.HasPrefix(v, "SUCCEEDED ") }, 90*time.Second)
	if !strings.HasPrefix(got, "SUCCEEDED 1 4 true /ui/factories/") {
		t.Fatalf("the run page after the approval (state, not reloaded, children, the comment, the task): %q", got)
	}
	got = waitJS(t, taskTab, `[document.getElementById("stage-now").textContent, window.stay,
		Array.from(document.querySelectorAll("#tree .agent")).map(function (e) { return e.textContent; }).join(","),
		(document.getElementById("outputs") || {textContent: ""}).textContent.indexOf("PULL_REQUEST") >= 0,
		document.querySelectorAll("#task article.item").length].join(" ")`,
		func(v string) bool { return strings.HasPrefix(v, "COMPLETE ") }, 30*time.Second)
	if got != "COMPLETE 1 foreman,triage,spec,implement,review true 0" {
		t.Fatalf("the task page after the approval (stage, not reloaded, tree, a pull request, open items): %q", got)
	}
	screenshot(t, taskTab, "dashboard-task.png")
}

// checkTaskActionsInABrowser: the task's page moves it to REVIEW, then
// cancels it; the board shows it CANCELLED, and so does the API.
func checkTaskActionsInABrowser(t *testing.T, ctx context.Context, h *harness, factoryUID, taskPage, uid string) {
	t.Helper()
	var href string
	run(t, ctx, chromedp.AttributeValue("#item-"+uid+` a[href^="/ui/factories/"]`, "href", &href, nil, chromedp.ByQuery))
	if href != taskPage {
		t.Fatalf("the item links to %q, not its task %q", href, taskPage)
	}
	run(t, ctx, chromedp.Navigate(h.url+href), chromedp.WaitVisible("#stage", chromedp.ByID), chromedp.SetValue("#stage", "REVIEW", chromedp.ByID),
		chromedp.Click("#move", chromedp.ByID), chromedp.WaitVisible(`//span[@id="stage-now"][text()="REVIEW"]`, chromedp.BySearch),
		chromedp.Click("#cancel-task", chromedp.ByID), chromedp.WaitVisible(`//span[@id="stage-now"][text()="CANCELLED"]`, chromedp.BySearch),
		chromedp.Navigate(h.url+"/ui/tasks"), chromedp.WaitVisible(`#col-CANCELLED .card`, chromedp.ByQuery))
	task := getJSON(t, h, "/v1/factory/"+factoryUID+"/tasks/"+taskPage[strings.LastIndexByte(taskPage, '/')+1:])
	if task["stage"] != "CANCELLED" {
		t.Fatalf("the task after its cancel: %v", task)
	}
}

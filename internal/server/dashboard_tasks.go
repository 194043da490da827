package server

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"factory"
	"factory/internal/foreman"
)

// The dashboard's Tasks (docs/spec/foreman.md): a factory's board by
// stage, a task's page with its run tree, outputs and pending inbox items,
// and the task's actions (move to a stage, cancel). The foreman service
// does the work, as for the API.

// boardPage is how many tasks a column of the board shows, and
// stagePage how many a stage's own page shows at once.
const (
	boardPage = 25
	stagePage = 100
)

// boardColumn is one stage of the board: its newest-updated tasks, and a
// link to the stage's own page when it holds more.
type boardColumn struct {
	Stage factory.TaskStage
	Cards []factory.TaskItem
	Next  string
}

// board is the columns of a board.
type board []boardColumn

// Empty says the board holds no task.
func (b board) Empty() bool {
	for _, c := range b {
		if len(c.Cards) > 0 {
			return false
		}
	}
	return true
}

// noForeman is what the task and inbox pages say on a server that runs no
// runs (and so keeps no tasks).
const noForeman = "This server does not execute runs: it keeps no tasks and no inbox."

// tasksPage is the board of one factory (?factory_uid=, else the first):
// a column per stage, updated from the factory's event stream.
func (s *Server) tasksPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	sts, err := s.factoryStatuses()
	if err != nil {
		return err
	}
	data := map[string]any{"Title": "Tasks", "Session": sess, "Factories": sts, "Now": time.Now().UnixNano()}
	if s.foreman == nil {
		data["Note"] = noForeman
		s.render(w, "tasks.html", data)
		return nil
	}
	in := r.URL.Query()
	if len(sts) > 0 {
		uid := in.Get("factory_uid")
		if uid == "" {
			uid = sts[0].UID
		}
		fac, err := s.factoryByUID(uid)
		if err != nil {
			return err
		}
		cols, err := s.boardColumns(fac, in)
		if err != nil {
			return err
		}
		data["Factory"], data["Columns"], data["Search"], data["Stage"] = fac, cols, in.Get("q"), in.Get("stage")
		data["Board"] = boardQuery(fac.UID, in).Encode()
	}
	s.render(w, "tasks.html", data)
	return nil
}

// boardQuery is the board's own parameters, for its fragment's URL.
func boardQuery(factoryUID string, in url.Values) url.Values {
	q := url.Values{"factory_uid": {factoryUID}}
	for _, k := range []string{"q", "stage", "cursor"} {
		if v := strings.TrimSpace(in.Get(k)); v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// tasksBoard is the board's columns: what the page reloads on each task
// or run change of the factory.
func (s *Server) tasksBoard(w http.ResponseWriter, r *http.Request, _ *session) error {
	if s.foreman == nil {
		return errorf(CodeInvalidRequest, noForeman)
	}
	in := r.URL.Query()
	fac, err := s.factoryByUID(in.Get("factory_uid"))
	if err != nil {
		return err
	}
	cols, err := s.boardColumns(fac, in)
	if err != nil {
		return err
	}
	s.render(w, "board", map[string]any{"Factory": fac, "Columns": cols})
	return nil
}

// boardColumns lists a factory's tasks by stage, each column newest
// updated first, at most boardPage of each; with ?stage= only that
// stage, stagePage at a time (?cursor=, through the API's own list).
func (s *Server) boardColumns(fac *factory.Factory, in url.Values) (board, error) {
	search := strings.TrimSpace(in.Get("q"))
	link := func(v url.Values) string {
		v.Set("factory_uid", fac.UID)
		if search != "" {
			v.Set("q", search)
		}
		return "/ui/tasks?" + v.Encode()
	}
	if st := in.Get("stage"); st != "" {
		stage, err := stageField(&st)
		if err != nil {
			return nil, err
		}
		page, err := s.foreman.ListTasks(fac, foreman.TaskQuery{Stages: []factory.TaskStage{*stage}, Search: search, SortBy: "updated_at",
			Limit: stagePage, CurrentRun: true, Cursor: in.Get("cursor")})
		if err != nil {
			return nil, err
		}
		col := boardColumn{Stage: *stage, Cards: page.Tasks}
		for i, it := range col.Cards { // a list's tasks come without their tickets
			if t, err := s.foreman.Task(fac, it.UID); err == nil {
				col.Cards[i].TicketSource, col.Cards[i].TicketID = t.TicketSource, t.TicketID
			}
		}
		if page.Info.HasNextPage {
			col.Next = link(url.Values{"stage": {st}, "cursor": {page.Info.NextCursor}})
		}
		return board{col}, nil
	}
	cards, more, err := s.foreman.Board(fac, foreman.TaskQuery{Search: search, CurrentRun: true}, boardPage)
	if err != nil {
		return nil, err
	}
	var cols board
	for _, st := range factory.TaskStages {
		col := boardColumn{Stage: st, Cards: cards[st]}
		if more[st] {
			col.Next = link(url.Values{"stage": {string(st)}})
		}
		cols = append(cols, col)
	}
	return cols, nil
}

// dashTask is the request's factory and task (/ui/factories/{uid}/tasks/{taskUid}).
func (s *Server) dashTask(r *http.Request) (*factory.Factory, *factory.Task, error) {
	if s.foreman == nil {
		return nil, nil, errorf(CodeInvalidRequest, noForeman)
	}
	fac, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return nil, nil, err
	}
	t, err := s.foreman.Task(fac, r.PathValue("taskUid"))
	return fac, t, err
}

// taskPage is a task: what it is, then its live part (stage, run tree,
// outputs, pending inbox items), which the page reloads on each change of
// the factory's tasks and runs; and its actions.
func (s *Server) taskPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	fac, t, err := s.dashTask(r)
	if err != nil {
		return err
	}
	live, err := s.taskLiveData(fac, t, sess)
	if err != nil {
		return err
	}
	s.render(w, "task.html", map[string]any{"Title": "Task " + t.Title, "Session": sess, "Factory": fac, "Task": t, "Live": live,
		"Stages": factory.TaskStages, "CanRun": canRun(sess), "Now": time.Now().UnixNano()})
	return nil
}

// runNode is a run of a tree, with the runs it dispatched.
type runNode struct {
	Run      factory.RunItem
	Agent    string
	Children []*runNode
}

// runAgent is the agent a run runs, as its page names it.
func runAgent(r *factory.Run) string {
	if r.Setup != nil && r.Setup.Agent != "" {
		return r.Setup.Agent
	}
	return r.Metadata["agent"]
}

// runTree is a run and the runs under it, each under its parent, oldest
// first.
func (s *Server) runTree(rootID string) (*runNode, error) {
	root, err := s.store.Run(rootID)
	if err != nil {
		return nil, err
	}
	desc, err := s.foreman.Descendants(root.ID)
	if err != nil {
		return nil, err
	}
	nodes := map[string]*runNode{root.ID: {Run: root.Item(), Agent: runAgent(root)}}
	for _, d := range desc {
		nodes[d.ID] = &runNode{Run: d.Item(), Agent: runAgent(d)}
	}
	for _, d := range desc { // oldest first: children keep their order
		if p := nodes[d.ParentRunID]; p != nil {
			p.Children = append(p.Children, nodes[d.ID])
		}
	}
	return nodes[root.ID], nil
}

// taskLive is the task's live part, as the page reloads it.
func (s *Server) taskLive(w http.ResponseWriter, r *http.Request, sess *session) error {
	fac, t, err := s.dashTask(r)
	if err != nil {
		return err
	}
	data, err := s.taskLiveData(fac, t, sess)
	if err != nil {
		return err
	}
	s.render(w, "tasklive", data)
	return nil
}

// taskLiveData is what the task's live part shows: its stage, its current
// top-level run's tree, its outputs and its open inbox items.
func (s *Server) taskLiveData(fac *factory.Factory, t *factory.Task, sess *session) (map[string]any, error) {
	view := s.foreman.View(t, true, true, true)
	data := map[string]any{"Task": t, "View": view}
	if view.CurrentRun != nil {
		tree, err := s.runTree(view.CurrentRun.RunID)
		if err != nil {
			return nil, err
		}
		data["Tree"] = tree
	}
	items, err := s.foreman.Inbox(foreman.InboxQuery{Reader: sess.Reader, FactoryUID: fac.UID, TaskUID: t.UID})
	if err != nil {
		return nil, err
	}
	if data["Items"], err = s.inboxRows(items, sess, "task"); err != nil {
		return nil, err
	}
	return data, nil
}

// taskAction is a task's Move (to the form's stage) or Cancel: runs and
// admin keys only, through the API's own code, then back to the task.
func (s *Server) taskAction(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !canRun(sess) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; acting on tasks needs runs or admin")
	}
	fac, t, err := s.dashTask(r)
	if err != nil {
		return err
	}
	switch r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:] {
	case "stage":
		st := r.PostFormValue("stage")
		stage, err := stageField(&st)
		if err != nil {
			return err
		}
		_, err = s.foreman.UpdateTask(fac, t.UID, foreman.TaskFields{Stage: stage})
		if err != nil {
			return err
		}
	case "cancel":
		if _, err := s.foreman.CancelTask(fac, t.UID); err != nil {
			return err
		}
	default:
		return errorf(CodeNotFound, "no such action")
	}
	http.Redirect(w, r, taskURL(fac.UID, t.UID), http.StatusSeeOther)
	return nil
}

// taskURL is a task's page.
func taskURL(factoryUID, taskUID string) string {
	return "/ui/factories/" + url.PathEscape(factoryUID) + "/tasks/" + url.PathEscape(taskUID)
}

// runRelations are what the run page says of a run's place in a factory's
// work: its task, and the runs it dispatched.
func (s *Server) runRelations(run *factory.Run) (map[string]any, error) {
	out := map[string]any{}
	if s.foreman == nil || run.FactoryUID == "" {
		return out, nil
	}
	t, err := s.foreman.TaskOfRun(run)
	if err != nil {
		return nil, err
	}
	if t != nil && t.Deleted == nil {
		out["Task"] = t
	}
	desc, err := s.foreman.Descendants(run.ID)
	if err != nil {
		return nil, err
	}
	var children []runNode
	for _, d := range desc {
		if d.ParentRunID == run.ID {
			children = append(children, runNode{Run: d.Item(), Agent: runAgent(d)})
		}
	}
	out["Children"] = children
	return out, nil
}

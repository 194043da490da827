package server

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"factory"
	"factory/internal/foreman"
)

// The dashboard's Inbox (docs/spec/foreman.md, "People in the loop"): what
// agents ask people, newest first; answering a question, reviewing a
// spec, and read marks, through the foreman service as the API does.

// inboxRow is an item as the Inbox shows it: the SDK's item, with its
// factory's name, its task's title, and what it can be answered with.
type inboxRow struct {
	factory.InboxWire
	Factory   string
	TaskTitle string
	// Options are the answers it takes, when it names them; FreeText says
	// it takes any text.
	Options  []string
	FreeText bool
	// The forms' context: the session's CSRF token, whether its key may
	// answer, and the page a form returns to (backTo).
	CSRF   string
	CanRun bool
	Back   string
}

// answerable are the kinds a person answers through the inbox (approval
// items are a tool call's: the run's approvals endpoint answers those).
var answerable = []string{factory.InboxQuestion, factory.InboxSpecReview, factory.InboxPRReview}

// inboxPage is how many items the Inbox shows at once.
const inboxPage = 50

// inboxRows are items as the page shows them, with their factory's name
// and their task's title; their forms return to back.
func (s *Server) inboxRows(items []factory.InboxWire, sess *session, back string) ([]inboxRow, error) {
	facs, err := s.store.Factories()
	if err != nil {
		return nil, err
	}
	byUID := map[string]*factory.Factory{}
	for _, f := range facs {
		byUID[f.UID] = f
	}
	titles := map[string]string{}
	rows := make([]inboxRow, 0, len(items))
	for _, it := range items {
		row := inboxRow{InboxWire: it, CSRF: sess.CSRF, CanRun: canRun(sess), Back: back}
		fac := byUID[it.FactoryUID]
		if fac != nil {
			row.Factory = fac.Name
		}
		if title, ok := titles[it.FactoryTaskUID]; ok {
			row.TaskTitle = title
		} else if fac != nil && it.FactoryTaskUID != "" {
			if t, err := s.foreman.Task(fac, it.FactoryTaskUID); err == nil {
				row.TaskTitle = t.Title
			}
			titles[it.FactoryTaskUID] = row.TaskTitle
		}
		if !it.Resolved && slices.Contains(answerable, it.Kind) {
			if len(it.Questions) > 0 {
				row.Options = it.Questions[0].Options
			}
			row.FreeText = len(row.Options) == 0
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// inboxCount is the navigation's count: the open items the session's key
// has not marked read. Every page loads it after itself, and again every
// half minute: it reads the whole inbox, which no page should wait for.
// It reads the items as they are kept (the inbox's list would look up
// each item's task), and asks each item whether the key read it.
func (s *Server) inboxCount(w http.ResponseWriter, r *http.Request, sess *session) error {
	n := 0
	if s.foreman != nil {
		items, err := s.store.InboxItems()
		if err != nil {
			return err
		}
		for _, it := range items {
			if it.Resolved == nil && !it.Wire(sess.Reader, "", "").IsRead {
				n++
			}
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, "unread", n)
	return nil
}

// inboxPage is the Inbox: the open items, newest first (?resolved=1:
// resolved ones too); the list reloads itself.
func (s *Server) inboxPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	data := map[string]any{"Title": "Inbox", "Session": sess}
	if s.foreman == nil {
		data["Note"] = noForeman
		s.render(w, "inbox.html", data)
		return nil
	}
	list, err := s.inboxData(r, sess)
	if err != nil {
		return err
	}
	for k, v := range list {
		data[k] = v
	}
	s.render(w, "inbox.html", data)
	return nil
}

// inboxList is the Inbox's list, as the page reloads it.
func (s *Server) inboxList(w http.ResponseWriter, r *http.Request, sess *session) error {
	if s.foreman == nil {
		return errorf(CodeInvalidRequest, noForeman)
	}
	data, err := s.inboxData(r, sess)
	if err != nil {
		return err
	}
	s.render(w, "inboxlist", data)
	return nil
}

// inboxData is the Inbox's list: open items (resolved=1: every item),
// newest first, inboxPage of them from skip= on.
func (s *Server) inboxData(r *http.Request, sess *session) (map[string]any, error) {
	in := r.URL.Query()
	resolved, back := in.Get("resolved") == "1", "inbox"
	if resolved {
		back = "resolved"
	}
	items, err := s.foreman.Inbox(foreman.InboxQuery{Reader: sess.Reader, Resolved: resolved})
	if err != nil {
		return nil, err
	}
	skip, _ := strconv.Atoi(in.Get("skip"))
	skip = min(max(skip, 0), len(items))
	shown := items[skip:min(skip+inboxPage, len(items))]
	rows, err := s.inboxRows(shown, sess, back)
	if err != nil {
		return nil, err
	}
	data := map[string]any{"Items": rows, "Resolved": resolved, "Session": sess, "CanRun": canRun(sess), "Back": back,
		"Fragment": inboxURL("/ui/inbox/items", resolved, skip)}
	if skip > 0 {
		data["Newer"] = inboxURL("/ui/inbox", resolved, max(skip-inboxPage, 0))
	}
	if skip+len(shown) < len(items) {
		data["Older"] = inboxURL("/ui/inbox", resolved, skip+len(shown))
	}
	return data, nil
}

// inboxURL is a page of the Inbox (or of its list, as the page reloads
// it).
func inboxURL(path string, resolved bool, skip int) string {
	q := url.Values{}
	if resolved {
		q.Set("resolved", "1")
	}
	if skip > 0 {
		q.Set("skip", strconv.Itoa(skip))
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// answerItem answers an item with the form's answer and comment: runs and
// admin keys only, through the API's own code (the run that asked goes
// on), then back where the form was.
func (s *Server) answerItem(w http.ResponseWriter, r *http.Request, sess *session) error {
	if !canRun(sess) {
		return errorf(CodeNotAuthorized, "this key has scope "+sess.Scope+"; answering needs runs or admin")
	}
	if s.foreman == nil {
		return errorf(CodeInvalidRequest, noForeman)
	}
	key, err := s.store.APIKeyByHash(sess.KeyHash)
	if err != nil {
		return err
	}
	it, err := s.foreman.Answer(r.PathValue("id"), r.PostFormValue("answer"), r.PostFormValue("comment"), key.Creator())
	if err != nil {
		return err
	}
	http.Redirect(w, r, backTo(r, it.FactoryUID, it.TaskUID), http.StatusSeeOther)
	return nil
}

// markItem marks an item read or unread for the session's key; any key
// may, as through the API (the marks are the reader's own).
func (s *Server) markItem(read bool) func(http.ResponseWriter, *http.Request, *session) error {
	return func(w http.ResponseWriter, r *http.Request, sess *session) error {
		if s.foreman == nil {
			return errorf(CodeInvalidRequest, noForeman)
		}
		it, err := s.foreman.Item(r.PathValue("id"), sess.Reader)
		if err != nil {
			return err
		}
		if _, err := s.foreman.MarkRead(sess.Reader, []string{it.NotificationUID}, read); err != nil {
			return err
		}
		http.Redirect(w, r, backTo(r, it.FactoryUID, it.FactoryTaskUID), http.StatusSeeOther)
		return nil
	}
}

// markAllRead marks every open item read for the session's key.
func (s *Server) markAllRead(w http.ResponseWriter, r *http.Request, sess *session) error {
	if s.foreman == nil {
		return errorf(CodeInvalidRequest, noForeman)
	}
	items, err := s.foreman.Inbox(foreman.InboxQuery{Reader: sess.Reader})
	if err != nil {
		return err
	}
	var uids []string
	for _, it := range items {
		if !it.IsRead {
			uids = append(uids, it.NotificationUID)
		}
	}
	if len(uids) > 0 {
		if _, err := s.foreman.MarkRead(sess.Reader, uids, true); err != nil {
			return err
		}
	}
	http.Redirect(w, r, backTo(r, "", ""), http.StatusSeeOther)
	return nil
}

// backTo is where a form of the inbox returns: the item's task page (a
// form on it), the inbox with its resolved items, or the inbox. It is
// chosen from these, never a URL the form names.
func backTo(r *http.Request, factoryUID, taskUID string) string {
	switch r.PostFormValue("back") {
	case "task":
		if taskUID != "" {
			return taskURL(factoryUID, taskUID)
		}
	case "resolved":
		return "/ui/inbox?resolved=1"
	}
	return "/ui/inbox"
}

package store

import (
	"errors"
	"slices"
	"strings"

	"factory"
)

// Key layout of tasks and the inbox (docs/spec/foreman.md).
const (
	taskPrefix     = "task/"      // task/<factory uid>/<task uid> → Task
	taskUIDPrefix  = "task-uid/"  // task-uid/<task uid> → factory uid
	taskConvPrefix = "task-conv/" // task-conv/<conversation id> → task uid, while the task lives
	inboxPrefix    = "inbox/"     // inbox/<item uid> → InboxItem
	inboxRunPrefix = "inbox-run/" // inbox-run/<run id>/<item uid> → nothing: a run's items
)

// PutTask writes a task; a deleted one gives its conversation up.
func (b *Batch) PutTask(t *factory.Task) {
	b.putJSON(taskPrefix+t.FactoryUID+"/"+t.UID, t)
	b.putRaw(taskUIDPrefix+t.UID, []byte(t.FactoryUID))
	if t.Deleted != nil {
		b.delete(taskConvPrefix + t.ConversationID)
		return
	}
	b.putRaw(taskConvPrefix+t.ConversationID, []byte(t.UID))
}

// Task reads a task by its UID, deleted or not; ErrNotFound when there is
// none.
func (s *Store) Task(uid string) (*factory.Task, error) {
	fac, err := s.get(taskUIDPrefix + uid)
	if err != nil {
		return nil, err
	}
	t := &factory.Task{}
	return t, s.getJSON(taskPrefix+string(fac)+"/"+uid, t)
}

// TaskByConversation is the live task bound to a conversation.
func (s *Store) TaskByConversation(conversationID string) (*factory.Task, error) {
	uid, err := s.get(taskConvPrefix + conversationID)
	if err != nil {
		return nil, err
	}
	return s.Task(string(uid))
}

// Tasks lists a factory's tasks, deleted ones included, in no particular
// order.
func (s *Store) Tasks(factoryUID string) ([]*factory.Task, error) {
	if strings.Contains(factoryUID, "/") || factoryUID == "" {
		return nil, nil
	}
	return scanJSON[factory.Task](s, taskPrefix+factoryUID+"/")
}

// PutInboxItem writes an inbox item.
func (b *Batch) PutInboxItem(it *factory.InboxItem) {
	b.putJSON(inboxPrefix+it.UID, it)
	b.putRaw(inboxRunPrefix+it.RunID+"/"+it.UID, nil)
}

// InboxItemsOfRun lists the items a run asked.
func (s *Store) InboxItemsOfRun(runID string) ([]*factory.InboxItem, error) {
	var out []*factory.InboxItem
	err := s.scan(inboxRunPrefix+runID+"/", func(key string, _ []byte) error {
		it, err := s.InboxItem(key[strings.LastIndexByte(key, '/')+1:])
		if err == nil {
			out = append(out, it)
		}
		return err
	})
	return out, err
}

// InboxItem reads an inbox item.
func (s *Store) InboxItem(uid string) (*factory.InboxItem, error) {
	it := &factory.InboxItem{}
	if err := s.getJSON(inboxPrefix+uid, it); err != nil {
		return nil, err
	}
	return it, nil
}

// InboxItems lists the inbox, newest first.
func (s *Store) InboxItems() ([]*factory.InboxItem, error) {
	items, err := scanJSON[factory.InboxItem](s, inboxPrefix)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(items, func(a, b *factory.InboxItem) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.UID, a.UID)
	})
	return items, nil
}

// IsNotFound reports whether err says a record does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

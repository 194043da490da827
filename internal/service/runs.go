package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"factory"
	"factory/internal/runs"
	"factory/internal/store"
)

// Runs is the application service of runs, beside the webhooks' (Service):
// create (with an Idempotency-Key), follow up, interrupt, cancel. The HTTP
// API and the dashboard call it and nothing else to change a run; it
// returns domain errors (factory.Error), which the HTTP layer maps to
// problems in one place.
type Runs struct {
	Store   *store.Store
	Manager *runs.Manager
	keys    keyLocks
}

// IdempotencyWindow is how long an Idempotency-Key's first answer is
// answered again.
const IdempotencyWindow = 24 * time.Hour

// Idempotency is a create's Idempotency-Key: the key, the caller it
// belongs to (keys of different callers never meet), and the request's
// body (the same key with another body is a conflict).
type Idempotency struct {
	Key, Caller string
	Body        []byte
}

// Created is what a create answers (the API's body, and what an
// Idempotency-Key answers again).
type Created struct {
	RunID      string           `json:"run_id"`
	TaskID     string           `json:"task_id"`
	State      factory.RunState `json:"state"`
	AtCapacity bool             `json:"at_capacity"`
	// Run is the run as created; not part of the answer.
	Run *factory.Run `json:"-"`
}

// Create creates a run. With an Idempotency-Key, the first create of the
// key creates the run and its answer is kept; the same key and body
// answer that again (Run nil), another body is a conflict. Creates with
// one key wait for each other; creates with other keys, or none, do not.
func (s *Runs) Create(ctx context.Context, req runs.CreateRequest, idem *Idempotency) (*Created, error) {
	if idem == nil || idem.Key == "" {
		return s.create(req)
	}
	key := store.HashAPIKey(idem.Caller + idem.Key)
	sum := sha256.Sum256(idem.Body)
	bodyHash := hex.EncodeToString(sum[:])
	unlock := s.keys.lock(key)
	defer unlock()
	prev, ok, err := s.Store.Idempotent(key, bodyHash, IdempotencyWindow)
	switch {
	case err != nil:
		return nil, err
	case ok && prev == nil:
		return nil, &factory.Error{Code: factory.ECONFLICT, Message: "this Idempotency-Key was used with another body", Final: true}
	case ok:
		var c Created
		if err := json.Unmarshal(prev, &c); err != nil {
			return nil, fmt.Errorf("the answer kept for an Idempotency-Key: %w", err)
		}
		return &c, nil
	}
	c, err := s.create(req)
	if err != nil {
		return nil, err
	}
	answer, _ := json.Marshal(c)
	if err := s.Store.RememberIdempotent(key, bodyHash, answer); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *Runs) create(req runs.CreateRequest) (*Created, error) {
	atCapacity := s.Manager.AtCapacity()
	run, err := s.Manager.Create(req)
	if err != nil {
		return nil, runError(err, "")
	}
	return &Created{RunID: run.ID, TaskID: run.ID, State: run.State, AtCapacity: atCapacity, Run: run}, nil
}

// FollowUp sends a message (and files) to a run: queued for its next turn,
// or continuing it if it has ended.
func (s *Runs) FollowUp(ctx context.Context, id, message string, files []runs.AttachmentData) (runs.FollowUpAnswer, error) {
	_, ans, err := s.Manager.SendFollowUp(id, message, files)
	return ans, runError(err, id)
}

// Interrupt stops a run's agent's turn; the run waits (BLOCKED) for a
// follow-up.
func (s *Runs) Interrupt(ctx context.Context, id string) error {
	return runError(s.Manager.Interrupt(id), id)
}

// Cancel ends a run that has not ended: it reads CANCELLED when Cancel
// returns.
func (s *Runs) Cancel(ctx context.Context, id string) (*factory.Run, error) {
	r, err := s.Manager.Cancel(id)
	return r, runError(err, id)
}

// AnswerApproval answers a tool call's approval of a run (permissions
// ask) with one of the options its agent offered: the agent's session
// goes on with it.
func (s *Runs) AnswerApproval(ctx context.Context, runID, itemUID, optionID string, by *factory.Creator) (*factory.InboxItem, error) {
	if optionID == "" {
		return nil, factory.Errorf(factory.EINVALID, "option_id: required: one of the options the agent offered")
	}
	it, err := s.Manager.AnswerApproval(runID, itemUID, optionID, by)
	if errors.Is(err, runs.ErrNotFound) {
		return nil, factory.Errorf(factory.ENOTFOUND, "no run %s", runID)
	}
	return it, err
}

// runError is the domain error of the run manager's errors: the one place
// they are named for callers.
func runError(err error, id string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, runs.ErrNotFound):
		return factory.Errorf(factory.ENOTFOUND, "no run %s", id)
	case errors.Is(err, runs.ErrTerminal):
		return factory.Errorf(factory.EINVALID, "run %s cannot be cancelled: %v", id, err)
	case errors.Is(err, runs.ErrNotLive):
		return &factory.Error{Code: factory.ECONFLICT, Message: fmt.Sprintf("run %s has no turn in progress to interrupt", id), Final: true}
	case errors.Is(err, runs.ErrUnknownEnvironment):
		return factory.Errorf(factory.EINVALID, "%v", err)
	case errors.Is(err, runs.ErrAttachmentName):
		return factory.Errorf(factory.EINVALID, "attachments: %v", err)
	}
	return err
}

// keyLocks are locks by key, made when first asked for and dropped when
// no one holds or waits for them.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	sync.Mutex
	users int
}

// lock locks key and returns its unlock.
func (k *keyLocks) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

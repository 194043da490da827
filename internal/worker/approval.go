package worker

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"factory/internal/runtime"
)

// approvalPoll bounds one ask of a person's answer: the control plane
// answers Pending before it, and the worker asks again.
const approvalPoll = 30 * time.Second

// approver puts a tool call of a turn this worker runs to a person,
// through the control plane (ApprovalAsk), and waits for the answer for as
// long as the turn goes on: an ask that gets no answer (the control plane
// restarts) is asked again a moment later.
func (w *Worker) approver(a *Assignment) runtime.Approver {
	return func(ctx context.Context, req runtime.ApprovalRequest) (runtime.ApprovalAnswer, error) {
		body, _ := json.Marshal(ApprovalAsk{RunID: a.RunID, Attempt: a.Attempt, Request: req})
		for {
			if err := ctx.Err(); err != nil {
				return runtime.ApprovalAnswer{}, err
			}
			actx, cancel := context.WithTimeout(ctx, approvalPoll)
			msg, err := w.NC.RequestWithContext(actx, ApprovalSubject(w.ID), body)
			cancel()
			var reply ApprovalReply
			if err == nil {
				err = json.Unmarshal(msg.Data, &reply)
			}
			switch {
			case err != nil:
				w.Log.Warn("asking the control plane for an approval: asking again", "run", a.RunID, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			case reply.Error != "":
				return runtime.ApprovalAnswer{}, errors.New(reply.Error)
			case reply.Answer != nil:
				return *reply.Answer, nil
			}
		}
	}
}

package automations

import (
	"errors"

	"factory"
	"factory/internal/runs"
	"factory/internal/store"
)

// continueWorkItem makes a run's request of an event on an issue or pull
// request that already has a run (its work item's root run, of the same
// factory) a follow-up of that run instead: the new event's prompt and
// envelope as the message, its payload attached, sent once however many
// times the delivery is evaluated; the delivery then lists the root run
// (the request names it, and creates nothing). An automation with
// continueWorkItem: false starts a fresh run, which is no work item's;
// one with writeBack: false starts runs that report nowhere.
func (e *Evaluator) continueWorkItem(f *factory.Factory, a *factory.Automation, d *factory.Delivery, body []byte, req runs.CreateRequest) (runs.CreateRequest, error) {
	o := req.Origin
	if o == nil {
		return req, nil
	}
	o.Silent = a.Spec.NoWriteBack
	if a.Spec.Fresh {
		o.WorkItem = ""
		return req, nil
	}
	if o.WorkItem == "" {
		return req, nil
	}
	root, err := e.Store.WorkItem(f.UID, o.WorkItem)
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && root == req.ID:
		return req, nil // the first run of the work item: its root
	case err != nil:
		return req, err
	}
	files := []runs.AttachmentData{{Name: "event-" + d.ID + ".json", MimeType: "application/json", Data: body}}
	switch err := e.Runs.ContinueWith(root, req.ID, req.Prompt, files, o); {
	case errors.Is(err, runs.ErrNotFound):
		return req, nil // the root run is gone: this one starts the work item again
	case err != nil:
		return req, err
	}
	e.Log.Info("an event continues its work item's run", "run", root, "work_item", o.WorkItem, "delivery", d.ID)
	return runs.CreateRequest{ID: root}, nil
}

package automations

import (
	"strings"

	"factory"
	"factory/internal/filter"
	"factory/internal/runs"
	"factory/internal/trigger"
)

// FireFactoryEvent starts the runs of a factory's automations that one of
// the factory provider's own events fires (a task's stage changed:
// docs/spec/foreman.md). id names the event: the same id starts nothing
// twice. The payload is attached to each run as its event's.
func (e *Evaluator) FireFactoryEvent(f *factory.Factory, ev *factory.ProviderEvent, id string, payload []byte) ([]*factory.Run, error) {
	decoded, err := filter.DecodePayload(payload)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	err = e.refresh()
	var autos []*compiledAutomation
	if err == nil {
		autos, err = e.compiledOf(f.Name)
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	src := trigger.Event{Source: trigger.Source{Provider: factory.ProviderFactory}, Payload: decoded, Provider: ev}
	var reqs []runs.CreateRequest
	for _, a := range autos {
		if !a.rec.Spec.Enabled || !a.triggers.Match(src) {
			continue
		}
		req, err := e.factoryEventRequest(f, a.rec, ev, id, payload)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, req)
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	made, err := e.Runs.CreateMany(reqs, nil)
	if err == nil && e.Started != nil {
		e.Started(len(made))
	}
	return made, err
}

// factoryEventRequest is the run an automation starts for a factory event:
// its agent's prompt, the automation's, then the envelope.
func (e *Evaluator) factoryEventRequest(f *factory.Factory, a *factory.Automation, ev *factory.ProviderEvent, id string, payload []byte) (runs.CreateRequest, error) {
	req := runs.CreateRequest{ID: RunID(id, a.UID), ErrorOnUnknownEnvironment: true, Title: a.Spec.Title, Config: a.Spec.Config,
		Source: factory.SourceAPI, FactoryUID: f.UID, AutomationID: a.UID,
		Prompt:      strings.TrimRight(a.Spec.Prompt, "\n") + "\n" + providerEnvelope(ev, id),
		Attachments: []runs.AttachmentData{{Name: "event-payload.json", MimeType: "application/json", Data: payload}}}
	return req, e.applyAgent(f, a, &req)
}

package factory

import "sort"

// State is everything a plan needs to know of one factory: its record (nil
// when it was never applied), its webhooks (live and deleted), automations,
// UIDs pinned by import, and the managed secrets of the store.
type State struct {
	Factory         *Factory               `json:"factory"`
	Webhooks        map[string]*Webhook    `json:"webhooks"` // by key
	DeletedWebhooks []*Webhook             `json:"deleted_webhooks"`
	Automations     map[string]*Automation `json:"automations"` // by key
	Pins            map[string]string      `json:"pins"`        // webhook key → UID
	Secrets         map[string]*Secret     `json:"secrets"`     // by name
	// Resources are the agents, runners, skills, scorers and benchmark
	// suites, by kind, then key.
	Resources map[string]map[string]*Resource `json:"resources"`
}

// NewState returns an empty state: a factory never applied.
func NewState() *State {
	return &State{Webhooks: map[string]*Webhook{}, Automations: map[string]*Automation{},
		Pins: map[string]string{}, Secrets: map[string]*Secret{}, Resources: map[string]map[string]*Resource{}}
}

// Resource returns a resource of the state, nil when there is none.
func (st *State) Resource(kind, key string) *Resource { return st.Resources[kind][key] }

// AddResource puts a resource into the state's map of its kind.
func (st *State) AddResource(r *Resource) {
	if st.Resources[r.Kind] == nil {
		st.Resources[r.Kind] = map[string]*Resource{}
	}
	st.Resources[r.Kind][r.Key] = r
}

// SortedResources returns the state's resources of a kind in key order.
func (st *State) SortedResources(kind string) []*Resource {
	return sortedByKey(st.Resources[kind], func(r *Resource) string { return r.Key })
}

// SortedWebhooks returns the state's live webhooks in key order.
func (st *State) SortedWebhooks() []*Webhook {
	return sortedByKey(st.Webhooks, func(w *Webhook) string { return w.Key })
}

// SortedAutomations returns the state's automations in key order.
func (st *State) SortedAutomations() []*Automation {
	return sortedByKey(st.Automations, func(a *Automation) string { return a.Key })
}

func sortedByKey[T any](m map[string]*T, key func(*T) string) []*T {
	out := make([]*T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

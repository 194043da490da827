package reconciler

import (
	"factory"
	"factory/internal/store"
)

// Status builds the status of one factory from the store.
func Status(s *store.Store, f *factory.Factory, publicURL string) (*factory.FactoryStatus, error) {
	whs, err := s.Webhooks(f.Name)
	if err != nil {
		return nil, err
	}
	aus, err := s.Automations(f.Name)
	if err != nil {
		return nil, err
	}
	res, err := s.Resources(f.Name, "")
	if err != nil {
		return nil, err
	}
	st := factory.BuildStatus(f, whs, aus, publicURL)
	st.ResourceStatuses(f, res)
	return st, nil
}

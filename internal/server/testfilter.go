package server

import (
	"net/http"
)

func (s *Server) testFilter(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		DeliveryID string `json:"delivery_id"`
	}
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	res, err := s.svc.TestFilter(r.Context(), r.PathValue("id"), q.DeliveryID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

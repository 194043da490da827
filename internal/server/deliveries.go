package server

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strconv"

	"factory"

	"factory/internal/cursor"
)

// cursorKey is the key of paging cursors: random, kept in the store, so
// cursors survive a restart but cannot be forged.
func (s *Server) cursorKey() ([]byte, error) {
	s.cursorOnce.Do(func() {
		v, err := s.store.Meta("cursor_key")
		if err == nil && v == "" {
			k := make([]byte, 32)
			rand.Read(k)
			v = base64.StdEncoding.EncodeToString(k)
			b := s.store.NewBatch()
			b.PutMeta("cursor_key", v)
			err = b.Commit()
		}
		if err == nil {
			s.cursorKeyV, err = base64.StdEncoding.DecodeString(v)
		}
		s.cursorErr = err
	})
	return s.cursorKeyV, s.cursorErr
}

func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.svc.AnyWebhook(r.Context(), r.PathValue("uid"))
	if err != nil {
		return err
	}
	uid := wh.UID
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return errorf(CodeInvalidRequest, "limit must be a whole number from 1 to 500")
		}
		limit = n
	}
	key, err := s.cursorKey()
	if err != nil {
		return err
	}
	var before string
	if c := r.URL.Query().Get("cursor"); c != "" {
		if before, err = cursor.Open(key, uid, c); err != nil {
			return errorf(CodeInvalidRequest, "the cursor is not one this server gave for this webhook's deliveries")
		}
	}
	ds, more, err := s.svc.Deliveries(r.Context(), uid, before, limit)
	if err != nil {
		return err
	}
	page := factory.PageInfo{HasNextPage: more}
	if more {
		page.NextCursor = cursor.Seal(key, uid, ds[len(ds)-1].ID)
	}
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": ds, "page_info": page})
	return nil
}

func (s *Server) getDelivery(w http.ResponseWriter, r *http.Request) error {
	d, payload, err := s.svc.Delivery(r.Context(), r.PathValue("uid"), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, factory.DeliveryView{Delivery: *d, Payload: payload})
	return nil
}

func (s *Server) suspend(suspended bool) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		wh, err := s.svc.SetSuspended(r.Context(), r.PathValue("uid"), suspended)
		if err != nil {
			return err
		}
		return s.writeWebhook(w, wh)
	}
}

func (s *Server) writeWebhook(w http.ResponseWriter, wh *factory.Webhook) error {
	f, err := s.store.Factory(wh.Factory)
	if err != nil {
		return err
	}
	st := factory.BuildStatus(f, []*factory.Webhook{wh}, nil, s.cfg.PublicURL)
	writeJSON(w, http.StatusOK, webhookView{WebhookStatus: st.Webhooks[0], FactoryUID: f.UID})
	return nil
}

// findDelivery is GET /v1/deliveries/{id}: a delivery by its ID alone.
func (s *Server) findDelivery(w http.ResponseWriter, r *http.Request) error {
	d, payload, err := s.svc.FindDelivery(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, factory.DeliveryView{Delivery: *d, Payload: payload})
	return nil
}

// redeliver is POST /v1/deliveries/{id}/redeliver: 202 with the new
// delivery, evaluated as if it had just arrived.
func (s *Server) redeliver(w http.ResponseWriter, r *http.Request) error {
	d, err := s.svc.Redeliver(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"delivery_id": d.ID, "redelivery_of": d.RedeliveryOf})
	return nil
}

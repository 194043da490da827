package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble"

	"factory"
)

// Key layout of run-status notifications (docs/spec/talkback.md, Run-status
// webhooks): the outbox and delivery log, each delivery's body, the
// pending ones by route and run (in the order they must go), and the
// routes a receiver disabled (410).
const (
	notificationPrefix     = "ntf/"     // ntf/<id> → Notification (IDs sort by time)
	notificationBodyPrefix = "ntfbody/" // ntfbody/<id> → the body sent
	notificationQueue      = "ntfq/"    // ntfq/<route key>/<run id>/<id> → nothing
	notificationOff        = "ntfoff/"  // ntfoff/<route key> → DisabledRoute
)

// DisabledRoute is a route its receiver disabled (410 Gone), at its URL
// then: a route whose URL changed since is enabled again.
type DisabledRoute struct {
	URL string    `json:"url"`
	At  time.Time `json:"at"`
}

func queueKey(n *factory.Notification) string {
	return notificationQueue + n.RouteKey() + "/" + n.RunID + "/" + n.ID
}

// PutNotification writes a new notification and its body, queued when it
// is pending: in the batch of the run's change it announces, so that the
// change and its announcement are durable together.
func (b *Batch) PutNotification(n *factory.Notification, body []byte) {
	b.putJSON(notificationPrefix+n.ID, n)
	b.putRaw(notificationBodyPrefix+n.ID, body)
	if n.Status == factory.NotificationPending {
		b.putRaw(queueKey(n), nil)
	}
}

// UpdateNotification writes a notification's progress; one no longer
// pending leaves the queue.
func (b *Batch) UpdateNotification(n *factory.Notification) {
	b.putJSON(notificationPrefix+n.ID, n)
	if n.Status != factory.NotificationPending {
		b.delete(queueKey(n))
	}
}

// Notification reads one notification.
func (s *Store) Notification(id string) (*factory.Notification, error) {
	n := &factory.Notification{}
	return n, s.getJSON(notificationPrefix+id, n)
}

// NotificationBody is the body a notification sends.
func (s *Store) NotificationBody(id string) ([]byte, error) {
	return s.get(notificationBodyPrefix + id)
}

// PendingHeads calls fn with the first pending notification of each route
// and run (the one that must go before the others), in key order.
func (s *Store) PendingHeads(fn func(id string) error) error {
	last := ""
	return s.scan(notificationQueue, func(key string, _ []byte) error {
		rest := key[len(notificationQueue):]
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			return nil
		}
		if group := rest[:i]; group != last {
			last = group
			return fn(rest[i+1:])
		}
		return nil
	})
}

// PendingOf lists the pending notifications of a route, oldest first.
func (s *Store) PendingOf(routeKey string) ([]string, error) {
	var out []string
	err := s.scan(notificationQueue+routeKey+"/", func(key string, _ []byte) error {
		out = append(out, key[strings.LastIndexByte(key, '/')+1:])
		return nil
	})
	return out, err
}

// Notifications lists notifications newest first, from before (an ID;
// "" the newest) on, those match keeps only (nil: all); more says there
// are more.
func (s *Store) Notifications(match func(*factory.Notification) bool, before string, limit int) (out []*factory.Notification, more bool, err error) {
	upper := prefixEnd(notificationPrefix)
	if before != "" {
		upper = []byte(notificationPrefix + before)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte(notificationPrefix), UpperBound: upper})
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	for ok := it.Last(); ok; ok = it.Prev() {
		n := &factory.Notification{}
		if err := json.Unmarshal(it.Value(), n); err != nil {
			return nil, false, fmt.Errorf("decode %s: %w", it.Key(), err)
		}
		if match != nil && !match(n) {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, n)
	}
	return out, false, it.Error()
}

// DisableRoute records that a route's receiver answered 410 at url.
func (b *Batch) DisableRoute(routeKey, url string, at time.Time) {
	b.putJSON(notificationOff+routeKey, DisabledRoute{URL: url, At: at})
}

// EnableRoute forgets a route's disabling.
func (b *Batch) EnableRoute(routeKey string) { b.delete(notificationOff + routeKey) }

// DisabledRoutes are the disabled routes, by key.
func (s *Store) DisabledRoutes() (map[string]DisabledRoute, error) {
	out := map[string]DisabledRoute{}
	err := s.scan(notificationOff, func(key string, v []byte) error {
		var d DisabledRoute
		if err := json.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("decode %s: %w", key, err)
		}
		out[key[len(notificationOff):]] = d
		return nil
	})
	return out, err
}

// SweepNotifications removes the notifications created before cutoff that
// are no longer pending, with their bodies.
func (s *Store) SweepNotifications(cutoff time.Time) (int, error) {
	var drop []string
	err := s.scan(notificationPrefix, func(key string, v []byte) error {
		var n factory.Notification
		if err := json.Unmarshal(v, &n); err != nil {
			return nil
		}
		if !n.CreatedAt.Before(cutoff) {
			return errStop // IDs sort by time: the rest are newer
		}
		if n.Status != factory.NotificationPending {
			drop = append(drop, n.ID)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, err
	}
	b := s.NewLogBatch()
	for _, id := range drop {
		b.delete(notificationPrefix + id)
		b.delete(notificationBodyPrefix + id)
	}
	return len(drop), b.CommitNoSync()
}

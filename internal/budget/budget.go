// Package budget is the server's budgets of events per key over a sliding
// window: the ingress's deliveries, failed authentications and logged
// refusals, the push receiver's, the dashboard's sign-ins.
package budget

import (
	"sync"
	"time"
)

// Window is a sliding-window log: at most limit events per key in any
// window. It answers exactly the seed's "more than 60 in the last 60 s",
// and how long until a slot frees, which a token bucket cannot. A limit of
// 0 disables it.
type Window struct {
	limit  int
	window time.Duration

	mu        sync.Mutex
	keys      map[string][]time.Time
	lastSweep time.Time
}

// New is a budget of limit events per key in any window.
func New(limit int, window time.Duration) *Window {
	return &Window{limit: limit, window: window, keys: map[string][]time.Time{}}
}

// prune drops events that left the window; the caller holds mu.
func (l *Window) prune(key string, now time.Time) []time.Time {
	ts := l.keys[key]
	i := 0
	for i < len(ts) && !ts[i].After(now.Add(-l.window)) {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(l.keys, key)
	} else {
		l.keys[key] = ts
	}
	// Idle keys (a flood from many addresses) must not pile up.
	if now.Sub(l.lastSweep) > l.window {
		l.lastSweep = now
		for k, v := range l.keys {
			if len(v) == 0 || !v[len(v)-1].After(now.Add(-l.window)) {
				delete(l.keys, k)
			}
		}
	}
	return ts
}

// Full reports whether the key has no slot left, and when one frees.
func (l *Window) Full(key string, now time.Time) (time.Duration, bool) {
	if l.limit <= 0 {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := l.prune(key, now)
	if len(ts) < l.limit {
		return 0, false
	}
	return ts[len(ts)-l.limit].Add(l.window).Sub(now), true
}

// Reserve takes a slot if one is free; release gives it back (for a
// request refused after all). Concurrent requests cannot overshoot.
func (l *Window) Reserve(key string, now time.Time) (release func(), retry time.Duration, ok bool) {
	if l.limit <= 0 {
		return func() {}, 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := l.prune(key, now)
	if len(ts) >= l.limit {
		return nil, ts[len(ts)-l.limit].Add(l.window).Sub(now), false
	}
	l.keys[key] = append(ts, now)
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		ts := l.keys[key]
		for i := len(ts) - 1; i >= 0; i-- {
			if ts[i].Equal(now) {
				l.keys[key] = append(ts[:i:i], ts[i+1:]...)
				return
			}
		}
	}, 0, true
}

// RetryAfter rounds a wait up to whole seconds, at least one: a
// Retry-After header's value.
func RetryAfter(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

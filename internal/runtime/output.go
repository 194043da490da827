package runtime

import (
	"sync"
	"unicode/utf8"

	"factory"
)

// OutputLimits bound a turn's status messages (factory.MaxMessageBytes and
// the rest): a message is cut at Message bytes; a turn keeps at most
// TurnMessages messages and TurnBytes in all, a run RunMessages and
// RunBytes.
type OutputLimits struct {
	Message      int
	TurnMessages int
	TurnBytes    int64
	RunMessages  int
	RunBytes     int64
}

// DefaultOutputLimits are the limits of factory's constants.
var DefaultOutputLimits = OutputLimits{Message: factory.MaxMessageBytes, TurnMessages: factory.MaxTurnMessages,
	TurnBytes: factory.MaxTurnMessageBytes, RunMessages: factory.MaxRunMessages, RunBytes: factory.MaxRunMessageBytes}

// CutMessage cuts a status message at max bytes, on a character's
// boundary, marking the cut with an ellipsis.
func CutMessage(s string, limit int) string {
	const mark = "…"
	if limit <= len(mark) || len(s) <= limit {
		return s
	}
	cut := limit - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// Dropped counts the status messages a turn dropped over its bounds.
type Dropped struct {
	Messages int   `json:"messages,omitempty"`
	Bytes    int64 `json:"bytes,omitempty"`
}

// LimitOutput passes a turn's status messages on to events within the
// turn's bounds (each cut at lim.Message; at most lim.TurnMessages and
// lim.TurnBytes in all), and counts the rest in dropped: a worker's, so
// that an agent's flood does not reach the control plane. Other events
// (its steps) pass.
func LimitOutput(events func(Event), lim OutputLimits) (limited func(Event), dropped func() Dropped) {
	var mu sync.Mutex
	var kept int
	var keptBytes int64
	var d Dropped
	limited = func(e Event) {
		if e.Phase != "" || e.Message == "" {
			events(e)
			return
		}
		e.Message = CutMessage(e.Message, lim.Message)
		n := int64(len(e.Message))
		mu.Lock()
		over := kept+1 > lim.TurnMessages || keptBytes+n > lim.TurnBytes
		if over {
			d.Messages++
			d.Bytes += n
		} else {
			kept++
			keptBytes += n
		}
		mu.Unlock()
		if !over {
			events(e)
		}
	}
	dropped = func() Dropped {
		mu.Lock()
		defer mu.Unlock()
		return d
	}
	return limited, dropped
}

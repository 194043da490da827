package store

import (
	"fmt"

	"factory"
)

// Key layout of a run's model calls (docs/spec/harnesses.md, the model
// gateway).
const modelCallPrefix = "rungw/" // rungw/<run id>/<seq, 10 digits> → ModelCall

// AddModelCall records a model call of a run, numbered by its Seq.
func (b *Batch) AddModelCall(runID string, c *factory.ModelCall) {
	b.putJSON(fmt.Sprintf("%s%s/%010d", modelCallPrefix, runID, c.Seq), c)
}

// ModelCalls reads a run's model calls, oldest first.
func (s *Store) ModelCalls(runID string) ([]*factory.ModelCall, error) {
	return scanJSON[factory.ModelCall](s, modelCallPrefix+runID+"/")
}

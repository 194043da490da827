package backup

import (
	"io"
	"time"
)

// chunk is how much a backup reads at a time: the unit the pacer
// measures.
const chunk = 256 << 10

// pacer keeps a backup's own work to a share of one core, so that a
// server under load goes on serving at nearly its full rate while it is
// backed up (BENCHMARKS.md, "Backups"). Between two reads of a chunk the
// backup hashes or compresses and writes the chunk before; after that
// work, the pacer sleeps long enough that the work is share of the time.
// A nil pacer does not pace.
type pacer struct {
	share float64
	since time.Time // when the work since the last read began
}

func newPacer(share float64) *pacer {
	if share <= 0 || share >= 1 {
		return nil
	}
	return &pacer{share: share}
}

// reader paces reads of r.
func (p *pacer) reader(r io.Reader) io.Reader {
	if p == nil {
		return r
	}
	return pacedReader{r: r, p: p}
}

// pause sleeps for the work done since the last call, scaled.
func (p *pacer) pause() {
	now := time.Now()
	if !p.since.IsZero() {
		work := now.Sub(p.since)
		time.Sleep(time.Duration(float64(work) * (1 - p.share) / p.share))
	}
	p.since = time.Now()
}

type pacedReader struct {
	r io.Reader
	p *pacer
}

func (r pacedReader) Read(b []byte) (int, error) {
	r.p.pause()
	return r.r.Read(b)
}

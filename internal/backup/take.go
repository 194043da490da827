package backup

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"factory/internal/secrets"
	"factory/internal/store"
)

// checkpointPrefix names the checkpoints a backup makes inside the data
// directory (on the store's file system, so that table files are hard
// links, not copies).
const checkpointPrefix = ".backup-checkpoint-"

// Options are what a backup records besides the store.
type Options struct {
	// Binary is the version of the binary making the backup.
	Binary string
	// SecretsKey is the fingerprint of the keyring in use; "" takes the
	// one the store records.
	SecretsKey string
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
	// CPUShare, between 0 and 1, is the share of one core the backup's
	// hashing and compressing may take (they sleep in between): for a
	// backup of a store that serves. 0 takes what it can.
	CPUShare float64
}

// Result is a backup made.
type Result struct {
	Manifest *Manifest
	Bytes    int64         // the archive's size
	Took     time.Duration // checkpoint to the archive's end
}

// Take writes a backup of the store, as it is at one instant, to w: a
// checkpoint of the store (writes go on meanwhile), counted and hashed,
// then archived. The checkpoint lives in the data directory until Take
// returns.
func Take(s *store.Store, w io.Writer, o Options) (*Result, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	tmp, err := os.MkdirTemp(s.Dir(), checkpointPrefix)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(tmp)
	start := now()
	at := start.UTC()
	if err := s.Checkpoint(tmp); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	p := newPacer(o.CPUShare)
	m, err := manifestOf(tmp, at, o, p)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	cw := &countingWriter{w: w}
	if err := writeArchive(cw, m, tmp, p); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return &Result{Manifest: m, Bytes: cw.n, Took: now().Sub(start)}, nil
}

// manifestOf describes a checkpoint: its files (listed before it is
// opened, which adds a lock file), then what it holds.
func manifestOf(dir string, at time.Time, o Options, p *pacer) (*Manifest, error) {
	files, total, err := hashFiles(dir, p)
	if err != nil {
		return nil, err
	}
	cp, err := store.OpenReadOnly(dir)
	if err != nil {
		return nil, err
	}
	defer cp.Close()
	format, err := cp.Format()
	if err != nil {
		return nil, err
	}
	counts, err := cp.Counts()
	if err != nil {
		return nil, err
	}
	key := o.SecretsKey
	if key == "" {
		if key, err = secrets.StoreFingerprint(cp); err != nil {
			return nil, err
		}
	}
	return &Manifest{Kind: Kind, ArchiveVersion: ArchiveVersion, StoreFormat: format, Binary: o.Binary, CreatedAt: at,
		SecretsKey: key, Counts: counts, Files: files, TotalBytes: total}, nil
}

// CleanCheckpoints removes the checkpoints backups left in a data
// directory when their process died. Call it holding the store, before
// any backup of this process starts.
func CleanCheckpoints(dataDir string) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), checkpointPrefix) {
			if err := os.RemoveAll(filepath.Join(dataDir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

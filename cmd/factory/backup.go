package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"factory/internal/backup"
	"factory/internal/store"
)

type backupOpts struct {
	output string
}

func (a *app) backupCmd() *cobra.Command {
	o := &backupOpts{}
	cmd := &cobra.Command{
		Use:   "backup --output FILE|-",
		Short: "Back up the whole store, consistent at one instant, to a tar.gz",
		Long: `Write a backup of the store: everything that is not in git (UIDs and so every ingress
URL, managed secrets sealed, API keys and workers' credentials as hashes, runs and their
conversations, the delivery log and its duplicate window, schedules' last firing), as it was at
one instant, into a tar.gz whose first entry, manifest.json, names the store's format, this
binary, the instant, each file's SHA-256 and how many records of each kind it holds.

While a server holds the store the backup goes through it (admin key) and writes go on
meanwhile; otherwise the command opens the store itself. The archive is checked as it is
written (every checksum) before the command says it is done; FILE appears only then.

The secrets key is never in a backup: keep it apart (the manifest names its fingerprint).
See docs/operations.md.`,
		Example: `  factory backup --output /var/backups/factory/manual.tar.gz
  factory backup --output - | ssh backup-host 'cat > factory.tar.gz'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.backup(cmd.Context(), o) },
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "the file to write (- for standard output)")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func (a *app) backup(ctx context.Context, o *backupOpts) error {
	out, err := newOutput(o.output, a.stdout)
	if err != nil {
		return err
	}
	defer out.abort()
	src, local, err := a.backupSource(ctx)
	if err != nil {
		return err
	}
	defer src.Close()
	if local != nil {
		defer local.store.Close()
	}
	cw := &counter{w: out}
	m, err := backup.Verify(io.TeeReader(src, cw), backup.DefaultLimits)
	if err != nil {
		return fmt.Errorf("the backup is not complete: %w", err)
	}
	if err := src.Close(); err != nil { // a local backup's own error
		return err
	}
	if err := out.commit(); err != nil {
		return err
	}
	if local != nil {
		rec := backup.Record{At: m.CreatedAt, Bytes: cw.n, Path: out.path, Seconds: time.Since(local.start).Seconds()}
		if err := backup.Remember(local.store, rec, nil); err != nil {
			return err
		}
	}
	where := out.path
	if where == "" {
		where = "standard output"
	}
	fmt.Fprintf(a.stderr, "Backed up the store as of %s (format %d): %s; %s to %s.\n",
		m.CreatedAt.Format(time.RFC3339Nano), m.StoreFormat, backup.CountsText(m.Counts), byteSize(cw.n), where)
	if m.SecretsKey != "" {
		fmt.Fprintf(a.stderr, "The secrets key is not in it: restoring needs the key of fingerprint %s.\n", m.SecretsKey)
	}
	return nil
}

// backupSource is where the archive comes from: the server holding the
// store (or --server), or a backup of the store made here, streamed
// through a pipe (closing it returns the backup's error). local is set
// for the latter.
func (a *app) backupSource(ctx context.Context) (io.ReadCloser, *localBackup, error) {
	if c := a.remote(); c != nil {
		r, err := c.Backup(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("backup through the server at %s: %w", c.BaseURL, apiError(err))
		}
		return r, nil, nil
	}
	if !a.storeExists() {
		return nil, nil, a.noStore()
	}
	s, err := a.openStore()
	if err != nil {
		return nil, nil, err
	}
	if err := backup.CleanCheckpoints(s.Dir()); err != nil {
		s.Close()
		return nil, nil, err
	}
	lb := &localBackup{store: s, start: time.Now(), done: make(chan error, 1)}
	pr, pw := io.Pipe()
	go func() {
		_, err := backup.Take(s, pw, backup.Options{Binary: versionString()})
		pw.CloseWithError(err)
		lb.done <- err
	}()
	lb.pr = pr
	return lb, lb, nil
}

// localBackup is a backup made by this process: the pipe it is read from.
type localBackup struct {
	store *store.Store
	start time.Time
	pr    *io.PipeReader
	done  chan error
	err   error
	ended bool
}

func (l *localBackup) Read(p []byte) (int, error) { return l.pr.Read(p) }

// Close waits for the backup to end and returns its error (once).
func (l *localBackup) Close() error {
	if !l.ended {
		l.ended = true
		l.pr.Close()
		l.err = <-l.done
	}
	return l.err
}

// output is where a backup goes: a temporary file next to path, renamed
// to it when the archive checked out, or standard output (path "").
type output struct {
	io.Writer
	path string
	file *os.File
}

func newOutput(path string, stdout io.Writer) (*output, error) {
	if path == "-" {
		return &output{Writer: stdout}, nil
	}
	if path == "" {
		return nil, errors.New("--output: give a file, or - for standard output")
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-")
	if err != nil {
		return nil, fmt.Errorf("--output %s: %w", path, err)
	}
	return &output{Writer: f, path: path, file: f}, nil
}

// commit makes the file durable and gives it its name.
func (o *output) commit() error {
	if o.file == nil {
		return nil
	}
	err := o.file.Sync()
	if cerr := o.file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.file.Name(), o.path)
	}
	if err != nil {
		return fmt.Errorf("--output %s: %w", o.path, err)
	}
	o.file = nil
	return nil
}

// abort removes a file that was not committed.
func (o *output) abort() {
	if o.file != nil {
		o.file.Close()
		os.Remove(o.file.Name())
	}
}

type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// byteSize writes a size for a person.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

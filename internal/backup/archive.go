package backup

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"factory/internal/store"
)

// hashFiles lists the files of a store directory (dir/db) with their sizes
// and SHA-256s, by name; the lock file is not part of a store's state.
func hashFiles(dir string, p *pacer) ([]File, int64, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "db"))
	if err != nil {
		return nil, 0, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var files []File
	var total int64
	for _, e := range entries {
		if e.Name() == store.LockFile {
			continue
		}
		if !e.Type().IsRegular() {
			return nil, 0, fmt.Errorf("%s: not a regular file", filepath.Join(dir, "db", e.Name()))
		}
		f, err := hashFile(filepath.Join(dir, "db", e.Name()), p)
		if err != nil {
			return nil, 0, err
		}
		f.Path = "db/" + e.Name()
		files = append(files, f)
		total += f.Size
	}
	return files, total, nil
}

func hashFile(path string, p *pacer) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, p.reader(f), make([]byte, chunk))
	if err != nil {
		return File{}, fmt.Errorf("read %s: %w", path, err)
	}
	return File{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// writeArchive writes the manifest, then each of its files from dir, as a
// tar.gz. Table files are compressed already: gzip at its fastest level
// takes what is left cheaply.
func writeArchive(w io.Writer, m *Manifest, dir string, p *pacer) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeEntry(tw, ManifestName, m.CreatedAt, int64(len(mb)), bytes.NewReader(mb)); err != nil {
		return err
	}
	for _, f := range m.Files {
		if err := copyFile(tw, dir, f, m.CreatedAt, p); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func copyFile(tw *tar.Writer, dir string, f File, at time.Time, p *pacer) error {
	r, err := os.Open(filepath.Join(dir, filepath.FromSlash(f.Path)))
	if err != nil {
		return err
	}
	defer r.Close()
	return writeEntry(tw, f.Path, at, f.Size, p.reader(r))
}

func writeEntry(tw *tar.Writer, name string, at time.Time, size int64, r io.Reader) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o600, ModTime: at, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	// Exactly the size the manifest says: a file that changed since it was
	// hashed is an error, not a different backup.
	if n, err := io.CopyBuffer(tw, io.LimitReader(r, size), make([]byte, chunk)); err != nil || n != size {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%s: copied %d of %d bytes: %w", name, n, size, err)
	}
	return nil
}

// sink receives a verified archive's files: create opens one to write,
// and the file is kept only if the archive's checksum for it matches.
type sink interface {
	create(path string) (io.WriteCloser, error)
}

// discard checks an archive without writing it anywhere.
type discard struct{}

func (discard) create(string) (io.WriteCloser, error) { return nopCloser{io.Discard}, nil }

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// dirSink writes files under a staging directory (its db/ made 0700, each
// file 0600, never over an existing one; synced unless noSync).
type dirSink struct {
	dir    string
	noSync bool
}

func (d dirSink) create(path string) (io.WriteCloser, error) {
	full := filepath.Join(d.dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err != nil:
		return nil, err
	case d.noSync:
		return f, nil
	}
	return syncCloser{f}, nil
}

type syncCloser struct{ *os.File }

func (f syncCloser) Close() error {
	if err := f.Sync(); err != nil {
		f.File.Close()
		return err
	}
	return f.File.Close()
}

// Verify reads a whole archive and checks it as restore does, writing
// nothing: the manifest, then every file's size and SHA-256, then that
// nothing follows.
func Verify(r io.Reader, lim Limits) (*Manifest, error) { return read(r, lim, discard{}) }

// maxPadding is how many zero bytes may follow the tar's end inside the
// gzip stream (tar writers pad to their record size).
const maxPadding = 64 << 10

// read is the archive's reader: it checks the manifest against the limits
// before reading any file, takes each entry only if it is the regular
// file the manifest lists next, reads exactly the size the manifest gives
// it, and checks its SHA-256; then that the archive ends there. Files go
// to the sink as they are read: the caller discards what it wrote when
// read fails.
func read(r io.Reader, lim Limits, out sink) (*Manifest, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("not a backup: not a gzip stream: %w", err)
	}
	zr.Multistream(false)
	tr := tar.NewReader(zr)
	m, err := readManifest(tr, lim)
	if err != nil {
		return nil, err
	}
	for i, f := range m.Files {
		if err := readFile(tr, m, i, f, out); err != nil {
			return nil, err
		}
	}
	switch hdr, err := tr.Next(); {
	case err == nil:
		return nil, fmt.Errorf("%s: not in the manifest", hdr.Name)
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("after the last file: %w", truncated(err))
	}
	return m, checkEnd(zr, br)
}

func readManifest(tr *tar.Reader, lim Limits) (*Manifest, error) {
	hdr, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("not a backup: %w", truncated(err))
	}
	if hdr.Name != ManifestName || hdr.Typeflag != tar.TypeReg {
		return nil, fmt.Errorf("not a backup: the first entry is %q, not %s", hdr.Name, ManifestName)
	}
	if hdr.Size > lim.ManifestBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", ManifestName, hdr.Size, lim.ManifestBytes)
	}
	b, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestName, truncated(err))
	}
	if int64(len(b)) != hdr.Size {
		return nil, fmt.Errorf("%s: truncated", ManifestName)
	}
	m := &Manifest{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestName, err)
	}
	if err := m.check(lim); err != nil {
		return nil, err
	}
	return m, nil
}

func readFile(tr *tar.Reader, m *Manifest, i int, f File, out sink) error {
	hdr, err := tr.Next()
	if err != nil {
		return fmt.Errorf("%s: missing (%d of %d files read): %w", f.Path, i, len(m.Files), truncated(err))
	}
	switch {
	case hdr.Name != f.Path:
		return fmt.Errorf("%s: found where the manifest lists %s (a file out of order, listed twice or not listed)", hdr.Name, f.Path)
	case hdr.Typeflag != tar.TypeReg:
		return fmt.Errorf("%s: not a regular file (type %q): refused", hdr.Name, hdr.Typeflag)
	case hdr.Size != f.Size:
		return fmt.Errorf("%s: %d bytes, the manifest says %d", hdr.Name, hdr.Size, f.Size)
	}
	w, err := out.create(f.Path)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.CopyN(io.MultiWriter(w, h), tr, f.Size)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %d of %d bytes: %w", f.Path, n, f.Size, truncated(err))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s, the manifest says %s: the backup is damaged or was changed", f.Path, got, f.SHA256)
	}
	return nil
}

// checkEnd: the tar's end may be followed by zero padding only, the gzip
// stream must end with its checksum intact, and nothing may follow it.
func checkEnd(zr *gzip.Reader, br *bufio.Reader) error {
	rest, err := io.ReadAll(io.LimitReader(zr, maxPadding+1))
	if err != nil {
		return fmt.Errorf("the end of the archive: %w", truncated(err))
	}
	if len(rest) > maxPadding || bytes.IndexFunc(rest, func(r rune) bool { return r != 0 }) >= 0 {
		return errors.New("data after the archive's last file")
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return errors.New("data after the end of the gzip stream")
	}
	return nil
}

// truncated names an unexpected end for what it is.
func truncated(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("the backup is truncated")
	}
	if errors.Is(err, gzip.ErrChecksum) {
		return errors.New("the backup is damaged (gzip checksum)")
	}
	return err
}

// Package backup is the store's backups (docs/operations.md): a consistent
// snapshot of the whole store at one instant as a tar.gz archive whose
// first entry, manifest.json, says what it holds (the store's format, the
// binary, the instant, a SHA-256 per file, counts of records, the secrets
// key's fingerprint); the reader that checks an archive before anything
// is restored from it; restore into an empty directory; and scheduled
// backups. The secrets key is never in a backup.
package backup

import (
	"fmt"
	"regexp"
	"time"

	"factory/internal/store"
)

// Kind marks a factory backup's manifest.
const Kind = "factory-backup"

// ArchiveVersion is the version of the archive's layout (not the store's
// format, which the manifest names too).
const ArchiveVersion = 1

// ManifestName is the archive's first entry.
const ManifestName = "manifest.json"

// Manifest says what a backup holds. It is the archive's first entry, so a
// reader knows every file's size and checksum before it reads any.
type Manifest struct {
	Kind           string `json:"kind"`
	ArchiveVersion int    `json:"archive_version"`
	// StoreFormat is the format of the store in the archive
	// (store.FormatVersion of the binary that made it).
	StoreFormat int `json:"store_format"`
	// Binary is the version of the binary that made the backup.
	Binary string `json:"binary_version"`
	// CreatedAt is the backup's instant: every write committed before it is
	// in the backup.
	CreatedAt time.Time `json:"created_at"`
	// SecretsKey is the fingerprint of the secrets key the store's secrets
	// are sealed with ("" when the store records none). The key itself is
	// never in a backup.
	SecretsKey string       `json:"secrets_key_fingerprint,omitempty"`
	Counts     store.Counts `json:"counts"`
	// Files are the store's files, in archive order, under db/.
	Files      []File `json:"files"`
	TotalBytes int64  `json:"total_bytes"`
}

// File is one file of the store in the archive.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Limits bound what a reader accepts from an archive, which is untrusted
// input: they are checked against the manifest before a file is read, and
// every entry is read only up to the size the manifest gives it.
type Limits struct {
	ManifestBytes int64 // the manifest's size
	Files         int   // how many files
	FileBytes     int64 // one file's size
	TotalBytes    int64 // all files together
}

// DefaultLimits are generous for a store (its table files are at most a
// few hundred MB each) and keep a forged manifest from claiming more.
var DefaultLimits = Limits{ManifestBytes: 16 << 20, Files: 100_000, FileBytes: 64 << 30, TotalBytes: 4 << 40}

// fileName is a store file's name: pebble's names (000123.sst,
// MANIFEST-000001, OPTIONS-000003, marker.format-version.000001.013).
var fileName = regexp.MustCompile(`^db/[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// check validates a manifest against the limits: what it says it holds
// must be a store this binary can restore, in files a reader can write
// without leaving the target.
func (m *Manifest) check(lim Limits) error {
	switch {
	case m.Kind != Kind:
		return fmt.Errorf("%s: kind %q: not a factory backup", ManifestName, m.Kind)
	case m.ArchiveVersion != ArchiveVersion:
		return fmt.Errorf("%s: archive_version %d: this binary reads version %d", ManifestName, m.ArchiveVersion, ArchiveVersion)
	case m.StoreFormat < 1:
		return fmt.Errorf("%s: store_format %d: must be at least 1", ManifestName, m.StoreFormat)
	case m.StoreFormat > store.FormatVersion:
		return fmt.Errorf("%s: the backup holds a store of format %d (made by factory %s); this binary reads formats up to %d: restore it with a factory binary that reads format %d",
			ManifestName, m.StoreFormat, m.Binary, store.FormatVersion, m.StoreFormat)
	case m.CreatedAt.IsZero():
		return fmt.Errorf("%s: created_at is missing", ManifestName)
	case len(m.Files) == 0:
		return fmt.Errorf("%s: files: the backup holds no file", ManifestName)
	case len(m.Files) > lim.Files:
		return fmt.Errorf("%s: files: %d files, more than the %d a backup may hold", ManifestName, len(m.Files), lim.Files)
	case m.TotalBytes < 0 || m.TotalBytes > lim.TotalBytes:
		return fmt.Errorf("%s: total_bytes %d: must be between 0 and %d", ManifestName, m.TotalBytes, lim.TotalBytes)
	}
	seen := make(map[string]bool, len(m.Files))
	var total int64
	for i, f := range m.Files {
		at := fmt.Sprintf("%s: files[%d]", ManifestName, i)
		switch {
		case !fileName.MatchString(f.Path) || f.Path == "db/"+store.LockFile:
			return fmt.Errorf("%s.path %q: not a store file's name (db/ then a plain file name)", at, f.Path)
		case seen[f.Path]:
			return fmt.Errorf("%s.path %q: listed twice", at, f.Path)
		case f.Size < 0 || f.Size > lim.FileBytes:
			return fmt.Errorf("%s.size %d: must be between 0 and %d", at, f.Size, lim.FileBytes)
		case !hexDigest.MatchString(f.SHA256):
			return fmt.Errorf("%s.sha256 %q: not a SHA-256 in lower-case hex", at, f.SHA256)
		}
		seen[f.Path] = true
		total += f.Size
	}
	if total != m.TotalBytes {
		return fmt.Errorf("%s: total_bytes %d, but the files add up to %d", ManifestName, m.TotalBytes, total)
	}
	return nil
}

package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory/internal/store"
)

// fuzzLimits keep the fuzzer's archives small.
var fuzzLimits = Limits{ManifestBytes: 4 << 10, Files: 8, FileBytes: 1 << 10, TotalBytes: 4 << 10}

// seedArchive is a valid archive of two small files.
func seedArchive(t testing.TB) []byte {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "db"), 0o700)
	os.WriteFile(filepath.Join(dir, "db", "000001.sst"), []byte("table bytes"), 0o600)
	os.WriteFile(filepath.Join(dir, "db", "CURRENT"), []byte("MANIFEST-000001\n"), 0o600)
	files, total, err := hashFiles(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{Kind: Kind, ArchiveVersion: ArchiveVersion, StoreFormat: store.FormatVersion, Binary: "seed",
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Files: files, TotalBytes: total}
	var buf bytes.Buffer
	if err := writeArchive(&buf, m, dir, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzRestoreArchive feeds the archive reader arbitrary bytes, writing
// into a staging directory as restore does. Whatever the input, nothing
// is written outside the staging directory's db/, nothing but regular
// files within the limits, and an archive that is accepted has exactly the
// files its manifest lists, with their checksums.
func FuzzRestoreArchive(f *testing.F) {
	good := seedArchive(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(append(append([]byte(nil), good...), 0))
	var sym bytes.Buffer
	zw := gzip.NewWriter(&sym)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "db/CURRENT", Linkname: "../../etc/passwd"})
	tw.Close()
	zw.Close()
	f.Add(sym.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		stage := t.TempDir()
		m, err := read(bytes.NewReader(data), fuzzLimits, dirSink{dir: stage, noSync: true})
		var written int64
		filepath.WalkDir(stage, func(p string, d fs.DirEntry, werr error) error {
			if werr != nil || p == stage {
				return werr
			}
			rel, _ := filepath.Rel(stage, p)
			switch {
			case d.IsDir() && rel == "db":
			case d.Type().IsRegular() && strings.HasPrefix(rel, "db"+string(filepath.Separator)) && !strings.Contains(rel[3:], string(filepath.Separator)):
				fi, _ := d.Info()
				written += fi.Size()
			default:
				t.Fatalf("wrote %s (%v)", rel, d.Type())
			}
			return nil
		})
		if written > fuzzLimits.TotalBytes {
			t.Fatalf("wrote %d bytes, over the limit", written)
		}
		if err != nil {
			return
		}
		for _, file := range m.Files {
			b, rerr := os.ReadFile(filepath.Join(stage, filepath.FromSlash(file.Path)))
			sum := sha256.Sum256(b)
			if rerr != nil || hex.EncodeToString(sum[:]) != file.SHA256 {
				t.Fatalf("accepted, but %s is not as its manifest says: %v", file.Path, rerr)
			}
		}
	})
}

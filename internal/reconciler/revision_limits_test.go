package reconciler_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"factory"
	"factory/internal/reconciler"
)

// TestRevisionLimits: a revision over the total size or the number of
// files is refused, naming the limit, without holding it all. The attack:
// 300 files of 1 MiB took 523 MB of memory to dry-run.
func TestRevisionLimits(t *testing.T) {
	cases := []struct {
		name        string
		files, size int
		want        string
	}{
		{"over the bytes", 40, 1 << 20, fmt.Sprintf("over %d MiB in all, the limit", factory.MaxRevisionBytes>>20)},
		{"over the files", factory.MaxRevisionFiles + 1, 10, fmt.Sprintf("more than %d definition files, the limit", factory.MaxRevisionFiles)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "automations")
			os.MkdirAll(dir, 0o755)
			body := []byte("---\n" + strings.Repeat("#", c.size-4))
			for i := 0; i < c.files; i++ {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("a%05d.md", i)), body, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			snap, err := reconciler.DirSource{Root: root}.Fetch(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var held int64
			for _, b := range snap.Files {
				held += int64(len(b))
			}
			if held > factory.MaxRevisionBytes || len(snap.Files) > factory.MaxRevisionFiles {
				t.Errorf("the reader holds %d files, %d bytes", len(snap.Files), held)
			}
			var msgs []string
			for _, d := range snap.Diagnostics {
				msgs = append(msgs, d.String())
			}
			if len(msgs) != 1 || !strings.Contains(msgs[0], c.want) {
				t.Errorf("diagnostics %q, want one naming %q", msgs, c.want)
			}
			if _, ds := reconciler.Load(snap); !ds.HasErrors() {
				t.Error("the revision loads without errors")
			}
		})
	}
}

// Package watch tells when a factory directory may have changed. It is the
// only package that imports fsnotify.
//
// Events are treated only as "something changed": the caller rescans the
// whole directory, which is cheap and always right, instead of trusting
// single events (editors save by writing a temporary file and renaming it,
// and a burst can overflow the kernel's queue).
package watch

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"factory"

	"github.com/fsnotify/fsnotify"
)

// Dir watches root and sends on the returned channel once a burst of
// changes has settled: after quiet of the debounce period, or at most
// maxWait after the first change of a burst. The channel is closed when
// ctx ends. Sends never block: a pending signal absorbs later ones.
func Dir(ctx context.Context, root string, debounce time.Duration, log *slog.Logger) (<-chan struct{}, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	// Watch directories, not files: a file replaced by rename would lose
	// its watch.
	if err := w.Add(root); err != nil {
		w.Close()
		return nil, err
	}
	for _, d := range factory.KnownDirs {
		addTree(w, root, filepath.Join(root, d))
	}
	out := make(chan struct{}, 1)
	maxWait := 10 * debounce
	go func() {
		defer close(out)
		defer w.Close()
		var timer <-chan time.Time
		var first time.Time
		arm := func() {
			now := time.Now()
			if timer == nil {
				first = now
			}
			wait := debounce
			if left := maxWait - now.Sub(first); left < wait {
				wait = max(left, 0)
			}
			timer = time.After(wait)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				// A folder created (or re-created) after start.
				if ev.Has(fsnotify.Create) {
					addTree(w, root, ev.Name)
				}
				arm()
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				if !errors.Is(err, fsnotify.ErrEventOverflow) {
					log.Warn("watching factory directory", "dir", root, "err", err)
				}
				arm() // overflow: events were lost, so rescan everything
			case <-timer:
				timer = nil
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out, nil
}

// addTree watches path and every folder below it when path is a known
// folder of the factory or lies inside one (the v1alpha1 layout nests
// definitions: agents/<name>/agent.md). Dot-folders are skipped.
func addTree(w *fsnotify.Watcher, root, path string) {
	rel, err := filepath.Rel(root, path)
	if err != nil || !factory.IsKnownDir(strings.Split(filepath.ToSlash(rel), "/")[0]) {
		return
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if p != path && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		_ = w.Add(p) // adding twice is harmless
		return nil
	})
}

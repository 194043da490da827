package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"factory/client"
	"factory/internal/backup"
)

// backupsStatus is what status shows of backups: the last that succeeded,
// the last that failed, and a server's schedule.
type backupsStatus struct {
	backup.Records
	Schedule *struct {
		Every string `json:"every"`
		Keep  int    `json:"keep"`
		Dir   string `json:"dir"`
	} `json:"schedule,omitempty"`
}

// statusBackups reads the backups' status from the store, or the server
// that holds it (when the key may read it); nil when there is nothing to
// show.
func (a *app) statusBackups(ctx context.Context) *backupsStatus {
	v, err := a.view()
	if err != nil {
		return nil
	}
	defer v.Close()
	out := &backupsStatus{}
	switch v := v.(type) {
	case localView:
		if out.Records, err = backup.LastRecords(v.Store); err != nil {
			return nil
		}
	case remoteView:
		if v.Do(ctx, "GET", "/v1/admin/backups", nil, out, client.WithMaxRetries(0)) != nil {
			return nil
		}
	}
	if out.Last == nil && out.LastFailure == nil && out.Schedule == nil {
		return nil
	}
	return out
}

func printBackups(w io.Writer, bs *backupsStatus) {
	if bs == nil {
		return
	}
	fmt.Fprintln(w, "\nBackups:")
	if r := bs.Last; r != nil {
		where := r.Path
		if where == "" {
			where = "streamed to a client"
		}
		fmt.Fprintf(w, "  Last:          %s, %s, %s (took %s)\n", r.At.Format(time.RFC3339), byteSize(r.Bytes), where,
			time.Duration(r.Seconds*float64(time.Second)).Round(time.Millisecond))
	} else {
		fmt.Fprintln(w, "  Last:          none yet")
	}
	if r := bs.LastFailure; r != nil && (bs.Last == nil || r.At.After(bs.Last.At)) {
		fmt.Fprintf(w, "  Last failure:  %s: %s\n", r.At.Format(time.RFC3339), r.Error)
	}
	if sc := bs.Schedule; sc != nil {
		fmt.Fprintf(w, "  Schedule:      every %s into %s, the newest %d kept\n", sc.Every, sc.Dir, sc.Keep)
	}
}

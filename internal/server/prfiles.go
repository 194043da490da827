package server

import (
	"context"
	"errors"

	"factory"
	"factory/internal/codehost"
	"factory/internal/trigger"
)

// changedFiles reads the files a pull (merge) request event's pull
// request changes from its code host, for the paths filter (evaluation
// and Test filter alike): within codehost.FilesTimeout, and not from a
// host that ran out of that time within codehost.FilesHoldOff. Without a
// credential for the host, the reason says so.
func (s *Server) changedFiles(ctx context.Context, factoryName string, ev *factory.ProviderEvent) trigger.Files {
	if ev.Subject == nil || ev.Subject.Number <= 0 || ev.Repository == "" {
		return trigger.UnreadFiles(errors.New("the event names no pull request"))
	}
	paths, capped, err := s.files.Read(ctx, factoryName, codehost.Repo{Host: ev.Provider, Path: ev.Repository}, ev.Subject.Number)
	if err != nil {
		return trigger.UnreadFiles(err)
	}
	return trigger.Files{Paths: paths, Capped: capped}
}

package docker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/runtime"
)

// runACP runs an ACP agent's turn: the setup commands first (their notes
// on stderr), then, once the agent has started, the protocol over the
// container's attached stdin and stdout, driven by the environment's ACP
// executor with the workspace at its path in the container.
func (b *Backend) runACP(ctx context.Context, t turn, id string, events func(runtime.Event)) runtime.Result {
	stderr := &runtime.Tail{Max: runtime.MaxStderr}
	started := make(chan struct{})
	t.Turn.Started = chainStarted(t.Turn.Started, started)
	notes := &noteLines{nonce: t.nonce, sink: stderr, note: scriptNotes(t, events)}
	l, err := b.launch(ctx, t, id, notes)
	if err != nil {
		return runtime.Result{State: factory.StateError, Message: err.Error()}
	}
	defer l.att.Close()
	defer func() {
		select {
		case <-l.exited:
		default:
			b.kill(id, "SIGKILL", "") // the executor is done with it
			<-l.exited
		}
		<-l.copied
	}()
	if res, ok := b.awaitAgent(ctx, t, id, l, started); !ok {
		return res
	}
	stream := &runtime.AgentStream{Stdin: stdin{l}, Stdout: l.stdout, Stderr: stderr, Exited: l.exited, Workspace: Workspace,
		ExitErr: func() error { return exitError(l) }}
	res := t.acp.Drive(ctx, t.Turn, stream, events)
	select {
	case <-l.exited:
		<-l.copied
		if r, failed := setupFailed(t, int(l.code)); failed {
			return r
		}
	default:
	}
	return res
}

// awaitAgent waits through the setup until the agent starts: a turn
// stopped meanwhile, its timeout, or a failed setup end it here.
func (b *Backend) awaitAgent(ctx context.Context, t turn, id string, l *launched, started chan struct{}) (runtime.Result, bool) {
	var timeout <-chan time.Time
	if t.Timeout > 0 {
		tm := time.NewTimer(t.Timeout)
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case <-started:
		return runtime.Result{}, true
	case <-l.exited:
		<-l.copied
		if r, failed := setupFailed(t, int(l.code)); failed {
			return r, false
		}
		return runtime.Result{State: factory.StateError, Message: fmt.Sprintf("the run's container ended before its agent started: %v", exitError(l))}, false
	case <-ctx.Done():
		state, msg := runtime.StoppedBy(ctx)
		b.stop(id, l, state)
		return runtime.Result{State: state, Message: msg + " (during the setup)"}, false
	case <-timeout:
		b.stop(id, l, factory.StateFailed)
		return runtime.Result{State: factory.StateFailed, Code: runtime.CodeInfrastructureTimeout,
			Message: fmt.Sprintf("the environment's timeout (%s) was reached during the setup", t.Timeout)}, false
	}
}

func exitError(l *launched) error {
	switch {
	case l.err != nil:
		return l.err
	case l.code != 0:
		return fmt.Errorf("exit status %d", l.code)
	}
	return nil
}

// chainStarted tells started, then the turn's own Started.
func chainStarted(own func(int), started chan struct{}) func(int) {
	var once sync.Once
	return func(pid int) {
		once.Do(func() { close(started) })
		if own != nil {
			own(pid)
		}
	}
}

// stdin is the container's attached stdin: closing it ends the agent's
// input, not the attachment.
type stdin struct{ l *launched }

func (s stdin) Write(p []byte) (int, error) { return s.l.att.Conn.Write(p) }
func (s stdin) Close() error                { return s.l.att.CloseWrite() }

// noteLines is an ACP agent's stderr: the script's notes (lines that
// begin with the turn's nonce) go to note, the rest to sink.
type noteLines struct {
	nonce string
	sink  *runtime.Tail
	note  func(runtime.Event)
	buf   []byte
}

// maxNoteLine bounds a partial stderr line kept while its end is awaited.
const maxNoteLine = 64 << 10

func (n *noteLines) Write(p []byte) (int, error) {
	n.buf = append(n.buf, p...)
	for {
		i := strings.IndexByte(string(n.buf), '\n')
		if i < 0 {
			break
		}
		line := string(n.buf[:i])
		n.buf = n.buf[i+1:]
		if strings.HasPrefix(line, n.nonce+" ") {
			n.note(runtime.Event{Time: time.Now().UTC(), Message: line})
			continue
		}
		_, _ = n.sink.Write([]byte(line + "\n"))
	}
	if len(n.buf) > maxNoteLine {
		_, _ = n.sink.Write(n.buf)
		n.buf = n.buf[:0]
	}
	return len(p), nil
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// A worker's credentials file is named on its command line (--creds FILE),
// which every local user reads in /proc, its agents included. Once it has
// read the file, the worker starts again in the same process (execve),
// with the file's content and path on an inherited descriptor instead
// (--creds-fd N): no agent of it ever sees the path, and, confined, it
// cannot reach the file (the path is among those hidden from it).

// credsOnFD is what travels on the descriptor.
type credsOnFD struct {
	Path string          `json:"path"`
	Data json.RawMessage `json:"data"`
}

// maxCreds bounds a credentials file: it must fit a pipe's buffer.
const maxCreds = 32 << 10

// readCreds reads the credentials from the file, or from the inherited
// descriptor (closed once read), with the file's path.
func readCreds(file string, fd int) (data []byte, path string, err error) {
	if fd < 0 {
		b, err := os.ReadFile(file)
		return b, file, err
	}
	f := os.NewFile(uintptr(fd), "credentials")
	if f == nil {
		return nil, "", fmt.Errorf("--creds-fd %d: no such descriptor", fd)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 2*maxCreds))
	if err != nil {
		return nil, "", fmt.Errorf("--creds-fd %d: %w", fd, err)
	}
	var c credsOnFD
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, "", fmt.Errorf("--creds-fd %d: %w", fd, err)
	}
	return c.Data, c.Path, nil
}

// execWithCreds starts this program again, in this process, with the same
// arguments but --creds FILE, and the credentials on an inherited pipe
// (--creds-fd). It returns only when it could not.
func execWithCreds(data []byte, path string) error {
	if len(data) > maxCreds {
		return fmt.Errorf("%s: over %d bytes: not a credentials file of factory workers create", path, maxCreds)
	}
	payload, err := json.Marshal(credsOnFD{Path: path, Data: data})
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = w.Write(payload) // within the pipe's buffer: nothing waits
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fd := int(r.Fd())
	if _, err := fcntl(fd, syscall.F_SETFD, 0); err != nil { // inherited across execve
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args, ok := withoutFlag(os.Args, "--creds")
	if !ok {
		return errors.New("--creds: not found among the arguments")
	}
	args = append(args, "--creds-fd", strconv.Itoa(fd))
	return syscall.Exec(self, args, os.Environ())
}

// withoutFlag is args without a flag and its value (--flag VALUE or
// --flag=VALUE, before any --).
func withoutFlag(args []string, flag string) ([]string, bool) {
	out := []string{}
	found := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...), found
		case a == flag:
			found = true
			i++ // its value
		case strings.HasPrefix(a, flag+"="):
			found = true
		default:
			out = append(out, a)
		}
	}
	return out, found
}

func fcntl(fd, cmd, arg int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), uintptr(arg))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

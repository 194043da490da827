// Package dockertest gives tests a Docker daemon and an image to run, or
// skips them saying why there is none.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Image is the image the tests run: busybox, made from this machine's
// static busybox (no registry is needed).
const Image = "factory-test/busybox:1"

// Need skips the test unless a Docker daemon answers (DOCKER_HOST, else its
// default socket) and holds Image, which it imports when missing.
func Need(t testing.TB) {
	t.Helper()
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Skipf("the docker backend's tests need a Docker daemon: %v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Skipf("the docker backend's tests need a Docker daemon (make test starts one where it can: as root, with apt-get): none answers at %s: %v", cli.DaemonHost(), err)
	}
	if err := importBusybox(ctx, cli, Image, nil); err != nil {
		t.Skipf("the docker backend's tests need a static busybox to make their image (apt-get install busybox-static): %v", err)
	}
	once.Do(func() { runs = canRun(ctx, cli) })
	if runs != nil {
		t.Skipf("the Docker daemon at %s answers but cannot run a container on this machine: %v", cli.DaemonHost(), runs)
	}
}

var (
	once sync.Once
	runs error // why the daemon cannot run a container, or nil
)

// canRun runs true in a container of Image: a daemon that answers may
// still be unable to (no cgroups, no mounts where it runs).
func canRun(ctx context.Context, cli *client.Client) error {
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: Image, Cmd: []string{"true"}},
		HostConfig: &container.HostConfig{NetworkMode: "none"}})
	if err != nil {
		return err
	}
	defer cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	wait := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return err
	}
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			return fmt.Errorf("true exited with status %d", r.StatusCode)
		}
		return nil
	case err := <-wait.Error:
		return err
	}
}

// ImageWith is Image with more files (path in the image → file on this
// machine), made as the image ref: an agent's binary, say. It skips the
// test as Need does.
func ImageWith(t testing.TB, ref string, files map[string]string) string {
	t.Helper()
	Need(t)
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := importBusybox(context.Background(), cli, ref, files); err != nil {
		t.Fatalf("making image %s: %v", ref, err)
	}
	return ref
}

// importBusybox makes ref of one static busybox, its applets' links, and
// the files.
func importBusybox(ctx context.Context, cli *client.Client, ref string, files map[string]string) error {
	if _, err := cli.ImageInspect(ctx, ref); err == nil && len(files) == 0 {
		return nil
	}
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	if bytes.Contains(bin, []byte("/lib64/ld-linux")) || bytes.Contains(bin, []byte("/lib/ld-linux")) {
		return errors.New("/bin/busybox is linked dynamically")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "tmp/", "etc/"} {
		_ = tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o1777})
	}
	_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))})
	_, _ = tw.Write(bin)
	for _, applet := range []string{"sh", "cat", "echo", "env", "sleep", "mkdir", "printf", "ls", "grep", "test", "true", "false"} {
		_ = tw.WriteHeader(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox"})
	}
	for name, from := range files {
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(b))})
		_, _ = tw.Write(b)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		return err
	}
	defer res.Close()
	_, err = io.Copy(io.Discard, res)
	return err
}

package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/spf13/cobra"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"factory": func() { os.Exit(Main()) }})
}

// TestScripts runs the command end to end: each testdata/script/*.txtar holds
// a factory repository, the commands a user types, and what they see.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("FACTORY_DATA", "")
			env.Setenv("FACTORY_SERVER", "")
			env.Setenv("FACTORY_API_KEY", "")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"gen-webhooks": genWebhooks,
			"writehex":     writeHex,
			"bigfile":      bigFile,
			"waitfile":     waitFile,
			"waitserver":   waitServer,
			"post":         postDelivery,
			"setenvfile":   setEnvFile,
			"perm":         perm,
		},
	})
}

// gen-webhooks DIR N writes N token webhooks, wh-01.yaml ... into DIR.
func genWebhooks(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: gen-webhooks DIR N")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	for i := 1; i <= n; i++ {
		ts.Check(os.WriteFile(filepath.Join(dir, fmt.Sprintf("wh-%02d.yaml", i)), []byte("authMode: token\n"), 0o644))
	}
}

// writehex FILE HEX writes raw bytes, for input that a txtar cannot hold.
func writeHex(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: writehex FILE HEX")
	}
	b, err := hex.DecodeString(args[1])
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o644))
}

// bigfile FILE BYTES writes a YAML comment of that size.
func bigFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: bigfile FILE BYTES")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	b := make([]byte, n)
	for i := range b {
		b[i] = '#'
	}
	b[n-1] = '\n'
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o644))
}

// waitfile FILE waits up to 20 s for a file to exist (a server's address).
func waitFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: waitfile FILE")
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(ts.MkAbs(args[0])); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("%s did not appear within 20s", args[0])
}

// waitserver DATA waits up to 20 s for the server of a data directory to
// answer /readyz with 200: every factory has synced once.
func waitServer(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: waitserver DATA")
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var info struct{ URL string }
		if b, err := os.ReadFile(filepath.Join(ts.MkAbs(args[0]), "server.json")); err == nil && json.Unmarshal(b, &info) == nil {
			if resp, err := http.Get(info.URL + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("the server of %s was not ready within 20s", args[0])
}

// post DATA UID BODY [HEADER=VALUE...] posts a delivery to the ingress of
// the server of a data directory, prints the status and the answer, and
// sets $DELIVERY_ID to the delivery's ID.
func postDelivery(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 3 {
		ts.Fatalf("usage: post DATA UID BODY [HEADER=VALUE...]")
	}
	var info struct{ URL string }
	b, err := os.ReadFile(filepath.Join(ts.MkAbs(args[0]), "server.json"))
	ts.Check(err)
	ts.Check(json.Unmarshal(b, &info))
	req, err := http.NewRequest(http.MethodPost, info.URL+"/webhooks/w/"+args[1], strings.NewReader(args[2]))
	ts.Check(err)
	for _, h := range args[3:] {
		k, v, _ := strings.Cut(h, "=")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	ts.Check(err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Fprintf(ts.Stdout(), "%d %s", resp.StatusCode, body)
	var out struct {
		ID string `json:"delivery_id"`
	}
	if json.Unmarshal(body, &out) == nil && out.ID != "" {
		ts.Setenv("DELIVERY_ID", out.ID) // for the commands that follow
	}
}

// setenvfile VAR FILE sets an environment variable to a file's first line
// (a key a command printed).
func setEnvFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: setenvfile VAR FILE")
	}
	line, _, _ := strings.Cut(ts.ReadFile(args[1]), "\n")
	ts.Setenv(args[0], strings.TrimSpace(line))
}

// perm FILE MODE checks a file's permission bits (octal, as ls shows them).
func perm(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: perm FILE MODE")
	}
	want, err := strconv.ParseUint(args[1], 8, 32)
	ts.Check(err)
	fi, err := os.Stat(ts.MkAbs(args[0]))
	ts.Check(err)
	if got := fi.Mode().Perm(); (got == os.FileMode(want)) == neg {
		ts.Fatalf("%s has mode %04o (want %s%04o)", args[0], got, map[bool]string{true: "not ", false: ""}[neg], want)
	}
}

// TestEveryCommandHasAnExample: every command's --help shows how to use it.
func TestEveryCommandHasAnExample(t *testing.T) {
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() != "help" && c.Name() != "completion" && strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(a.rootCmd())
}

package main

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// demoAgentCmd is the bundled demo agent (docs/spec/runtime.md). It does no AI: it
// reads the prompt and the attachments, reports progress, and writes
// SUMMARY.md into the workspace, so that the whole path from a delivery to
// a finished run can be seen working without an LLM. It speaks the exec
// executor's protocol: the prompt on stdin, progress on stdout.
func (a *app) demoAgentCmd() *cobra.Command {
	var delay time.Duration
	var useACP bool
	cmd := &cobra.Command{
		Use:     "demo-agent",
		Example: `  factory demo-agent --acp        # as an ACP agent, for an environment's command`,
		Short:   "The bundled DEMO agent: does no AI; summarises its prompt and attachments into SUMMARY.md (--acp: over ACP)",
		Hidden:  false,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if useACP {
				return runDemoACPAgent(delay)
			}
			say := func(format string, v ...any) {
				fmt.Fprintf(a.stdout, "[demo agent] "+format+"\n", v...)
				time.Sleep(delay)
			}
			prompt, err := io.ReadAll(io.LimitReader(a.stdin, 1<<20))
			if err != nil {
				return err
			}
			say("this is the bundled demo agent: it does no AI")
			say("read a prompt of %d bytes", len(prompt))
			if m := os.Getenv("FACTORY_MODEL"); m != "" {
				say("running as model %s", m)
			}
			var files []string
			if dir := os.Getenv("FACTORY_ATTACHMENTS_DIR"); dir != "" {
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if info, err := e.Info(); err == nil {
						files = append(files, fmt.Sprintf("%s (%d bytes)", e.Name(), info.Size()))
					}
				}
			}
			sort.Strings(files)
			say("found %d attachment(s)", len(files))
			followUp := os.Getenv("FACTORY_FOLLOWUP")
			if followUp != "" {
				say("continuing with a follow-up: %s", firstLine(followUp))
			}
			runMCPScript(cmd.Context(), string(prompt), followUp, func(format string, v ...any) bool { say(format, v...); return true })
			var b strings.Builder
			fmt.Fprintf(&b, "# Summary (demo agent: no AI was used)\n\n")
			fmt.Fprintf(&b, "Run: %s\n\n## Prompt\n\n%s\n\n## Attachments\n\n", os.Getenv("FACTORY_RUN_ID"), firstLine(string(prompt)))
			if len(files) == 0 {
				b.WriteString("None.\n")
			}
			for _, f := range files {
				fmt.Fprintf(&b, "- %s\n", f)
			}
			if followUp != "" {
				fmt.Fprintf(&b, "\n## Follow-up\n\n%s\n", followUp)
			}
			if err := os.WriteFile(filepath.Join(".", "SUMMARY.md"), []byte(b.String()), 0o644); err != nil {
				return err
			}
			say("wrote SUMMARY.md")
			cwd, _ := os.Getwd()
			pr, err := reportDemoArtifacts(cwd, b.String(), string(prompt)+"\n"+followUp, true)
			if err != nil {
				return err
			}
			if pr != "" {
				say("opened a (pretend) pull request: %s", pr)
			}
			if verdict, ok := demoScore(string(prompt)); ok {
				fmt.Fprintln(a.stdout, verdict) // a judge's answer: its last line
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&delay, "delay", 200*time.Millisecond, "pause between progress messages, to show them arrive")
	cmd.Flags().BoolVar(&useACP, "acp", false, "speak the Agent Client Protocol on stdio (as the acp executor expects) instead of the exec protocol")
	return cmd
}

// reportDemoArtifacts leaves the summary in $FACTORY_OUTPUT_DIR (a FILE
// artifact) and, when the prompt asks for a pull request, makes up one
// (the demo opens none: its address is under .invalid) and gives its URL;
// manifest says whether to declare it in artifacts.jsonl (the ACP agent
// sends it as a resource link instead).
func reportDemoArtifacts(cwd, summary, prompt string, manifest bool) (prURL string, err error) {
	out := os.Getenv("FACTORY_OUTPUT_DIR")
	if out == "" {
		return "", nil
	}
	if err := os.WriteFile(filepath.Join(out, "SUMMARY.md"), []byte(summary), 0o644); err != nil {
		return "", err
	}
	lines := []string{`{"artifact_type":"FILE","file":"SUMMARY.md","description":"What the demo agent read (no AI was used)","title":"Summary"}`}
	if strings.Contains(strings.ToLower(prompt), "pull request") {
		run := os.Getenv("FACTORY_RUN_ID")
		prURL = "https://demo.invalid/factory/demo/pull/" + strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(run))%100000), 10)
		// A real one, where the workspace is a checkout of a repository.
		if real, err := openDemoPullRequest(cwd, "Demo agent: "+firstLine(prompt), regressionsSection(prompt)); err != nil {
			return "", err
		} else if real != "" {
			prURL = real
		}
		if manifest {
			pr, _ := json.Marshal(map[string]string{"artifact_type": "PULL_REQUEST", "url": prURL, "branch": "demo/" + run})
			lines = append(lines, string(pr))
		}
	}
	return prURL, os.WriteFile(filepath.Join(out, "artifacts.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

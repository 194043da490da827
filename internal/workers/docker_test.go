package workers_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory"
	"factory/client"
	"factory/internal/docker/dockertest"
)

// TestDockerWorker: a worker with the docker backend runs a factory's run
// in a container of its runner's image, sized by its instance shape: the
// skills laid out in the workspace, the runner's setup commands inside
// the container first, then the agent, its output sent back; a follow-up
// comes back to the same worker and container.
func TestDockerWorker(t *testing.T) {
	dockertest.Need(t)
	testSetupOnWorker(t, "docker", "/factory/workspace")
}

// TestSetupOnWorker: with the direct backend too, a run's skills and its
// runner's setup commands reach the worker, where its workspace is.
func TestSetupOnWorker(t *testing.T) {
	testSetupOnWorker(t, "direct", "")
}

func testSetupOnWorker(t *testing.T, backend, workspace string) {
	cl := controlPlaneWith(t, 2*time.Second, "factories:\n  - name: boxed\n    source: "+boxedFactory(t)+"\n")
	data := filepath.Join(t.TempDir(), "boxer")
	w := cl.workerIn(t, "boxer", data, 2, "--backend", backend, "--docker-network", "none")
	var created struct {
		RunID string `json:"run_id"`
	}
	if err := cl.c.Do(context.Background(), "POST", "/v1/factory/"+cl.factoryUID(t)+"/runs", strings.NewReader(`{"prompt":"Ship it."}`), &created); err != nil {
		t.Fatal(err)
	}
	// CLAIMED while the worker prepares it (the setup sleeps a second),
	// INPROGRESS once the agent runs.
	claimed := cl.wait(t, created.RunID, 60*time.Second, func(r *client.Run) bool { return r.State != factory.StateQueued })
	if claimed.State != factory.StateClaimed || claimed.Executor == nil || claimed.Executor.UID != "boxer" {
		t.Fatalf("after QUEUED: %s on %+v", claimed.State, claimed.Executor)
	}
	r := cl.wait(t, created.RunID, 60*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
	if r.State != factory.StateSucceeded || r.Executor == nil || r.Executor.UID != "boxer" {
		t.Fatalf("%s (%s) on %+v", r.State, statusOf(r), r.Executor)
	}
	if got := cl.milestones(t, created.RunID); got != "oz_run_created oz_run_claimed agent_started oz_run_done" {
		t.Fatalf("the timeline's milestones: %s", got)
	}
	run := filepath.Join(data, "runs", created.RunID)
	if workspace == "" {
		workspace = filepath.Join(run, "workspace")
	}
	where, _ := os.ReadFile(filepath.Join(run, "output", "where.txt"))
	prepared, _ := os.ReadFile(filepath.Join(run, "workspace", "prepared.txt"))
	if strings.TrimSpace(string(where)) != workspace || strings.TrimSpace(string(prepared)) != "prepared" {
		t.Fatalf("the agent ran in %q; the setup left %q", where, prepared)
	}
	if !strings.Contains(w.log(), "backend="+backend) {
		t.Fatalf("the worker's log:\n%s", w.log())
	}

	// A follow-up: the same worker, the same container; the setup is
	// not run again.
	_ = os.Remove(filepath.Join(run, "workspace", "prepared.txt"))
	if err := cl.c.Do(context.Background(), "POST", "/v1/agent/runs/"+created.RunID+"/followups", strings.NewReader(`{"message":"Again."}`), nil); err != nil {
		t.Fatal(err)
	}
	r = cl.wait(t, created.RunID, 60*time.Second, func(r *client.Run) bool {
		return r.State.Terminal() && strings.Count(w.log(), "run ended") == 2
	})
	if r.State != factory.StateSucceeded || r.Executor.UID != "boxer" {
		t.Fatalf("follow-up: %s (%s) on %+v", r.State, statusOf(r), r.Executor)
	}
	if _, err := os.Stat(filepath.Join(run, "workspace", "prepared.txt")); !os.IsNotExist(err) {
		t.Fatalf("the setup ran again on a follow-up: %v", err)
	}
}

func statusOf(r *client.Run) string {
	if r.StatusMessage == nil {
		return ""
	}
	return r.StatusMessage.Message
}

// boxedFactory writes a v1alpha1 factory whose foreman's runner has setup
// commands (the last sleeps a second), a skill, a shape and the tests'
// image, and returns its folder.
func boxedFactory(t *testing.T) string {
	tree := t.TempDir()
	for name, content := range map[string]string{
		"factory.yaml":          "schemaVersion: v1alpha1\nname: Boxed\nrepositories:\n  - owner: acme\n    name: api\nagentDefaults:\n  model: fast-model\n  runner: box\n",
		"agents/lead/agent.md":  "---\nagentType: FOREMAN\n---\nYou lead.\n",
		"skills/house/SKILL.md": "---\nname: house\ndescription: Style.\n---\nBe brief.\n",
		"runners/box.yaml": "setupCommands:\n  - echo prepared > prepared.txt\n  - test -f .agents/skills/house/SKILL.md\n  - sleep 1\n" +
			"instanceShape: {vcpus: 1, memoryGb: 1}\nplatform:\n  linux:\n    dockerImage: " + dockertest.Image + "\n",
	} {
		p := filepath.Join(tree, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tree
}

// factoryUID is the UID of the control plane's one factory, once applied.
func (cl *cluster) factoryUID(t *testing.T) string {
	var list struct {
		Factories []factory.FactoryObject `json:"factories"`
	}
	for deadline := time.Now().Add(20 * time.Second); len(list.Factories) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_ = cl.c.Do(context.Background(), "GET", "/v1/factory", nil, &list)
	}
	if len(list.Factories) == 0 {
		t.Fatal("the factory was not applied")
	}
	return list.Factories[0].UID
}

// milestones are a run's timeline's event types but status messages.
func (cl *cluster) milestones(t *testing.T, id string) string {
	var timeline struct {
		Events []struct {
			Type string `json:"event_type"`
		} `json:"events"`
	}
	if err := cl.c.Do(context.Background(), "GET", "/v1/agent/runs/"+id+"/timeline", nil, &timeline); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range timeline.Events {
		if e.Type != "status_message" {
			types = append(types, e.Type)
		}
	}
	return strings.Join(types, " ")
}

// TestACPOnWorker: an ACP environment's runs go to workers too: the
// bundled demo agent (this binary, which each worker runs as its own)
// speaks ACP with the worker, writes in the worker's workspace, and its
// artifacts and the pull request it links come back.
func TestACPOnWorker(t *testing.T) {
	cl := controlPlaneWith(t, 2*time.Second, "  demo:\n    executor: acp\n    command: ["+binary(t)+", demo-agent, --acp]\n")
	data := filepath.Join(t.TempDir(), "w1")
	cl.workerIn(t, "w1", data, 2)
	created, r := cl.demoRun(t)
	if r.State != factory.StateSucceeded || r.Executor.UID != "w1" {
		t.Fatalf("%s (%s) on %+v", r.State, statusOf(r), r.Executor)
	}
	if _, err := os.Stat(filepath.Join(data, "runs", created.RunID, "workspace", "SUMMARY.md")); err != nil {
		t.Fatalf("the agent's file in the worker's workspace: %v", err)
	}
	types := map[factory.ArtifactType]int{}
	for _, a := range r.Artifacts {
		types[a.Type]++
	}
	if types[factory.ArtifactFile] != 1 || types[factory.ArtifactPullRequest] != 1 {
		t.Fatalf("artifacts: %+v", r.Artifacts)
	}
	if got := cl.milestones(t, created.RunID); got != "oz_run_created oz_run_claimed agent_started permission_decision oz_run_done" {
		t.Fatalf("milestones: %s", got)
	}
}

// TestDockerACP: an ACP agent in a container: the demo agent (a static
// factory in the image) speaks ACP over the container's attached stdin and
// stdout; it writes SUMMARY.md through the worker (its path in the
// container mapped to the workspace), its artifacts and pull request come
// back; a follow-up starts the same container with a fresh stdin.
func TestDockerACP(t *testing.T) {
	image := dockertest.ImageWith(t, "factory-test/demo-agent:1", map[string]string{"bin/factory": binary(t)})
	cl := controlPlaneWith(t, 2*time.Second, "  demo:\n    executor: acp\n    command: ["+binary(t)+", demo-agent, --acp]\n")
	data := filepath.Join(t.TempDir(), "boxer")
	w := cl.workerIn(t, "boxer", data, 2, "--backend", "docker", "--docker-network", "none", "--docker-image", image)
	created, r := cl.demoRun(t)
	if r.State != factory.StateSucceeded || r.Executor.UID != "boxer" {
		t.Fatalf("%s (%s) on %+v\n%s", r.State, statusOf(r), r.Executor, w.log())
	}
	summary, err := os.ReadFile(filepath.Join(data, "runs", created.RunID, "workspace", "SUMMARY.md"))
	if err != nil || !strings.Contains(string(summary), "Open a pull request") {
		t.Fatalf("SUMMARY.md in the worker's workspace: %q %v", summary, err)
	}
	types := map[factory.ArtifactType]int{}
	for _, a := range r.Artifacts {
		types[a.Type]++
	}
	if types[factory.ArtifactFile] != 1 || types[factory.ArtifactPullRequest] != 1 {
		t.Fatalf("artifacts: %+v", r.Artifacts)
	}
	if err := cl.c.Do(context.Background(), "POST", "/v1/agent/runs/"+created.RunID+"/followups", strings.NewReader(`{"message":"And the changelog."}`), nil); err != nil {
		t.Fatal(err)
	}
	r = cl.wait(t, created.RunID, 60*time.Second, func(r *client.Run) bool {
		return r.State.Terminal() && strings.Count(w.log(), "run ended") == 2
	})
	summary, _ = os.ReadFile(filepath.Join(data, "runs", created.RunID, "workspace", "SUMMARY.md"))
	if r.State != factory.StateSucceeded || !strings.Contains(string(summary), "And the changelog.") {
		t.Fatalf("follow-up: %s (%s); SUMMARY.md %q", r.State, statusOf(r), summary)
	}
}

// demoRun asks the demo environment for a pull request and waits for the
// run to end.
func (cl *cluster) demoRun(t *testing.T) (*client.RunCreated, *client.Run) {
	created, err := cl.c.CreateRun(context.Background(), client.RunRequest{Prompt: "Open a pull request, please.",
		Config: map[string]any{"environment_id": "demo"}})
	if err != nil {
		t.Fatal(err)
	}
	return created, cl.wait(t, created.RunID, 60*time.Second, func(r *client.Run) bool { return r.State.Terminal() })
}

package worker

import (
	"os"
	"testing"
)

// TestOwnCommand: worker.SelfCommand becomes this worker's own binary, or,
// in a container, the factory on the image's PATH; other commands run as
// they are.
func TestOwnCommand(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := ownCommand([]string{SelfCommand, "demo-agent"}, false); got[0] != self || got[1] != "demo-agent" {
		t.Errorf("direct: %v", got)
	}
	if got := ownCommand([]string{SelfCommand, "demo-agent"}, true); got[0] != "factory" {
		t.Errorf("in a container: %v", got)
	}
	if got := ownCommand([]string{"sh", "-c", "true"}, false); got[0] != "sh" {
		t.Errorf("another command: %v", got)
	}
}

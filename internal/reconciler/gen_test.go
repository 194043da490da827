package reconciler_test

import (
	"os"
	"testing"

	"factory/internal/testfactory"
)

// TestGenerateFactory writes the benchmark factory into $FACTORY_GENERATE
// (for measuring whole processes by hand); it does nothing otherwise.
func TestGenerateFactory(t *testing.T) {
	dir := os.Getenv("FACTORY_GENERATE")
	if dir == "" {
		t.Skip("set FACTORY_GENERATE=DIR")
	}
	testfactory.Generate(t, dir, 20, 1000)
}

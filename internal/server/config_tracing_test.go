package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"factory/internal/server"
)

func TestConfigTracing(t *testing.T) {
	dir := t.TempDir()
	load := func(text string) (*server.FileConfig, error) {
		path := filepath.Join(dir, "server.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return server.LoadConfig(path)
	}
	cfg, err := load("tracing:\n  otlpEndpoint: http://collector:4318\n  sampleRatio: 0.25\n  serviceName: hooks\n")
	if err != nil {
		t.Fatal(err)
	}
	endpoint, ratio, service, err := cfg.Tracing.Resolve(func(string) string { return "" })
	if err != nil || endpoint != "http://collector:4318/v1/traces" || ratio != 0.25 || service != "hooks" {
		t.Fatalf("%q %v %q %v", endpoint, ratio, service, err)
	}
	if cfg, err := load("listen: 127.0.0.1:9\n"); err != nil || cfg.Tracing.OTLPEndpoint != "" || cfg.Tracing.SampleRatio != nil {
		t.Fatalf("no tracing section: %+v %v", cfg, err)
	}
	for text, want := range map[string]string{
		"tracing: {otlpEndpoint: collector:4318}\n":                   "/tracing/otlpEndpoint",
		"tracing: {otlpEndpoint: http://c:4318, sampleRatio: 1.5}\n":  "/tracing/sampleRatio",
		"tracing: {otlpEndpoint: http://c:4318, exporter: zipkin}\n":  "exporter",
		"tracing: {otlpEndpoint: 'http://c:4318', serviceName: ''}\n": "/tracing/serviceName",
		"tracing: {otlpEndpoint: 'http://[::1:4318'}\n":               "/tracing",
	} {
		if _, err := load(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error at %s", text, err, want)
		}
	}
}

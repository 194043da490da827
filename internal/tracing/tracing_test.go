package tracing

import (
	"context"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	half := 0.5
	none := func(string) string { return "" }
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, c := range []struct {
		name                   string
		cfg                    Config
		getenv                 func(string) string
		endpoint, service, err string
		ratio                  float64
	}{
		{"off", Config{}, none, "", "factory", "", 1},
		{"configured", Config{OTLPEndpoint: "http://collector:4318", SampleRatio: &half, ServiceName: "hooks"}, none,
			"http://collector:4318/v1/traces", "hooks", "", 0.5},
		{"a trailing slash", Config{OTLPEndpoint: "https://otel.example.com/base/"}, none, "https://otel.example.com/base/v1/traces", "factory", "", 1},
		{"the standard variable", Config{}, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_SERVICE_NAME": "svc"}),
			"http://env:4318/v1/traces", "svc", "", 1},
		{"the traces variable, as it is", Config{}, env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://env:4318/custom",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"}), "http://env:4318/custom", "factory", "", 1},
		{"the configuration wins", Config{OTLPEndpoint: "http://cfg:4318", ServiceName: "cfg"},
			env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_SERVICE_NAME": "svc"}), "http://cfg:4318/v1/traces", "cfg", "", 1},
		{"not a URL", Config{OTLPEndpoint: "collector:4318"}, none, "", "", "an http:// or https:// URL", 0},
		{"a ratio over 1", Config{OTLPEndpoint: "http://c:4318", SampleRatio: new(2.0)}, none, "", "", "a fraction from 0 to 1", 0},
	} {
		endpoint, ratio, service, err := c.cfg.Resolve(c.getenv)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || endpoint != c.endpoint || ratio != c.ratio || service != c.service {
			t.Errorf("%s: %q %v %q %v, want %q %v %q", c.name, endpoint, ratio, service, err, c.endpoint, c.ratio, c.service)
		}
	}
}

// A nil tracer (no endpoint) starts spans that record nothing and carry
// no trace.
func TestNilTracer(t *testing.T) {
	tr, err := New(Config{}, func(string) string { return "" }, "v")
	if err != nil || tr != nil {
		t.Fatalf("%v %v", tr, err)
	}
	ctx, span := tr.Start(context.Background(), "x", String("k", "v"))
	span.Set(Int("n", 1))
	span.FailWith("no")
	span.End()
	if span.TraceID() != "" || span.Traceparent() != "" || FromContext(ctx).TraceID() != "" {
		t.Fatal("a nil tracer's span has a trace")
	}
	if _, s := tr.StartFrom("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "y"); s.Traceparent() != "" {
		t.Fatal("a nil tracer continued a trace")
	}
	if tr.Flush(context.Background()) != nil || tr.Shutdown(context.Background()) != nil {
		t.Fatal("a nil tracer's flush failed")
	}
}

// StartFrom continues the trace a traceparent names, a child of its span.
func TestStartFromTraceparent(t *testing.T) {
	zero := 0.0
	tr, err := New(Config{OTLPEndpoint: "http://127.0.0.1:1", SampleRatio: &zero}, func(string) string { return "" }, "")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, s := tr.StartFrom(parent, "child")
	defer s.End()
	tp := s.Traceparent()
	if s.TraceID() != "4bf92f3577b34da6a3ce929d0e0e4736" || !strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-") ||
		strings.Contains(tp, "00f067aa0ba902b7") || !strings.HasSuffix(tp, "-01") {
		t.Fatalf("child of a sampled parent: %q %q", s.TraceID(), tp)
	}
	// A new trace at ratio 0 is not sampled: its ID is not recorded.
	_, root := tr.StartFrom("", "root")
	defer root.End()
	if root.TraceID() != "" || !strings.HasSuffix(root.Traceparent(), "-00") {
		t.Fatalf("an unsampled root: %q %q", root.TraceID(), root.Traceparent())
	}
}

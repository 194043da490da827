package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"factory"
	"factory/internal/reconciler"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/server"
	"factory/internal/store"
	"factory/internal/tracing"
)

// otlpReceiver is a collector's OTLP/HTTP trace receiver on loopback: it
// decodes each export request and keeps its spans.
type otlpReceiver struct {
	url      string
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	requests int
}

func startReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &otlpReceiver{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", rc.export)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return rc
}

func (rc *otlpReceiver) export(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = z
	}
	data, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &req)
	}
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP protobuf export request", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.requests++
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				rc.services = append(rc.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			rc.spans = append(rc.spans, ss.Spans...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// byName are the spans received, by name.
func (rc *otlpReceiver) byName() (map[string][]*tracepb.Span, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string][]*tracepb.Span{}
	for _, s := range rc.spans {
		out[s.Name] = append(out[s.Name], s)
	}
	return out, rc.requests
}

// lockedBuffer is a log's buffer, written by the server's goroutines and
// read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tracedDelivery starts a server with tracer (nil: tracing off) whose
// automation fires on a webhook, posts one delivery, and waits for the run
// it starts to succeed.
func tracedDelivery(t *testing.T, tracer *tracing.Tracer) (*harness, *factory.Delivery, *factory.Run, *lockedBuffer) {
	t.Helper()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "webhooks"), 0o755)
	os.WriteFile(filepath.Join(root, "webhooks", "ci.yaml"), []byte("name: CI\nauthMode: token\n"), 0o644)
	logs := &lockedBuffer{}
	h := startConfigured(t, func(c *server.Config) { c.Tracer = tracer }, func(s *store.Store, data string) *runs.Manager {
		b := s.NewBatch()
		b.PutAPIKey(runsKey, &factory.APIKey{Name: "ci", Scope: factory.ScopeRuns, Prefix: runsKey[:8], CreatedAt: time.Now()})
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		return runs.NewManager(runs.Config{Store: s, DataDir: data, DefaultEnvironment: "sh", Log: slog.New(slog.NewTextHandler(logs, nil)),
			Environments: map[string]runs.Environment{"sh": {Executor: &runtime.ExecExecutor{Command: []string{"sh", "-c", "echo handled"}}}}})
	}, server.FactorySource{Name: "acme", Source: reconciler.DirSource{Root: root}, Interval: time.Hour})
	ctx := context.Background()
	ci := h.hook("ci")
	os.MkdirAll(filepath.Join(root, "automations"), 0o755)
	os.WriteFile(filepath.Join(root, "automations", "failed.md"), []byte("---\ntitle: failed\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: ["+ci.uid+"]\n---\nHandle it.\n"), 0o644)
	if st, err := h.c.SyncFactory(ctx, h.status("acme").UID); err != nil || !st.Ready {
		t.Fatalf("%v %+v", err, st)
	}
	id := deliveryID(t, post(t, ci.url, "", `{"status": "failed"}`, "Authorization", "Bearer "+ci.secret))
	var d *factory.Delivery
	for deadline := time.Now().Add(10 * time.Second); d == nil; time.Sleep(20 * time.Millisecond) {
		if got, err := h.c.Delivery(ctx, ci.uid, id); err == nil && len(got.RunIDs) > 0 {
			d = &got.Delivery
		} else if time.Now().After(deadline) {
			t.Fatal("the delivery started no run")
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		run, err := h.store.Run(d.RunIDs[0])
		if err == nil && run.State == factory.StateSucceeded {
			return h, d, run, logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not succeed: %+v", run)
		}
	}
}

// TestTracingDeliveryToRun follows one delivery into its run through the
// spans an in-process OTLP/HTTP receiver gets: the request ("ingress"),
// its evaluation, the run's creation and its turn, each the child of the
// one before in one trace, however much later it ran; the trace's ID is
// in the delivery log, on the run and in the log lines.
func TestTracingDeliveryToRun(t *testing.T) {
	rc := startReceiver(t)
	tracer, err := tracing.New(tracing.Config{OTLPEndpoint: rc.url, ServiceName: "factory-test"}, func(string) string { return "" }, "test")
	if err != nil || tracer == nil {
		t.Fatalf("tracer %v %v", tracer, err)
	}
	t.Cleanup(func() { tracer.Shutdown(context.Background()) })
	h, d, run, logs := tracedDelivery(t, tracer)

	var spans map[string][]*tracepb.Span
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := tracer.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		spans, _ = rc.byName()
		if len(spans["ingress"]) > 0 && len(spans["evaluate"]) > 0 && len(spans["run.create"]) > 0 && len(spans["run.turn"]) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans received: %v", spans)
		}
	}
	for name, ss := range spans {
		if len(ss) != 1 {
			t.Errorf("%d spans %q, want 1", len(ss), name)
		}
	}
	ingress, eval, create, turn := spans["ingress"][0], spans["evaluate"][0], spans["run.create"][0], spans["run.turn"][0]
	checkSpanTree(t, ingress, eval, create, turn)
	checkSpanAttrs(t, ingress, eval, create, turn, d, run)

	traceID := hex.EncodeToString(ingress.TraceId)
	if d.TraceID != traceID || d.Traceparent == "" || run.TraceID != traceID || !strings.Contains(run.Traceparent, hex.EncodeToString(create.SpanId)) {
		t.Errorf("trace %s: the delivery has %q (%q), the run %q (%q)", traceID, d.TraceID, d.Traceparent, run.TraceID, run.Traceparent)
	}
	if item := getRun(t, h, run.ID); item["trace_id"] != traceID {
		t.Errorf("the API's run: trace_id %v, want %s", item["trace_id"], traceID)
	}
	for _, msg := range []string{"run created", "run finished"} {
		if line := grep(logs.String(), "msg=\""+msg+"\""); !strings.Contains(line, "trace_id="+traceID) {
			t.Errorf("the %q line lacks the trace ID: %q", msg, line)
		}
	}
	if rc.services[0] != "factory-test" {
		t.Errorf("service.name %q", rc.services[0])
	}
}

// checkSpanTree checks the spans' parents: ingress is the root, each of
// the others the child of the one before, all in one trace.
func checkSpanTree(t *testing.T, ingress, eval, create, turn *tracepb.Span) {
	t.Helper()
	if len(ingress.ParentSpanId) != 0 {
		t.Errorf("ingress has a parent: %x", ingress.ParentSpanId)
	}
	for _, pc := range [][2]*tracepb.Span{{ingress, eval}, {eval, create}, {create, turn}} {
		parent, child := pc[0], pc[1]
		if !bytes.Equal(child.TraceId, ingress.TraceId) {
			t.Errorf("%s is in trace %x, not the delivery's %x", child.Name, child.TraceId, ingress.TraceId)
		}
		if !bytes.Equal(child.ParentSpanId, parent.SpanId) {
			t.Errorf("%s's parent is %x, not %s's %x", child.Name, child.ParentSpanId, parent.Name, parent.SpanId)
		}
	}
	if turn.StartTimeUnixNano < create.EndTimeUnixNano {
		t.Errorf("the turn started before its run's creation ended")
	}
}

// spanAttr is a span's attribute as text ("" when it has none by key).
func spanAttr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key != key {
			continue
		}
		switch v := a.Value.Value.(type) {
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_ArrayValue:
			var parts []string
			for _, e := range v.ArrayValue.Values {
				parts = append(parts, e.GetStringValue())
			}
			return strings.Join(parts, ",")
		}
		return a.Value.GetStringValue()
	}
	return ""
}

// checkSpanAttrs checks what each span says.
func checkSpanAttrs(t *testing.T, ingress, eval, create, turn *tracepb.Span, d *factory.Delivery, run *factory.Run) {
	t.Helper()
	for _, c := range []struct {
		span      *tracepb.Span
		key, want string
	}{
		{ingress, "factory.webhook.uid", d.WebhookUID},
		{ingress, "factory.delivery.id", d.ID},
		{ingress, "factory.delivery.outcome", factory.LabelAccepted},
		{eval, "factory.delivery.id", d.ID},
		{eval, "factory.automations.fired", "1"},
		{eval, "factory.automation.ids", run.AutomationID},
		{eval, "factory.run.ids", run.ID},
		{create, "factory.run.id", run.ID},
		{create, "factory.automation.id", run.AutomationID},
		{create, "factory.delivery.id", d.ID},
		{turn, "factory.run.id", run.ID},
		{turn, "factory.run.turn", "1"},
		{turn, "factory.run.result", string(factory.StateSucceeded)},
	} {
		if got := spanAttr(c.span, c.key); got != c.want {
			t.Errorf("span %s: %s = %q, want %q", c.span.Name, c.key, got, c.want)
		}
	}
	for _, s := range []*tracepb.Span{ingress, eval, create, turn} {
		if s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("span %s failed: %s", s.Name, s.Status.GetMessage())
		}
	}
}

// TestTracingOff: without an endpoint (in the configuration or the
// environment) there is no tracer, nothing is exported, and no trace ID is
// recorded or logged.
func TestTracingOff(t *testing.T) {
	rc := startReceiver(t)
	tracer, err := tracing.New(tracing.Config{ServiceName: "factory-test"}, func(string) string { return "" }, "test")
	if err != nil || tracer != nil {
		t.Fatalf("tracer %v %v, want none", tracer, err)
	}
	_, d, run, logs := tracedDelivery(t, tracer)
	if d.TraceID != "" || d.Traceparent != "" || run.TraceID != "" || run.Traceparent != "" {
		t.Errorf("traced without a tracer: %+v %q %q", d, run.TraceID, run.Traceparent)
	}
	if strings.Contains(logs.String(), "trace_id=") {
		t.Errorf("a trace ID logged without a tracer:\n%s", logs)
	}
	if spans, n := rc.byName(); n != 0 || len(spans) != 0 {
		t.Errorf("exported without an endpoint: %d requests", n)
	}
}

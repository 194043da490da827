// Package tracing exports OpenTelemetry traces over OTLP/HTTP: one trace
// from a webhook delivery's request through its evaluation to the runs it
// started and their turns. It is the only package that imports the
// OpenTelemetry SDK; the rest of the server starts and ends spans through
// its small API. A nil *Tracer (no endpoint configured) is a no-op that
// costs a nil check per span.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Config is the server configuration's tracing section.
type Config struct {
	// OTLPEndpoint is the collector's OTLP/HTTP base URL
	// (http://collector:4318); spans are posted to its /v1/traces. Empty:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL), else
	// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL); neither: tracing is off.
	OTLPEndpoint string `json:"otlpEndpoint,omitempty"`
	// SampleRatio is the fraction of new traces sampled, 0 to 1 (default
	// 1); a trace's later spans follow its first span's decision.
	SampleRatio *float64 `json:"sampleRatio,omitempty"`
	// ServiceName is the resource's service.name (default: factory).
	ServiceName string `json:"serviceName,omitempty"`
}

// DefaultServiceName is the service.name of the spans when none is
// configured.
const DefaultServiceName = "factory"

// Resolve returns the endpoint the spans go to (the full URL of
// /v1/traces; "" when tracing is off), the ratio and the service name,
// reading the standard environment variables through getenv where the
// configuration is silent.
func (c Config) Resolve(getenv func(string) string) (endpoint string, ratio float64, service string, err error) {
	ratio, service = 1, c.ServiceName
	if c.SampleRatio != nil {
		ratio = *c.SampleRatio
	}
	if ratio < 0 || ratio > 1 {
		return "", 0, "", fmt.Errorf("tracing.sampleRatio %v: a fraction from 0 to 1", ratio)
	}
	if service == "" {
		service = getenv("OTEL_SERVICE_NAME")
	}
	if service == "" {
		service = DefaultServiceName
	}
	base := strings.TrimSpace(c.OTLPEndpoint)
	if base == "" {
		if full := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); full != "" {
			return full, ratio, service, checkURL(full)
		}
		base = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	if base == "" {
		return "", ratio, service, nil
	}
	endpoint = strings.TrimSuffix(base, "/") + "/v1/traces"
	return endpoint, ratio, service, checkURL(endpoint)
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("tracing.otlpEndpoint %q: an http:// or https:// URL, such as http://collector:4318", s)
	}
	return nil
}

// Tracer starts the server's spans and exports them in batches. The zero
// of a *Tracer, nil, starts spans that record nothing.
type Tracer struct {
	tp *sdktrace.TracerProvider
	t  trace.Tracer
}

// New returns the tracer of a configuration: nil (tracing off) when no
// endpoint is configured in it or the environment. version is the
// service.version.
func New(cfg Config, getenv func(string) string, version string) (*Tracer, error) {
	endpoint, ratio, service, err := cfg.Resolve(getenv)
	if err != nil || endpoint == "" {
		return nil, err
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(service)}
	if version != "" {
		attrs = append(attrs, semconv.ServiceVersion(version))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	)
	return &Tracer{tp: tp, t: tp.Tracer("factory")}, nil
}

// LogErrors sends the SDK's errors (an export the collector refused or
// that could not reach it) to log, at WARN, instead of the standard
// library's logger. The SDK has one error handler per process.
func LogErrors(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing", "err", err)
	}))
}

// Shutdown exports the spans not yet exported and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Flush exports the spans ended so far.
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Attr is a span's attribute.
type Attr struct{ kv attribute.KeyValue }

// String is a string attribute.
func String(key, value string) Attr { return Attr{attribute.String(key, value)} }

// Int is an integer attribute.
func Int(key string, value int) Attr { return Attr{attribute.Int(key, value)} }

// Strings is a string list attribute.
func Strings(key string, values []string) Attr { return Attr{attribute.StringSlice(key, values)} }

func kvs(attrs []Attr) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(attrs))
	for i, a := range attrs {
		out[i] = a.kv
	}
	return out
}

// Span is a span started by a Tracer; the zero Span records nothing.
type Span struct{ s trace.Span }

// Start starts a span, the child of ctx's span if it has one.
func (t *Tracer) Start(ctx context.Context, name string, attrs ...Attr) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	ctx, s := t.t.Start(ctx, name, trace.WithAttributes(kvs(attrs)...))
	return ctx, Span{s}
}

// StartFrom starts a span whose parent is the span a W3C traceparent
// names (stored with a delivery or a run, to continue its trace later);
// a new trace's root when traceparent is empty or malformed.
func (t *Tracer) StartFrom(traceparent, name string, attrs ...Attr) (context.Context, Span) {
	if t == nil {
		return context.Background(), Span{}
	}
	ctx := context.Background()
	if traceparent != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
	}
	return t.Start(ctx, name, attrs...)
}

// FromContext is the span ctx carries (the zero Span if none was started
// by a Tracer).
func FromContext(ctx context.Context) Span {
	s := trace.SpanFromContext(ctx)
	if !s.SpanContext().IsValid() {
		return Span{}
	}
	return Span{s}
}

// Set adds attributes to the span.
func (s Span) Set(attrs ...Attr) {
	if s.s != nil {
		s.s.SetAttributes(kvs(attrs)...)
	}
}

// Fail marks the span failed, with err's text.
func (s Span) Fail(err error) {
	if s.s != nil && err != nil {
		s.s.SetStatus(codes.Error, err.Error())
	}
}

// FailWith marks the span failed with a message.
func (s Span) FailWith(msg string) { s.Fail(errors.New(msg)) }

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// TraceID is the span's trace ID in hex, for logs and records; "" for a
// span not sampled (its trace is not exported: there is nothing to find
// by its ID).
func (s Span) TraceID() string {
	if s.s == nil || !s.s.SpanContext().IsSampled() {
		return ""
	}
	return s.s.SpanContext().TraceID().String()
}

// Traceparent is the span as a W3C traceparent, to store with a record
// whose later steps continue the trace (StartFrom); "" for the zero Span.
func (s Span) Traceparent() string {
	if s.s == nil || !s.s.SpanContext().IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(context.Background(), s.s), c)
	return c["traceparent"]
}

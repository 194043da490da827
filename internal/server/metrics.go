package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"factory"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"factory/internal/reconciler"
	"factory/internal/workers"
)

// metrics are the server's Prometheus metrics, on a registry of its own so
// that tests can run several servers in one process.
type metrics struct {
	reg      *prometheus.Registry
	syncs    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ready    *prometheus.GaugeVec
	revision *prometheus.GaugeVec
	applied  *prometheus.GaugeVec

	refusals     *prometheus.CounterVec
	modelCalls   *prometheus.CounterVec
	modelTokens  *prometheus.CounterVec
	modelCost    *prometheus.CounterVec
	runsStarted  prometheus.Counter
	runsEnded    *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factory_syncs_total",
			Help: "Syncs of a factory by outcome: applied, unchanged, invalid (revision refused) or error (source or store unreadable).",
		}, []string{"factory", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "factory_sync_duration_seconds",
			Help:    "Time of one sync of a factory: fetch, load, plan and apply.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"factory"}),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "factory_ready",
			Help: "1 when the factory's last sync applied or found nothing to do, 0 when it was refused or failed.",
		}, []string{"factory"}),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "factory_revision_info",
			Help: "The revision applied to a factory (always 1; the revision is a label).",
		}, []string{"factory", "revision"}),
		applied: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "factory_applied_timestamp_seconds",
			Help: "When the factory's current revision was applied (Unix time).",
		}, []string{"factory"}),
	}
	m.runsStarted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "factory_automation_runs_started_total",
		Help: "Runs started by automations for accepted deliveries.",
	})
	m.runsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "factory_runs_finished_total",
		Help: "Turns of runs that ended, by the state they ended in.",
	}, []string{"state"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "factory_http_request_duration_seconds",
		Help:    "HTTP requests by route pattern and status code.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
	}, []string{"route", "code"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "factory_refusals_total",
		Help: "Requests refused at the push receiver (door push) and the dashboard's sign-in (door signin), by reason; logged one by one only up to a budget a minute.",
	}, []string{"door", "reason"})
	m.modelMetrics()
	m.reg.MustRegister(m.syncs, m.duration, m.ready, m.revision, m.applied, m.runsStarted, m.runsEnded, m.httpDuration, m.refusals,
		m.modelCalls, m.modelTokens, m.modelCost,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(factory string, outcome reconciler.Outcome, d time.Duration) {
	m.syncs.WithLabelValues(factory, string(outcome)).Inc()
	m.duration.WithLabelValues(factory).Observe(d.Seconds())
}

// status mirrors a factory's record.
func (m *metrics) status(f *factory.Factory) {
	ready := 0.0
	if f.Ready {
		ready = 1
	}
	m.ready.WithLabelValues(f.Name).Set(ready)
	if f.Revision != "" {
		m.revision.DeletePartialMatch(prometheus.Labels{"factory": f.Name})
		m.revision.WithLabelValues(f.Name, f.Revision).Set(1)
		m.applied.WithLabelValues(f.Name).Set(float64(f.AppliedAt.Unix()))
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// runGauges reports the manager's queue and running runs at each scrape.
func (m *metrics) runGauges(counts func() (int, int)) {
	for _, st := range []struct {
		state string
		pick  func(q, r int) int
	}{{"QUEUED", func(q, _ int) int { return q }}, {"INPROGRESS", func(_, r int) int { return r }}} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "factory_runs", Help: "Runs waiting in the server's queue (QUEUED) or whose turn is under way (INPROGRESS: on workers, from its hand-over to their queue, CLAIMED included).", ConstLabels: prometheus.Labels{"state": st.state},
		}, func() float64 { q, r := counts(); return float64(st.pick(q, r)) }))
	}
}

// workerGauges report the workers at each scrape: how many are
// connected, and each one's runs and silence.
func (m *metrics) workerGauges(reg *workers.Registry) {
	m.reg.MustRegister(&workerCollector{reg: reg,
		connected: prometheus.NewDesc("factory_workers_connected", "Workers connected to the control plane's NATS server now.", nil, nil),
		active:    prometheus.NewDesc("factory_worker_runs_active", "Runs a worker holds, as the control plane heard.", []string{"worker"}, nil),
		silence:   prometheus.NewDesc("factory_worker_last_heartbeat_seconds", "Seconds since a worker last reported.", []string{"worker"}, nil)})
}

// workerCollector reads the registry at each scrape.
type workerCollector struct {
	reg                        *workers.Registry
	connected, active, silence *prometheus.Desc
}

func (c *workerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.connected
	ch <- c.active
	ch <- c.silence
}

func (c *workerCollector) Collect(ch chan<- prometheus.Metric) {
	ws, err := c.reg.List(context.Background())
	if err != nil {
		return
	}
	n := 0
	for _, w := range ws {
		if w.Connected {
			n++
		}
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(w.RunsActive), w.Name)
		if w.LastHeartbeat != nil {
			ch <- prometheus.MustNewConstMetric(c.silence, prometheus.GaugeValue, time.Since(*w.LastHeartbeat).Seconds(), w.Name)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, float64(n))
}

// instrument times every request by its route pattern.
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: 200}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		m.httpDuration.WithLabelValues(route, strconv.Itoa(sw.code)).Observe(time.Since(start).Seconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer: a
// stream (Server-Sent Events) flushes through it.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// modelMetrics are the model gateway's: calls, tokens and cost, by factory,
// agent and model (docs/harnesses.md).
func (m *metrics) modelMetrics() {
	m.modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "factory_model_calls_total",
		Help: "Model calls through the gateway by factory, agent, provider, model and HTTP status (the gateway's own refusals included).",
	}, []string{"factory", "agent", "provider", "model", "status"})
	m.modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "factory_model_tokens_total",
		Help: "Tokens of model calls through the gateway, as the providers reported them, by factory, agent, model and category (input, cached_input, output).",
	}, []string{"factory", "agent", "model", "category"})
	m.modelCost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "factory_model_cost_usd_total",
		Help: "The cost of model calls through the gateway by the configured prices (models without a price add nothing), by factory, agent and model.",
	}, []string{"factory", "agent", "model"})
}

// ObserveModelCall counts a model call of a run's agent (the gateway's).
func (s *Server) ObserveModelCall(r *factory.Run, c *factory.ModelCall) {
	if s == nil || r == nil {
		return
	}
	agent := ""
	if r.Setup != nil {
		agent = r.Setup.Agent
	}
	fac := r.FactoryUID
	s.metrics.modelCalls.WithLabelValues(fac, agent, c.Provider, c.Model, strconv.Itoa(c.Status)).Inc()
	for cat, n := range map[string]int64{factory.TokensInput: c.InputTokens, factory.TokensCachedInput: c.CachedTokens, factory.TokensOutput: c.OutputTokens} {
		if n > 0 {
			s.metrics.modelTokens.WithLabelValues(fac, agent, c.Model, cat).Add(float64(n))
		}
	}
	if c.CostUSD != nil {
		s.metrics.modelCost.WithLabelValues(fac, agent, c.Model).Add(*c.CostUSD)
	}
}

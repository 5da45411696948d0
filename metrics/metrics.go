// Package metrics holds one maos node's Prometheus metrics: the counters
// and histograms transport, cluster and maosd update as things happen
// (sends, forwarded writes, strong reads, streams, applied batches,
// commits, watcher runs), the gauges read from the node at scrape time
// (Raft's state and indexes, tasks by state, pending approvals, presence),
// and their text exposition.
//
// Every node has a registry of its own (New), never Prometheus's global
// default, so several nodes in one process (tests) do not collide. A nil
// *Metrics is valid and records nothing, so a consumer never checks.
package metrics

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric of maos's own.
const Namespace = "maos"

// Watcher run outcomes (the outcome label of maos_watcher_invocations_total).
const (
	OutcomeOK        = "ok"        // the command answered
	OutcomeError     = "error"     // it failed: non-zero exit, empty output, could not start
	OutcomeTimeout   = "timeout"   // killed at its timeout
	OutcomeCancelled = "cancelled" // the watcher stopped while it ran
)

// SendOK is the result label of an accepted send.
const SendOK = "ok"

// Metrics is one node's metrics and the registry that exposes them.
type Metrics struct {
	reg *prometheus.Registry

	sends           *prometheus.CounterVec
	forwards        *prometheus.CounterVec
	strongReads     prometheus.Counter
	streams         prometheus.Gauge
	applyBatch      prometheus.Histogram
	applySeconds    prometheus.Histogram
	commitSeconds   prometheus.Histogram
	watcherRuns     *prometheus.CounterVec
	watcherDuration *prometheus.HistogramVec
}

// New returns a node's metrics in a registry of their own, with the Go
// runtime's and the process's collectors beside them.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "sends_total",
			Help: "POST /v1/messages requests this node answered, by result: ok or the error code of the answer (bad_request, forbidden, secret_found, rate_limited, ...)."},
			[]string{"result"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "forwarded_writes_total",
			Help: "Writes this node, a follower, forwarded to the leader as encoded entries, by result: ok or error."},
			[]string{"result"}),
		strongReads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "strong_reads_total",
			Help: "Reads at strong consistency this node served (each one a read index from the leader)."}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "stream_subscribers",
			Help: "Event streams (GET /v1/stream) open on this node now."}),
		applyBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "apply_batch_entries",
			Help:    "Log entries in each batch Raft handed this node's state machine.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}}),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "fsm_apply_seconds",
			Help:    "Time this node's state machine took to apply one batch (one bbolt transaction, fsynced), in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}), // 100 µs .. 3.3 s
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "state_commit_seconds",
			Help:    "Time from proposing an entry on this node, the leader, until a quorum stored it and this node applied it, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}), // 0.5 ms .. 16 s
		watcherRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "watcher_invocations_total",
			Help: "Runs of an agent's model command by the watchers maosd runs (--agents), by agent and outcome (ok, error, timeout, cancelled); each retry is a run."},
			[]string{"agent", "outcome"}),
		watcherDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "watcher_invocation_seconds",
			Help:    "How long each run of an agent's model command took, in seconds, by agent.",
			Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}},
			[]string{"agent"}),
	}
	m.reg.MustRegister(m.sends, m.forwards, m.strongReads, m.streams, m.applyBatch, m.applySeconds,
		m.commitSeconds, m.watcherRuns, m.watcherDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.sends.WithLabelValues(SendOK) // present at 0 from the start, so rate() has a first sample
	m.forwards.WithLabelValues("ok")
	m.forwards.WithLabelValues("error")
	return m
}

// Registry is the node's registry, for a caller that adds collectors of
// its own (or gathers in a test).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus's text format (or
// OpenMetrics, if the scraper asks for it). Errors gathering a collector
// are logged to logger (nil: slog.Default()) and the rest is served. A
// nil Metrics has no handler (nil).
func (m *Metrics) Handler(logger *slog.Logger) http.Handler {
	if m == nil {
		return nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slogPrinter{logger},
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// slogPrinter is promhttp's error log on slog.
type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.l.Warn("metrics: gather", "error", v) }

// Send counts one answered send: result is SendOK or the answer's error
// code.
func (m *Metrics) Send(result string) {
	if m != nil {
		m.sends.WithLabelValues(result).Inc()
	}
}

// Forward counts one write forwarded to the leader; err is its outcome.
func (m *Metrics) Forward(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.forwards.WithLabelValues("error").Inc()
		return
	}
	m.forwards.WithLabelValues("ok").Inc()
}

// StrongRead counts one read at strong consistency.
func (m *Metrics) StrongRead() {
	if m != nil {
		m.strongReads.Inc()
	}
}

// StreamOpened and StreamClosed bracket one event stream.
func (m *Metrics) StreamOpened() {
	if m != nil {
		m.streams.Inc()
	}
}

// StreamClosed is StreamOpened's end.
func (m *Metrics) StreamClosed() {
	if m != nil {
		m.streams.Dec()
	}
}

// ApplyBatch records one batch of entries applied to the state machine:
// how many and how long it took.
func (m *Metrics) ApplyBatch(entries int, took time.Duration) {
	if m != nil {
		m.applyBatch.Observe(float64(entries))
		m.applySeconds.Observe(took.Seconds())
	}
}

// Commit records how long one entry proposed on the leader took to be
// committed and applied.
func (m *Metrics) Commit(took time.Duration) {
	if m != nil {
		m.commitSeconds.Observe(took.Seconds())
	}
}

// WatcherRun records one run of agent's model command: its outcome (an
// Outcome constant) and how long it ran.
func (m *Metrics) WatcherRun(agent, outcome string, took time.Duration) {
	if m != nil {
		m.watcherRuns.WithLabelValues(agent, outcome).Inc()
		m.watcherDuration.WithLabelValues(agent).Observe(took.Seconds())
	}
}

// Package bench drives a running maos cluster through its HTTP API and
// measures it the way clients feel it: closed-loop senders waiting for the
// committed answer (RunSend), end-to-end delivery from a send on one node to
// the event on a stream on another (RunDelivery), and fan-out of one message
// to many registered agents (RunFanout). maosctl bench is its command line;
// the figures go to docs/PERFORMANCE.md, never into test assertions.
package bench

import (
	"math"
	"slices"
	"sync"
	"time"
)

// DefaultMaxSamples bounds the latency samples a Recorder keeps (8 bytes
// each, so 8 MB): past it, a uniform reservoir sample stands for all of them,
// while count, min, mean and max stay exact.
const DefaultMaxSamples = 1_000_000

// maxWindow bounds the samples kept between two Tick calls (the progress
// line's "p50 of the last second"); past it, the rest of that second is not
// sampled, which only coarsens the progress figure.
const maxWindow = 100_000

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest sample with at least p% of the samples
// at or below it. It returns 0 for no samples; p is clamped to [0, 100].
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	p = math.Max(0, math.Min(100, p))
	rank := int(math.Ceil(p / 100 * float64(n)))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// Latency summarises a set of durations, in milliseconds.
type Latency struct {
	Count  uint64  `json:"count"`
	MinMs  float64 `json:"min_ms"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Recorder collects latencies and errors from many goroutines. Memory is
// bounded by its sample cap (reservoir sampling past it). The zero value is
// not usable: call NewRecorder.
type Recorder struct {
	mu       sync.Mutex
	cap      int
	samples  []time.Duration
	n        uint64
	sum      time.Duration
	min, max time.Duration
	rng      uint64
	window   []time.Duration
	errs     map[string]uint64
	nerrs    uint64
}

// NewRecorder returns a Recorder keeping at most maxSamples samples
// (DefaultMaxSamples when maxSamples <= 0).
func NewRecorder(maxSamples int) *Recorder {
	if maxSamples <= 0 {
		maxSamples = DefaultMaxSamples
	}
	return &Recorder{cap: maxSamples, rng: 0x9E3779B97F4A7C15, errs: map[string]uint64{}}
}

// Record adds one latency.
func (r *Recorder) Record(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.sum += d
	if r.n == 1 || d < r.min {
		r.min = d
	}
	if d > r.max {
		r.max = d
	}
	if len(r.samples) < r.cap {
		r.samples = append(r.samples, d)
	} else {
		// Algorithm R: the i-th sample replaces a kept one with probability cap/i.
		r.rng ^= r.rng << 13
		r.rng ^= r.rng >> 7
		r.rng ^= r.rng << 17
		if j := r.rng % r.n; j < uint64(r.cap) {
			r.samples[j] = d
		}
	}
	if len(r.window) < maxWindow {
		r.window = append(r.window, d)
	}
}

// Error counts one failure of the given kind (api.ErrorKind).
func (r *Recorder) Error(kind string) {
	r.mu.Lock()
	r.errs[kind]++
	r.nerrs++
	r.mu.Unlock()
}

// Tick returns the totals so far and the samples recorded since the last
// Tick, sorted (the progress line's window).
func (r *Recorder) Tick() (n, errs uint64, window []time.Duration) {
	r.mu.Lock()
	n, errs, window = r.n, r.nerrs, r.window
	r.window = nil
	r.mu.Unlock()
	slices.Sort(window)
	return n, errs, window
}

// Count returns how many latencies and how many errors were recorded.
func (r *Recorder) Count() (n, errs uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.nerrs
}

// Errors returns a copy of the error counts by kind.
func (r *Recorder) Errors() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]uint64, len(r.errs))
	for k, v := range r.errs {
		out[k] = v
	}
	return out
}

// Summary returns the latency figures over everything recorded.
func (r *Recorder) Summary() Latency {
	r.mu.Lock()
	s := slices.Clone(r.samples)
	l := Latency{Count: r.n, MinMs: ms(r.min), MaxMs: ms(r.max)}
	if r.n > 0 {
		l.MeanMs = ms(r.sum / time.Duration(r.n))
	}
	r.mu.Unlock()
	slices.Sort(s)
	l.P50Ms, l.P95Ms, l.P99Ms = ms(Percentile(s, 50)), ms(Percentile(s, 95)), ms(Percentile(s, 99))
	return l
}

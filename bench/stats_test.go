package bench

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/maos-project/maos/api/client"
)

func TestPercentileNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {95, 95 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond},
		{0, time.Millisecond}, {0.5, time.Millisecond}, {99.5, 100 * time.Millisecond}, {150, 100 * time.Millisecond}} {
		if got := Percentile(s, tt.p); got != tt.want {
			t.Errorf("Percentile(1..100ms, %v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	odd := []time.Duration{1, 2, 3, 4, 5}
	if got := Percentile(odd, 50); got != 3 {
		t.Errorf("p50 of 1..5 = %v, want 3", got)
	}
	if got := Percentile(odd, 99); got != 5 {
		t.Errorf("p99 of 1..5 = %v, want 5", got)
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v, want 0", got)
	}
}

func TestRecorderSummaryAndBound(t *testing.T) {
	r := NewRecorder(0)
	for i := 100; i >= 1; i-- { // out of order: Summary must sort
		r.Record(time.Duration(i) * time.Millisecond)
	}
	r.Error("timeout")
	r.Error("timeout")
	r.Error("no_leader")
	l := r.Summary()
	want := Latency{Count: 100, MinMs: 1, MeanMs: 50.5, P50Ms: 50, P95Ms: 95, P99Ms: 99, MaxMs: 100}
	if l != want {
		t.Errorf("Summary = %+v, want %+v", l, want)
	}
	if e := r.Errors(); e["timeout"] != 2 || e["no_leader"] != 1 || len(e) != 2 {
		t.Errorf("Errors = %v", e)
	}
	n, errs, win := r.Tick()
	if n != 100 || errs != 3 || len(win) != 100 || win[0] != time.Millisecond {
		t.Errorf("Tick = %d, %d, %d samples starting %v", n, errs, len(win), win)
	}
	if _, _, win = r.Tick(); len(win) != 0 {
		t.Errorf("second Tick window has %d samples, want 0", len(win))
	}

	// Past the cap the samples stay bounded; count, min and max stay exact.
	b := NewRecorder(10)
	for i := 1; i <= 1000; i++ {
		b.Record(time.Duration(i))
	}
	if len(b.samples) != 10 {
		t.Errorf("kept %d samples, want the cap 10", len(b.samples))
	}
	if l := b.Summary(); l.Count != 1000 || l.MaxMs != ms(1000) || l.MinMs != ms(1) {
		t.Errorf("capped Summary = %+v", l)
	}
}

func TestRunOptionErrors(t *testing.T) {
	ctx := context.Background()
	cl := []*client.Client{client.NewClient("127.0.0.1:1", nil)}
	for name, o := range map[string]SendOptions{
		"no nodes":      {Concurrency: 1, Count: 1},
		"concurrency 0": {Clients: cl, Count: 1},
		"both":          {Clients: cl, Concurrency: 1, Count: 1, Duration: time.Second},
		"neither":       {Clients: cl, Concurrency: 1},
	} {
		if _, err := RunSend(ctx, o); err == nil {
			t.Errorf("RunSend %s: no error", name)
		}
	}
	if _, err := RunDelivery(ctx, DeliveryOptions{Send: cl[0], Stream: cl[0]}); err == nil {
		t.Error("RunDelivery with count 0: no error")
	}
	if _, err := RunFanout(ctx, FanoutOptions{Send: cl[0], Poll: cl[0], Agents: MaxFanoutAgents + 1}); err == nil {
		t.Error("RunFanout with too many agents: no error")
	}
}

func TestRunSendCountsRefusedNode(t *testing.T) {
	// A closed port: every send fails at once, counted by kind, none acknowledged.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	rep, err := RunSend(context.Background(), SendOptions{Clients: []*client.Client{client.NewClient(addr, nil)},
		Concurrency: 2, Count: 4, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sends != 0 || rep.Errors != 4 || rep.ErrorsByKind["refused"] != 4 {
		t.Errorf("report = %+v, want 4 refused errors and no sends", rep)
	}
}

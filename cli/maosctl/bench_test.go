package maosctl

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/maos-project/maos/bench"
)

func TestBenchSendCountJSON(t *testing.T) {
	e := newTestEnv(t)
	r := e.run("", "bench", "send", "--count", "20", "--concurrency", "3", "--size", "64", "--json")
	if r.err != nil {
		t.Fatalf("bench send: %v stderr=%q", r.err, r.errOut)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(r.out), &raw); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, r.out)
	}
	for _, k := range []string{"mode", "nodes", "concurrency", "size_bytes", "sends", "errors", "errors_by_kind",
		"elapsed_seconds", "sends_per_second", "latency"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, r.out)
		}
	}
	lat, _ := raw["latency"].(map[string]any)
	for _, k := range []string{"count", "p50_ms", "p95_ms", "p99_ms", "max_ms"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("latency lacks %q: %s", k, r.out)
		}
	}
	var rep bench.SendReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Mode != "send" || rep.Sends != 20 || rep.Errors != 0 || rep.Concurrency != 3 || rep.SizeBytes != 64 ||
		rep.Latency.Count != 20 || len(rep.Nodes) != 1 || !strings.HasSuffix(rep.Nodes[0], e.addr) {
		t.Errorf("report = %+v", rep)
	}
	if rep.Latency.P50Ms > rep.Latency.P99Ms || rep.Latency.P99Ms > rep.Latency.MaxMs {
		t.Errorf("percentiles out of order: %+v", rep.Latency)
	}
	if n := e.svc.NumStored(); n != 20 {
		t.Errorf("the node stored %d messages, want 20", n)
	}
}

func TestBenchSendTableAndAddrList(t *testing.T) {
	e := newTestEnv(t)
	// The same node twice in --addr: senders alternate between the entries.
	r := e.run("", "bench", "send", "--addr", e.addr+","+e.addr, "--count", "5", "--concurrency", "2", "--channel", "perf")
	if r.err != nil {
		t.Fatalf("bench send: %v stderr=%q", r.err, r.errOut)
	}
	for _, want := range []string{"nodes", "sends/s", "latency p50", "latency p99", "latency max", "errors"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("table lacks %q:\n%s", want, r.out)
		}
	}
	if !strings.Contains(r.out, "5 in ") {
		t.Errorf("table does not report 5 sends:\n%s", r.out)
	}
	if n := e.svc.NumStored(); n != 5 {
		t.Errorf("stored %d messages, want 5", n)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	e := newTestEnv(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "send"}, "exactly one of --duration and --count"},
		{[]string{"bench", "send", "--count", "1", "--duration", "1s"}, "exactly one of --duration and --count"},
		{[]string{"bench", "send", "--count", "1", "--concurrency", "0"}, "--concurrency 0"},
		{[]string{"bench", "send", "--count", "1", "--size", "0"}, "--size 0"},
		{[]string{"bench", "delivery", "--count", "0"}, "--count 0"},
		{[]string{"bench", "fanout", "--agents", "0"}, "--agents 0"},
		{[]string{"bench", "send", "--count", "1", "extra"}, "unexpected argument"},
	} {
		r := e.run("", tt.args...)
		if r.err == nil || !strings.Contains(r.errOut, tt.want) || !strings.HasPrefix(r.errOut, "maosctl: ") {
			t.Errorf("%v: err=%v stderr=%q, want an error naming %q", tt.args, r.err, r.errOut, tt.want)
		}
	}
	if n := e.svc.NumStored(); n != 0 {
		t.Errorf("usage errors stored %d messages", n)
	}
}

func TestBenchSendAllFailExits1(t *testing.T) {
	// Nothing listens on the address: every send fails, the report says so, exit 1.
	r := runApp("127.0.0.1:1", "", "bench", "send", "--count", "3", "--json")
	if r.err == nil || !strings.Contains(r.errOut, "all 3 operations failed") {
		t.Fatalf("err=%v stderr=%q", r.err, r.errOut)
	}
	var rep bench.SendReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || rep.Errors != 3 || rep.ErrorsByKind["refused"] != 3 {
		t.Errorf("report = %+v (%v)", rep, err)
	}
}

func TestBenchDelivery(t *testing.T) {
	e := newTestEnv(t)
	r := e.run("", "--timeout", "10s", "bench", "delivery", "--count", "5", "--size", "32", "--json")
	if r.err != nil {
		t.Fatalf("bench delivery: %v stderr=%q", r.err, r.errOut)
	}
	var rep bench.DeliveryReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if rep.Mode != "delivery" || rep.Count != 5 || rep.Delivered != 5 || rep.Errors != 0 ||
		rep.Latency.Count != 5 || rep.SendLatency.Count != 5 || !strings.HasPrefix(rep.Channel, "bench-delivery-") {
		t.Errorf("report = %+v", rep)
	}
}

func TestBenchFanout(t *testing.T) {
	e := newTestEnv(t)
	r := e.run("", "bench", "fanout", "--agents", "12", "--to", "role:bench", "--wait", "10s")
	if r.err != nil {
		t.Fatalf("bench fanout: %v stderr=%q", r.err, r.errOut)
	}
	for _, want := range []string{"in every inbox", "delivered", "12 of 12"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("table lacks %q:\n%s", want, r.out)
		}
	}
	// Again with --json: the agents exist already; every inbox gets the new one too.
	r = e.run("", "--json", "bench", "fanout", "--agents", "12", "--wait", "10s")
	if r.err != nil {
		t.Fatalf("bench fanout --json: %v stderr=%q", r.err, r.errOut)
	}
	var rep bench.FanoutReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if rep.Mode != "fanout" || rep.Agents != 12 || rep.Delivered != 12 || rep.To != "all" || rep.PollRounds < 1 ||
		len(rep.Missing) != 0 || rep.MessageID == "" {
		t.Errorf("report = %+v", rep)
	}
}

package chaos

import (
	"strings"
	"testing"
	"time"
)

// The bound is one election with the timeouts maosd runs with
// (hashicorp/raft's defaults, 1 s each) plus a client's backoff.
func TestElectionBound(t *testing.T) {
	if got, want := ElectionBound(), 4*time.Second+maxBackoff; got != want {
		t.Fatalf("ElectionBound() = %v, want %v", got, want)
	}
}

func TestLongestRefusal(t *testing.T) {
	ops := []Op{
		sendOK(0, "a", "chaos-0", 0, 10, 1),
		sendFail(1, "b", "chaos-0", 100, 110, "no_leader"), // a run of three: 100 .. the OK invoked at 700
		sendUnknown(2, "c", "chaos-0", 120, 3120),
		sendFail(1, "b", "chaos-0", 300, 310, "refused"),
		readOK(3, "chaos-0", 400, 410), // reads do not count
		sendOK(1, "b", "chaos-0", 700, 720, 2),
		sendFail(0, "d", "chaos-0", 800, 810, "no_leader"), // a run of one: 800 .. 900
		sendOK(0, "d", "chaos-0", 900, 950, 3),
	}
	r := LongestRefusal(ops, 0, at(10_000))
	if r.Longest != at(600) || r.From != at(100) || r.Attempts != 3 {
		t.Errorf("LongestRefusal = %+v, want 600ms from 100ms over 3 attempts", r)
	}
	// Only runs that start in the window count.
	if r := LongestRefusal(ops, at(750), at(10_000)); r.Longest != at(100) || r.From != at(800) {
		t.Errorf("from 750ms: %+v, want 100ms from 800ms", r)
	}
	// A run no OK ends lasts until its last return.
	tail := append(ops, sendFail(2, "e", "chaos-0", 1000, 1010, "no_leader"), sendUnknown(2, "e", "chaos-0", 1100, 4100))
	if r := LongestRefusal(tail, at(950), at(10_000)); r.Longest != at(3100) || r.Attempts != 2 {
		t.Errorf("an unended run: %+v, want 3.1s over 2 attempts", r)
	}
	if r := LongestRefusal(ops[:1], 0, at(10_000)); r.Longest != 0 {
		t.Errorf("no failure: %+v", r)
	}
}

// A fault that promises availability fails the report when the window is
// over its bound, or was not measured; the text says which.
func TestFaultOverBound(t *testing.T) {
	within := Fault{Name: "rolling-restart", RefusalBound: time.Second, Refusal: &Refusal{Longest: 900 * time.Millisecond, Attempts: 4}}
	over := Fault{Name: "replace-node", RefusalBound: time.Second, Refusal: &Refusal{Longest: 1500 * time.Millisecond, Attempts: 9}}
	unmeasured := Fault{Name: "replace-node", RefusalBound: time.Second}
	none := Fault{Name: "replace-node", RefusalBound: time.Second, Refusal: &Refusal{}}
	other := Fault{Name: "kill-all", Refusal: nil}
	for _, tt := range []struct {
		f    Fault
		over bool
		text string
	}{
		{within, false, "refused for at most 900ms (4 attempts from 0s), within the bound 1s"},
		{over, true, "refused for at most 1.5s (9 attempts from 0s), OVER the bound 1s"},
		{unmeasured, true, "refusals not measured, OVER the bound 1s"},
		{none, false, "no send refused, within the bound 1s"},
		{other, false, ""},
	} {
		if tt.f.OverBound() != tt.over {
			t.Errorf("%+v: OverBound = %v, want %v", tt.f, !tt.over, tt.over)
		}
		r := &Report{Faults: []Fault{tt.f}}
		if r.AvailabilityOK() == tt.over {
			t.Errorf("%+v: AvailabilityOK = %v", tt.f, r.AvailabilityOK())
		}
		text := r.Text()
		if tt.text != "" && !strings.Contains(text, tt.text) || tt.text == "" && strings.Contains(text, "refused for") {
			t.Errorf("text of %+v:\n%s\nwant %q", tt.f, text, tt.text)
		}
	}
}

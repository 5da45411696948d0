package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeSource is a replica whose logs the test sets.
type fakeSource struct {
	name string
	logs map[string][]Entry
}

func (f fakeSource) Name() string { return f.name }

func (f fakeSource) ReadChannel(_ context.Context, ch string) ([]Entry, error) {
	return slices.Clone(f.logs[ch]), nil
}

// replicas returns n fake replicas n1..nN holding the same logs.
func replicas(n int, logs map[string][]Entry) []LogSource {
	out := make([]LogSource, n)
	for i := range out {
		out[i] = fakeSource{name: fmt.Sprintf("n%d", i+1), logs: logs}
	}
	return out
}

func at(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// Helpers for synthetic histories; times in milliseconds.
func sendOK(client int, id, ch string, inv, ret int, seq uint64) Op {
	return Op{Client: client, Kind: KindSend, Channel: ch, ID: id, Node: "n1", Invoke: at(inv), Return: at(ret), Outcome: OK, Seq: seq}
}

func sendUnknown(client int, id, ch string, inv, ret int) Op {
	return Op{Client: client, Kind: KindSend, Channel: ch, ID: id, Node: "n1", Invoke: at(inv), Return: at(ret),
		Outcome: Unknown, Code: "timeout", Err: "context deadline exceeded"}
}

func sendFail(client int, id, ch string, inv, ret int, code string) Op {
	return Op{Client: client, Kind: KindSend, Channel: ch, ID: id, Node: "n1", Invoke: at(inv), Return: at(ret),
		Outcome: Fail, Code: code, Err: "synthetic " + code}
}

func readOK(client int, ch string, inv, ret int, entries ...Entry) Op {
	return Op{Client: client, Kind: KindRead, Channel: ch, Node: "n2", Invoke: at(inv), Return: at(ret), Outcome: OK, Read: entries}
}

func ent(seq uint64, id string) Entry { return Entry{Seq: seq, ID: id} }

var twoChannels = []string{"chaos-0", "chaos-1"}

func checkOps(t *testing.T, sources []LogSource, ops []Op) (CheckResult, string) {
	t.Helper()
	dir := t.TempDir()
	res, err := CheckSources(context.Background(), sources, HistoryFromOps(ops), twoChannels, dir, CheckOptions{LinearizabilityTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("CheckSources: %v", err)
	}
	return res, dir
}

func TestCheckCleanHistoryPasses(t *testing.T) {
	ops := []Op{
		sendOK(0, "a", "chaos-0", 0, 10, 1),
		sendOK(1, "b", "chaos-0", 5, 30, 3), // concurrent with the first read
		sendOK(0, "c", "chaos-1", 12, 20, 2),
		readOK(2, "chaos-0", 15, 25, ent(1, "a")),              // b not yet
		readOK(3, "chaos-0", 28, 40, ent(1, "a"), ent(3, "b")), // b maybe already
		readOK(2, "chaos-1", 30, 35, ent(2, "c")),              // c done before
		readOK(3, "chaos-0", 45, 50, ent(1, "a"), ent(3, "b")), // everything
		sendFail(1, "d", "chaos-1", 31, 32, "no_leader"),       // not applied, and not stored
		sendOK(1, "d", "chaos-1", 33, 60, 4),                   // the retry of d
		readOK(2, "chaos-1", 40, 70, ent(2, "c"), ent(4, "d")), // d's apply lies inside the read
		sendOK(0, "a", "chaos-0", 55, 58, 1),                   // a retried: deduplicated
		{Client: 3, Kind: KindRead, Channel: "chaos-1", Invoke: at(1), Return: at(2), Outcome: Fail, Err: "timeout"},
	}
	logs := map[string][]Entry{
		"chaos-0": {ent(1, "a"), ent(3, "b")},
		"chaos-1": {ent(2, "c"), ent(4, "d")},
	}
	res, dir := checkOps(t, replicas(3, logs), ops)
	if !res.OK() {
		t.Fatalf("a clean history fails the check: %+v", res)
	}
	if res.Acked != 4 {
		t.Errorf("Acked = %d, want 4", res.Acked)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if res.Stored[n] != 4 {
			t.Errorf("Stored[%s] = %d, want 4", n, res.Stored[n])
		}
	}
	if res.Visualization != "" {
		t.Errorf("a visualization was written for a linearizable history: %s", res.Visualization)
	}
	if _, err := os.Stat(filepath.Join(dir, VisualizationFile)); err == nil {
		t.Errorf("%s exists for a linearizable history", VisualizationFile)
	}
}

// findings names the non-empty lists of a result.
func findings(r CheckResult) []string {
	var out []string
	for _, f := range []struct {
		name string
		ids  []string
	}{
		{"lost", r.Lost}, {"duplicated", r.Duplicated}, {"divergent", r.Divergent},
		{"unexpected", r.Unexpected}, {"seq_mismatch", r.SeqMismatch}, {"rejected", r.Rejected},
		{"failed_but_stored", r.FailedButStored},
	} {
		if len(f.ids) > 0 {
			out = append(out, f.name)
		}
	}
	return out
}

func TestCheckCatchesViolations(t *testing.T) {
	same := func(logs map[string][]Entry) []LogSource { return replicas(3, logs) }
	tests := []struct {
		name    string
		ops     []Op
		sources []LogSource
		// want lists the findings (names as in findings) that must be
		// reported, with the ids or channels they must hold.
		want map[string][]string
		// linearizable is the expected porcupine verdict.
		linearizable bool
	}{
		{
			name: "lost acked send",
			ops:  []Op{sendOK(0, "a", "chaos-0", 0, 10, 1), sendOK(1, "b", "chaos-0", 20, 30, 2)},
			sources: same(map[string][]Entry{
				"chaos-0": {ent(2, "b")},
			}),
			want: map[string][]string{"lost": {"a"}},
		},
		{
			name: "acked send lost on one node",
			ops:  []Op{sendOK(0, "a", "chaos-0", 0, 10, 1), sendOK(1, "b", "chaos-0", 20, 30, 2)},
			sources: []LogSource{
				fakeSource{"n1", map[string][]Entry{"chaos-0": {ent(1, "a"), ent(2, "b")}}},
				fakeSource{"n2", map[string][]Entry{"chaos-0": {ent(1, "a"), ent(2, "b")}}},
				fakeSource{"n3", map[string][]Entry{"chaos-0": {ent(2, "b")}}},
			},
			want:         map[string][]string{"lost": {"a"}, "divergent": {"chaos-0"}},
			linearizable: true, // n1, the reference, has everything
		},
		{
			name: "id stored twice in one channel",
			ops:  []Op{sendOK(0, "a", "chaos-0", 0, 10, 1), sendOK(1, "b", "chaos-0", 20, 30, 2)},
			sources: same(map[string][]Entry{
				"chaos-0": {ent(1, "a"), ent(2, "b"), ent(3, "a")},
			}),
			want: map[string][]string{"duplicated": {"a"}},
		},
		{
			name: "id stored in two channels",
			ops:  []Op{sendOK(0, "a", "chaos-0", 0, 10, 1)},
			sources: same(map[string][]Entry{
				"chaos-0": {ent(1, "a")},
				"chaos-1": {ent(2, "a")},
			}),
			want: map[string][]string{"duplicated": {"a"}},
		},
		{
			name: "two nodes with different orders",
			ops:  []Op{sendOK(0, "a", "chaos-0", 0, 10, 1), sendOK(1, "b", "chaos-0", 0, 10, 2)},
			sources: []LogSource{
				fakeSource{"n1", map[string][]Entry{"chaos-0": {ent(1, "a"), ent(2, "b")}}},
				fakeSource{"n2", map[string][]Entry{"chaos-0": {ent(1, "b"), ent(2, "a")}}},
				fakeSource{"n3", map[string][]Entry{"chaos-0": {ent(1, "a"), ent(2, "b")}}},
			},
			want:         map[string][]string{"divergent": {"chaos-0"}, "seq_mismatch": {"a", "b"}},
			linearizable: true, // the reference n1 agrees with the history
		},
		{
			name: "same ids, same seqs, different channel order on one node",
			ops:  []Op{sendOK(0, "a", "chaos-0", 0, 10, 1), sendOK(1, "b", "chaos-0", 0, 10, 2)},
			sources: []LogSource{
				fakeSource{"n1", map[string][]Entry{"chaos-0": {ent(1, "a"), ent(2, "b")}}},
				fakeSource{"n2", map[string][]Entry{"chaos-0": {ent(2, "b"), ent(1, "a")}}},
			},
			want:         map[string][]string{"divergent": {"chaos-0"}},
			linearizable: true,
		},
		{
			name: "seq mismatch",
			ops:  []Op{sendOK(0, "a", "chaos-0", 0, 10, 5)},
			sources: same(map[string][]Entry{
				"chaos-0": {ent(7, "a")},
			}),
			want: map[string][]string{"seq_mismatch": {"a"}},
		},
		{
			name: "one id acknowledged with two seqs",
			ops:  []Op{sendOK(0, "a", "chaos-0", 0, 10, 5), sendOK(0, "a", "chaos-0", 20, 30, 6)},
			sources: same(map[string][]Entry{
				"chaos-0": {ent(5, "a")},
			}),
			want: map[string][]string{"seq_mismatch": {"a"}},
		},
		{
			name: "stale strong read",
			ops: []Op{
				sendOK(0, "a", "chaos-0", 0, 10, 1),
				readOK(2, "chaos-0", 20, 30), // a completed before the read began
			},
			sources: same(map[string][]Entry{"chaos-0": {ent(1, "a")}}),
			want:    map[string][]string{},
		},
		{
			name: "read goes back in time",
			ops: []Op{
				sendUnknown(0, "a", "chaos-0", 0, 10),
				readOK(2, "chaos-0", 20, 30, ent(1, "a")),
				readOK(3, "chaos-0", 40, 50), // saw a, then not
			},
			sources: same(map[string][]Entry{"chaos-0": {ent(1, "a")}}),
			want:    map[string][]string{},
		},
		{
			name: "read of an entry that is not stored",
			ops: []Op{
				sendUnknown(0, "a", "chaos-0", 0, 10),
				readOK(2, "chaos-0", 20, 30, ent(1, "a")),
			},
			sources: same(map[string][]Entry{"chaos-0": {}}),
			want:    map[string][]string{},
		},
		{
			name: "seqs against real time",
			ops: []Op{
				sendOK(0, "a", "chaos-0", 0, 10, 2),
				sendOK(1, "b", "chaos-0", 20, 30, 1), // began after a returned, yet ordered before it
			},
			sources: same(map[string][]Entry{"chaos-0": {ent(1, "b"), ent(2, "a")}}),
			want:    map[string][]string{},
		},
		{
			name: "wrong has_more",
			ops: []Op{
				sendOK(0, "a", "chaos-0", 0, 10, 1),
				{Client: 2, Kind: KindRead, Channel: "chaos-0", Invoke: at(20), Return: at(30), Outcome: OK, Read: []Entry{ent(1, "a")}, HasMore: true},
			},
			sources: same(map[string][]Entry{"chaos-0": {ent(1, "a")}}),
			want:    map[string][]string{},
		},
		{
			name: "stored id never sent",
			ops:  []Op{sendOK(0, "a", "chaos-0", 0, 10, 1)},
			sources: same(map[string][]Entry{
				"chaos-0": {ent(1, "a"), ent(2, "ghost")},
			}),
			want: map[string][]string{"unexpected": {"ghost"}},
		},
		{
			name: "send that failed definitely yet was stored",
			ops:  []Op{sendFail(0, "a", "chaos-0", 0, 10, "not_leader")},
			sources: same(map[string][]Entry{
				"chaos-0": {ent(1, "a")},
			}),
			want: map[string][]string{"failed_but_stored": {"a"}},
		},
		{
			name:         "conflict answer to a retry",
			ops:          []Op{sendUnknown(0, "a", "chaos-0", 0, 10), sendFail(0, "a", "chaos-0", 20, 30, "conflict")},
			sources:      same(map[string][]Entry{"chaos-0": {ent(1, "a")}}),
			want:         map[string][]string{"rejected": {"a"}},
			linearizable: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, dir := checkOps(t, tc.sources, tc.ops)
			if res.OK() {
				t.Fatalf("the check passed: %+v", res)
			}
			if !res.LinearizabilityChecked {
				t.Fatalf("linearizability not checked: %v", res.Notes)
			}
			got := findings(res)
			for name, ids := range tc.want {
				if !slices.Contains(got, name) {
					t.Errorf("finding %s not reported; got %v; notes %v", name, got, res.Notes)
				}
				var list []string
				switch name {
				case "lost":
					list = res.Lost
				case "duplicated":
					list = res.Duplicated
				case "divergent":
					list = res.Divergent
				case "unexpected":
					list = res.Unexpected
				case "seq_mismatch":
					list = res.SeqMismatch
				case "rejected":
					list = res.Rejected
				case "failed_but_stored":
					list = res.FailedButStored
				}
				if !slices.Equal(list, ids) {
					t.Errorf("%s = %v, want %v", name, list, ids)
				}
			}
			for _, name := range got {
				if _, ok := tc.want[name]; !ok {
					t.Errorf("unexpected finding %s: %+v", name, res)
				}
			}
			if res.Linearizable != tc.linearizable {
				t.Errorf("Linearizable = %v, want %v; notes %v", res.Linearizable, tc.linearizable, res.Notes)
			}
			viz := filepath.Join(dir, VisualizationFile)
			if tc.linearizable {
				if res.Visualization != "" {
					t.Errorf("Visualization = %q for a linearizable history", res.Visualization)
				}
				return
			}
			if res.Visualization != viz {
				t.Fatalf("Visualization = %q, want %q; notes %v", res.Visualization, viz, res.Notes)
			}
			b, err := os.ReadFile(viz)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "<html") || !strings.Contains(string(b), "final read") {
				t.Errorf("%s does not look like porcupine's visualisation of this history (%d bytes)", viz, len(b))
			}
			if len(res.NonLinearizable) == 0 {
				t.Errorf("NonLinearizable names no channel; notes %v", res.Notes)
			}
		})
	}
}

func TestCheckUnknownSends(t *testing.T) {
	tests := []struct {
		name string
		ops  []Op
		logs map[string][]Entry
		ok   bool
	}{
		{
			name: "unknown send that applied",
			ops: []Op{
				sendUnknown(0, "a", "chaos-0", 0, 10),
				readOK(2, "chaos-0", 20, 30, ent(1, "a")),
			},
			logs: map[string][]Entry{"chaos-0": {ent(1, "a")}},
			ok:   true,
		},
		{
			name: "unknown send that applied after a read missed it",
			ops: []Op{
				sendUnknown(0, "a", "chaos-0", 0, 10),
				readOK(2, "chaos-0", 20, 30),
				readOK(2, "chaos-0", 40, 50, ent(1, "a")),
			},
			logs: map[string][]Entry{"chaos-0": {ent(1, "a")}},
			ok:   true,
		},
		{
			name: "unknown send that did not apply",
			ops: []Op{
				sendUnknown(0, "a", "chaos-0", 0, 10),
				readOK(2, "chaos-0", 20, 30),
			},
			logs: map[string][]Entry{"chaos-0": {}},
			ok:   true,
		},
		{
			name: "unknown send, then its retry acknowledged",
			ops: []Op{
				sendUnknown(0, "a", "chaos-0", 0, 10),
				sendOK(0, "a", "chaos-0", 20, 30, 1),
				sendOK(1, "b", "chaos-0", 35, 40, 2),
				readOK(2, "chaos-0", 45, 50, ent(1, "a"), ent(2, "b")),
			},
			logs: map[string][]Entry{"chaos-0": {ent(1, "a"), ent(2, "b")}},
			ok:   true,
		},
		{
			name: "unknown sends interleaved with acknowledged ones",
			ops: []Op{
				sendUnknown(0, "a", "chaos-0", 0, 100),
				sendOK(1, "b", "chaos-0", 10, 20, 2),
				sendUnknown(2, "c", "chaos-0", 15, 200),
				sendOK(1, "d", "chaos-0", 30, 40, 5),
				readOK(3, "chaos-0", 50, 60, ent(2, "b"), ent(5, "d")), // a and c applied later (or never)
				sendUnknown(0, "a", "chaos-0", 110, 120),
				readOK(3, "chaos-0", 130, 140, ent(2, "b"), ent(5, "d"), ent(9, "a")),
			},
			logs: map[string][]Entry{"chaos-0": {ent(2, "b"), ent(5, "d"), ent(9, "a")}},
			ok:   true,
		},
		{
			name: "send that never returned",
			ops: []Op{
				{Client: 0, Kind: KindSend, Channel: "chaos-0", ID: "a", Invoke: at(0)},
				readOK(2, "chaos-0", 20, 30, ent(1, "a")),
			},
			logs: map[string][]Entry{"chaos-0": {ent(1, "a")}},
			ok:   true,
		},
		{
			name: "unknown send seen by a read, then lost",
			ops: []Op{
				sendUnknown(0, "a", "chaos-0", 0, 10),
				readOK(2, "chaos-0", 20, 30, ent(1, "a")),
			},
			logs: map[string][]Entry{"chaos-0": {}},
			ok:   false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := checkOps(t, replicas(3, tc.logs), tc.ops)
			if res.OK() != tc.ok {
				t.Fatalf("OK() = %v, want %v: %+v", res.OK(), tc.ok, res)
			}
		})
	}
}

// TestCheckFullPages checks the page limit: a read of the first page of a
// channel longer than PageLimit returns PageLimit entries and has_more.
func TestCheckFullPages(t *testing.T) {
	n := PageLimit + 1
	var ops []Op
	var log []Entry
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("m%d", i)
		ops = append(ops, sendOK(0, id, "chaos-0", 2*i, 2*i+1, uint64(i)))
		log = append(log, ent(uint64(i), id))
	}
	end := 2*n + 10
	page := Op{Client: 1, Kind: KindRead, Channel: "chaos-0", Invoke: at(end), Return: at(end + 1), Outcome: OK, Read: log[:PageLimit], HasMore: true}
	tail := Op{Client: 1, Kind: KindRead, Channel: "chaos-0", After: log[PageLimit-2].Seq, Invoke: at(end + 2), Return: at(end + 3), Outcome: OK, Read: log[PageLimit-1:]}
	logs := map[string][]Entry{"chaos-0": log}

	res, _ := checkOps(t, replicas(2, logs), append(slices.Clone(ops), page, tail))
	if !res.OK() {
		t.Fatalf("full pages fail the check: %+v", res)
	}
	page.HasMore = false
	res, _ = checkOps(t, replicas(2, logs), append(slices.Clone(ops), page))
	if res.OK() || res.Linearizable {
		t.Fatalf("a full page without has_more passes: %+v", res)
	}
	tail.Read = log[PageLimit:]
	res, _ = checkOps(t, replicas(2, logs), append(slices.Clone(ops), tail))
	if res.OK() || res.Linearizable {
		t.Fatalf("a page after seq %d that misses one entry passes: %+v", tail.After, res)
	}
}

func TestCheckArguments(t *testing.T) {
	if _, err := CheckSources(context.Background(), nil, NewHistory(), twoChannels, "", CheckOptions{}); err == nil {
		t.Error("no sources: no error")
	}
	if _, err := CheckSources(context.Background(), replicas(1, nil), nil, twoChannels, "", CheckOptions{}); err == nil {
		t.Error("nil history: no error")
	}
	// Without an output directory a violation is still found.
	ops := []Op{sendOK(0, "a", "chaos-0", 0, 10, 1), readOK(2, "chaos-0", 20, 30)}
	res, err := CheckSources(context.Background(), replicas(1, map[string][]Entry{"chaos-0": {ent(1, "a")}}), HistoryFromOps(ops), twoChannels, "", CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || res.Linearizable || res.Visualization != "" {
		t.Errorf("stale read without outDir: %+v", res)
	}
}

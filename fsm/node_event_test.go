package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

func nodeEventEntry(tb testing.TB, index uint64, ts int64, c api.NodeEventCommand) *raft.Log {
	tb.Helper()
	data, err := Encode(api.OpNodeEvent, ts, c)
	if err != nil {
		tb.Fatalf("Encode node_event: %v", err)
	}
	return &raft.Log{Type: raft.LogCommand, Index: index, Term: 1, Data: data}
}

// Each node event is one audit line: NODE_JOIN / NODE_LEAVE / NODE_DEAD
// from the node, with the reason, at the entry's time and index.
func TestApplyNodeEventAudits(t *testing.T) {
	f, _ := openTemp(t)
	events := []api.NodeEventCommand{
		{NodeID: "n2", Event: api.NodeEventJoin, Reason: "joined gossip at 127.0.0.1:7082"},
		{NodeID: "n2", Event: api.NodeEventDead, Reason: "declared dead by gossip failure detection"},
		{NodeID: "n3", Event: api.NodeEventLeave},
	}
	for i, ev := range events {
		res := applyOne(f, nodeEventEntry(t, uint64(10+i), baseTS+int64(i), ev))
		got, ok := res.(*api.NodeEventCommand)
		if !ok || *got != ev {
			t.Fatalf("apply %+v = %T %v", ev, res, res)
		}
	}
	page, err := f.Audit(0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ label, from, text, line string }{
		{"NODE_JOIN", "n2", "joined gossip at 127.0.0.1:7082", "[2026-11-21T10:30:00Z] [n2] NODE_JOIN: joined gossip at 127.0.0.1:7082"},
		{"NODE_DEAD", "n2", "declared dead by gossip failure detection", "[2026-11-21T10:30:00Z] [n2] NODE_DEAD: declared dead by gossip failure detection"},
		{"NODE_LEAVE", "n3", "", "[2026-11-21T10:30:00Z] [n3] NODE_LEAVE"},
	}
	if len(page.Events) != len(want) {
		t.Fatalf("audit has %d events, want %d: %+v", len(page.Events), len(want), page.Events)
	}
	for i, w := range want {
		ev := page.Events[i]
		if ev.Kind != AuditNode || ev.Label != w.label || ev.From != w.from || ev.Text != w.text || ev.Index != uint64(10+i) || ev.Seq != uint64(i+1) {
			t.Errorf("event %d = %+v, want %s from %s %q at index %d", i, ev, w.label, w.from, w.text, 10+i)
		}
		if got := ev.Line(); got != w.line {
			t.Errorf("event %d line %q, want %q", i, got, w.line)
		}
	}
}

// A bad node event is refused on every node alike and leaves no trace.
func TestApplyNodeEventRefusals(t *testing.T) {
	f, _ := openTemp(t)
	before := dataDump(t, f)
	cases := []struct {
		cmd   api.NodeEventCommand
		field string
	}{
		{api.NodeEventCommand{NodeID: "", Event: api.NodeEventJoin}, "node_id"},
		{api.NodeEventCommand{NodeID: "N 2", Event: api.NodeEventJoin}, "node_id"},
		{api.NodeEventCommand{NodeID: "n2", Event: "vanished"}, "event"},
		{api.NodeEventCommand{NodeID: "n2", Event: api.NodeEventDead, Reason: strings.Repeat("r", api.MaxNodeEventReason+1)}, "reason"},
	}
	for i, tc := range cases {
		err := mustError(t, applyOne(f, nodeEventEntry(t, uint64(20+i), baseTS, tc.cmd)))
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, api.ErrInvalid) {
			t.Errorf("%+v: %v, want an invalid %s", tc.cmd, err, tc.field)
		}
	}
	if bad := mustError(t, applyOne(f, rawEntry(t, 30, Command{V: 1, Op: api.OpNodeEvent, TS: baseTS, Body: []byte(`[1]`)}))); !strings.Contains(bad.Error(), "decode") {
		t.Errorf("undecodable body: %v", bad)
	}
	if after := dataDump(t, f); after != before {
		t.Errorf("refused node events changed the state:\n%s\nwant\n%s", after, before)
	}
}

// A node event proposed again under the same id (its first proposal timed
// out but committed) is audited once; one without an id (older logs) is
// audited each time, as before.
func TestNodeEventIDAuditsOnce(t *testing.T) {
	f, _ := openTemp(t)
	dead := api.NodeEventCommand{ID: "n1-n2-dead-1", NodeID: "n2", Event: api.NodeEventDead, Reason: "declared dead"}
	legacy := api.NodeEventCommand{NodeID: "n3", Event: api.NodeEventLeave}
	for i, c := range []api.NodeEventCommand{dead, dead, legacy, legacy} {
		if res, ok := applyOne(f, nodeEventEntry(t, uint64(10+i), baseTS+int64(i), c)).(*api.NodeEventCommand); !ok || *res != c {
			t.Fatalf("apply %+v = %v", c, res)
		}
	}
	p, err := f.Audit(0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, ev := range p.Events {
		counts[ev.Label+" "+ev.From]++
	}
	if counts["NODE_DEAD n2"] != 1 || counts["NODE_LEAVE n3"] != 2 {
		t.Fatalf("audit %v; want NODE_DEAD n2 once (same id), NODE_LEAVE n3 twice (no id)", counts)
	}
}

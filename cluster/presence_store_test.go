package cluster

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// fakeClock is a settable clock for the presence store.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var t0 = time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)

func awake(sub string) api.PresenceUpdate {
	return api.PresenceUpdate{State: api.PresenceAwake, Substate: sub}
}

func noStatus(string) string { return "" }

// Versions: a write after seeing a record always gets a larger version,
// even when that record came from a node whose clock is ahead; a node whose
// clock went back still moves forward.
func TestPresenceVersionsAreHybridLogical(t *testing.T) {
	clk := &fakeClock{t: t0}
	s := newPresenceStore("n1", time.Minute, clk.now)
	p1, err := s.put("codex", awake("IDLE"))
	if err != nil {
		t.Fatal(err)
	}
	if p1.Version != micros(t0) || p1.Origin != "n1" || p1.Node != "n1" {
		t.Fatalf("first put %+v, want version = now in µs", p1)
	}
	// Same instant: still a larger version.
	p2, _ := s.put("codex", awake("WORKING"))
	if p2.Version != p1.Version+1 {
		t.Errorf("second put at the same instant has version %d, want %d", p2.Version, p1.Version+1)
	}
	// A record from a node 10 minutes ahead arrives; the next local write
	// beats it although the local clock is behind it.
	ahead := api.Presence{AgentID: "codex", Node: "n2", State: "AWAKE", Substate: "BLOCKED",
		Timestamp: t0, Version: micros(t0.Add(10 * time.Minute)), Origin: "n2"}
	if fresh, err := s.merge(ahead); err != nil || !fresh {
		t.Fatalf("merge of a newer record: fresh=%v err=%v", fresh, err)
	}
	p3, _ := s.put("codex", awake("IDLE"))
	if !p3.Newer(&ahead) {
		t.Errorf("a write after seeing %d got version %d: not newer", ahead.Version, p3.Version)
	}
	// The clock goes back an hour: versions still grow.
	clk.set(t0.Add(-time.Hour))
	p4, _ := s.put("claude", awake("IDLE"))
	if p4.Version <= p3.Version {
		t.Errorf("after the clock went back: version %d, not above %d", p4.Version, p3.Version)
	}
}

func TestPresenceMergeKeepsNewest(t *testing.T) {
	clk := &fakeClock{t: t0}
	s := newPresenceStore("n1", time.Minute, clk.now)
	rec := func(v uint64, origin, sub string) api.Presence {
		return api.Presence{AgentID: "codex", Node: "n2", State: "AWAKE", Substate: sub, Timestamp: t0, Version: v, Origin: origin}
	}
	for _, tc := range []struct {
		p     api.Presence
		fresh bool
		keep  string // substate held afterwards
	}{
		{rec(100, "n2", "IDLE"), true, "IDLE"},
		{rec(99, "n3", "WORKING"), false, "IDLE"},    // older version
		{rec(100, "n2", "WORKING"), false, "IDLE"},   // the same version again
		{rec(100, "n1", "WORKING"), false, "IDLE"},   // same version, smaller origin
		{rec(100, "n3", "BLOCKED"), true, "BLOCKED"}, // same version, larger origin
		{rec(101, "n1", "WORKING"), true, "WORKING"},
	} {
		fresh, err := s.merge(tc.p)
		if err != nil || fresh != tc.fresh {
			t.Errorf("merge v%d/%s: fresh=%v err=%v, want fresh=%v", tc.p.Version, tc.p.Origin, fresh, err, tc.fresh)
		}
		if got, _ := s.get("codex", noStatus); got.Substate != tc.keep {
			t.Errorf("after v%d/%s: substate %s, want %s", tc.p.Version, tc.p.Origin, got.Substate, tc.keep)
		}
	}
	if n := s.staleCount(); n != 3 {
		t.Errorf("stale count %d, want 3", n)
	}
}

// Records a peer sends are checked like heartbeats; implausible or
// expired ones change nothing.
func TestPresenceMergeRefusesBadRecords(t *testing.T) {
	clk := &fakeClock{t: t0}
	s := newPresenceStore("n1", time.Minute, clk.now)
	good := api.Presence{AgentID: "codex", Node: "n2", State: "AWAKE", Substate: "IDLE", Timestamp: t0, Version: 5, Origin: "n2"}
	for name, mod := range map[string]func(*api.Presence){
		"bad agent":       func(p *api.Presence) { p.AgentID = "Bad Agent" },
		"bad state":       func(p *api.Presence) { p.State = "ASLEEP" },
		"awake no sub":    func(p *api.Presence) { p.Substate = "" },
		"task too long":   func(p *api.Presence) { p.Task = strings.Repeat("t", api.MaxPresenceTask+1) },
		"bad node":        func(p *api.Presence) { p.Node = "" },
		"bad origin":      func(p *api.Presence) { p.Origin = "N 2" },
		"no version":      func(p *api.Presence) { p.Version = 0 },
		"version too far": func(p *api.Presence) { p.Version = micros(t0.Add(2 * time.Hour)) },
	} {
		p := good
		mod(&p)
		if fresh, err := s.merge(p); err == nil || fresh {
			t.Errorf("%s: fresh=%v err=%v, want an error", name, fresh, err)
		}
	}
	expired := good
	expired.Timestamp = t0.Add(-presenceRetention - time.Second)
	if fresh, err := s.merge(expired); err != nil || fresh {
		t.Errorf("expired record: fresh=%v err=%v, want it ignored", fresh, err)
	}
	if list := s.list(noStatus); len(list) != 0 {
		t.Errorf("store holds %+v after refused records", list)
	}
}

// How a record reads: lapsed after the TTL, OFFLINE when its node is dead
// or left, as stored otherwise; records past retention disappear.
func TestPresenceView(t *testing.T) {
	clk := &fakeClock{t: t0}
	s := newPresenceStore("n1", 30*time.Second, clk.now)
	if _, err := s.put("codex", api.PresenceUpdate{State: "AWAKE", Substate: "WORKING", Task: "x",
		AgentHealth: api.AgentHealth{TasksSucceeded: 2}}); err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	st := func(id string) string { return status[id] }
	check := func(what, state, sub, reason string) {
		t.Helper()
		p, ok := s.get("codex", st)
		// An OFFLINE view carries no task health (Presence.MarkOffline).
		if !ok || p.State != state || p.Substate != sub || p.Reason != reason || (p.TasksSucceeded == 2) != (state == "AWAKE") {
			t.Errorf("%s: %+v (found %v), want %s/%s %q", what, p, ok, state, sub, reason)
		}
	}
	check("fresh", "AWAKE", "WORKING", "")
	clk.set(t0.Add(30 * time.Second))
	check("at the TTL", "AWAKE", "WORKING", "")
	clk.set(t0.Add(31 * time.Second))
	check("past the TTL", "OFFLINE", "", "heartbeat lapsed")
	clk.set(t0)
	status["n1"] = transport.MemberDead
	check("node dead", "OFFLINE", "", "node n1 dead")
	status["n1"] = transport.MemberLeft
	check("node left", "OFFLINE", "", "node n1 left")
	status["n1"] = transport.MemberAlive
	check("node back", "AWAKE", "WORKING", "")
	clk.set(t0.Add(presenceRetention + time.Second))
	if list := s.list(st); len(list) != 0 {
		t.Errorf("past retention: %+v", list)
	}
	if _, ok := s.get("codex", st); ok {
		t.Errorf("past retention the record is still found")
	}
}

func TestPresenceMarkNodeOffline(t *testing.T) {
	clk := &fakeClock{t: t0}
	s := newPresenceStore("n1", time.Minute, clk.now)
	var sent []api.Presence
	s.broadcast = func(p api.Presence) { sent = append(sent, p) }
	for _, r := range []api.Presence{
		{AgentID: "a", Node: "n2", State: "AWAKE", Substate: "WORKING", Task: "t", Timestamp: t0, Version: 10, Origin: "n2",
			AgentHealth: api.AgentHealth{TasksRunning: 1, TasksFailed: 1, LastError: "boom"}},
		{AgentID: "b", Node: "n2", State: "OFFLINE", Timestamp: t0, Version: 11, Origin: "n2"},
		{AgentID: "c", Node: "n3", State: "AWAKE", Substate: "IDLE", Timestamp: t0, Version: 12, Origin: "n3"},
	} {
		if _, err := s.merge(r); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.markNodeOffline("n2", "node n2 dead"); n != 1 {
		t.Fatalf("marked %d, want 1 (only n2's AWAKE agent)", n)
	}
	a, _ := s.get("a", noStatus)
	if a.State != "OFFLINE" || a.Substate != "" || a.Reason != "node n2 dead" || a.Origin != "n1" || a.Version <= 12 || a.Task != "t" || !a.Timestamp.Equal(t0) ||
		a.AgentHealth != (api.AgentHealth{}) {
		t.Errorf("a after its node died: %+v", a)
	}
	if len(sent) != 1 || sent[0] != a {
		t.Errorf("gossiped %+v, want the new record of a", sent)
	}
	if c, _ := s.get("c", noStatus); c.State != "AWAKE" {
		t.Errorf("c on another node: %+v", c)
	}
}

func TestPresencePutRefusals(t *testing.T) {
	clk := &fakeClock{t: t0}
	s := newPresenceStore("n1", 30*time.Second, clk.now)
	ts := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	if _, err := s.put("codex", awake("IDLE")); err != nil {
		t.Fatal(err)
	}
	before := s.all()
	cases := []struct {
		name string
		u    api.PresenceUpdate
		want error
		text string
	}{
		{"other node", api.PresenceUpdate{Node: "n2", State: "AWAKE", Substate: "IDLE"}, api.ErrInvalid, "this is node n1"},
		{"far future", api.PresenceUpdate{State: "AWAKE", Substate: "IDLE", Timestamp: ts(2 * time.Minute)}, api.ErrInvalid, "ahead of node n1's clock"},
		{"already lapsed", api.PresenceUpdate{State: "AWAKE", Substate: "IDLE", Timestamp: ts(-31 * time.Second)}, api.ErrInvalid, "presence TTL"},
		{"older than recorded", api.PresenceUpdate{State: "OFFLINE", Timestamp: ts(-time.Second)}, api.ErrConflict, "older than the recorded one"},
		{"too big for a packet", api.PresenceUpdate{State: "OFFLINE", Channel: strings.Repeat("c", 64),
			Task: strings.Repeat(`"`, api.MaxPresenceTask), Reason: strings.Repeat(`\`, api.MaxPresenceReason)}, api.ErrInvalid, "gossip wire"},
	}
	for _, tc := range cases {
		agent := "codex"
		if tc.name == "too big for a packet" {
			agent = strings.Repeat("a", 64) // the longest id
		}
		_, err := s.put(agent, tc.u)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.text)
		}
	}
	if after := s.all(); len(after) != 1 || after[0] != before[0] {
		t.Errorf("refused heartbeats changed the store: %+v, was %+v", after, before)
	}
	// A timestamp within the window is used as the heartbeat time.
	p, err := s.put("codex", api.PresenceUpdate{State: "AWAKE", Substate: "IDLE", Timestamp: ts(20 * time.Second)})
	if err != nil || !p.Timestamp.Equal(t0.Add(20*time.Second)) {
		t.Errorf("put with its own timestamp: %+v, %v", p, err)
	}
}

// The presence-source rule (DESIGN.md, "Presence sources"): while an
// agent's record is AWAKE and fresh, a report of a lower-ranked source
// (watcher < pane < hook) refreshes it but keeps the substate the higher
// one set; the same or a higher source changes it; a hook's report keeps
// the watcher's pid, channel, task and health; OFFLINE or a lapsed
// heartbeat ends the hold.
func TestPresenceSourcePrecedence(t *testing.T) {
	clk := &fakeClock{t: t0}
	s := newPresenceStore("n1", 30*time.Second, clk.now)
	put := func(u api.PresenceUpdate) api.Presence {
		t.Helper()
		u.Normalize()
		if err := u.Validate("claude"); err != nil {
			t.Fatal(err)
		}
		p, err := s.put("claude", u)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	from := func(sub, source string) api.PresenceUpdate {
		return api.PresenceUpdate{State: "AWAKE", Substate: sub, Source: source}
	}
	watcherBeat := api.PresenceUpdate{State: "AWAKE", Substate: "IDLE", Source: "watcher", PID: 42, Channel: "dev",
		Task: "answering m1", AgentHealth: api.AgentHealth{TasksSucceeded: 3}}
	check := func(what string, p api.Presence, sub, source string) {
		t.Helper()
		if p.Substate != sub || p.Source != source {
			t.Errorf("%s: %s from %q, want %s from %q", what, p.Substate, p.Source, sub, source)
		}
		if g, _ := s.get("claude", noStatus); g.Substate != p.Substate || g.Source != p.Source || g.Version != p.Version {
			t.Errorf("%s: stored %+v differs from the answer %+v", what, g, p)
		}
	}

	check("watcher starts", put(watcherBeat), "IDLE", "watcher")
	p := put(from("working", "HOOK")) // normalized
	check("hook says WORKING", p, "WORKING", "hook")
	if p.PID != 42 || p.Channel != "dev" || p.Task != "answering m1" || p.TasksSucceeded != 3 {
		t.Errorf("a hook's report dropped what the watcher said: %+v", p)
	}
	clk.set(t0.Add(10 * time.Second))
	p = put(watcherBeat)
	check("the watcher's periodic IDLE", p, "WORKING", "hook")
	if !p.Timestamp.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("the watcher's heartbeat did not refresh the record: %v", p.Timestamp)
	}
	check("the pane says IDLE", put(from("IDLE", "pane")), "WORKING", "hook")
	check("a heartbeat without a source", put(from("IDLE", "")), "WORKING", "hook")
	check("hook says IDLE", put(from("IDLE", "hook")), "IDLE", "hook")
	check("the watcher says WORKING", put(api.PresenceUpdate{State: "AWAKE", Substate: "WORKING", Source: "watcher"}), "IDLE", "hook")

	// A watcher's own report does not take the watcher's fields from the record.
	p = put(api.PresenceUpdate{State: "AWAKE", Substate: "IDLE", Source: "watcher"})
	if p.PID != 0 || p.Channel != "" || p.Task != "" || p.TasksSucceeded != 0 {
		t.Errorf("a watcher's report kept fields it did not give: %+v", p)
	}

	// OFFLINE ends the hold: the next watcher heartbeat is its own word.
	check("offline", put(api.PresenceUpdate{State: "OFFLINE", Source: "watcher"}), "", "")
	check("watcher back", put(from("WORKING", "watcher")), "WORKING", "watcher")
	check("pane over watcher", put(from("IDLE", "pane")), "IDLE", "pane")
	check("watcher under pane", put(from("WORKING", "watcher")), "IDLE", "pane")
	check("hook over pane", put(from("WORKING", "hook")), "WORKING", "hook")

	// A lapsed heartbeat ends the hold too.
	clk.set(clk.now().Add(31 * time.Second))
	check("watcher after the TTL", put(from("IDLE", "watcher")), "IDLE", "watcher")

	// An unknown source is refused, naming the field.
	u := from("IDLE", "cron")
	u.Normalize()
	if err := u.Validate("claude"); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), `source: "cron" is not hook, pane or watcher`) {
		t.Errorf("unknown source: %v", err)
	}
}

// Records gossiped by a node from before sources (no "source" field)
// still decode and merge, and one with a source keeps it on the way
// through the gossip message and the push/pull state.
func TestPresenceGossipOldAndNewPayloads(t *testing.T) {
	clk := &fakeClock{t: t0}
	s := newPresenceStore("n1", 30*time.Second, clk.now)
	g := &gossip{self: "n1", store: s, logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		bq: &memberlist.TransmitLimitedQueue{NumNodes: func() int { return 2 }, RetransmitMult: 1}}
	old := `{"agent_id":"codex","node":"n2","state":"AWAKE","substate":"WORKING","timestamp":"2026-11-21T10:30:00Z","version":5,"origin":"n2"}`
	g.NotifyMsg(append([]byte{msgPresence}, old...))
	if p, ok := s.get("codex", noStatus); !ok || p.Substate != "WORKING" || p.Source != "" || p.Version != 5 {
		t.Fatalf("old payload: %+v %v", p, ok)
	}
	newer := api.Presence{AgentID: "codex", Node: "n2", State: "AWAKE", Substate: "IDLE", Source: "pane",
		Timestamp: t0, Version: 6, Origin: "n2"}
	msg, err := encodePresenceMsg(newer)
	if err != nil || !strings.Contains(string(msg), `"source":"pane"`) {
		t.Fatalf("encoded %s, %v", msg, err)
	}
	g.NotifyMsg(msg)
	if p, _ := s.get("codex", noStatus); p.Source != "pane" || p.Substate != "IDLE" {
		t.Errorf("new payload: %+v", p)
	}
	// A push/pull state from an old node.
	g.MergeRemoteState(append([]byte{statePresence}, `[{"agent_id":"gemini","node":"n3","state":"AWAKE","substate":"IDLE","timestamp":"2026-11-21T10:30:00Z","version":7,"origin":"n3"}]`...), false)
	if p, ok := s.get("gemini", noStatus); !ok || p.Substate != "IDLE" || p.Source != "" {
		t.Errorf("old state: %+v %v", p, ok)
	}
	// A record with a source no node knows is refused.
	bad := strings.Replace(old, `"version":5`, `"version":9,"source":"cron"`, 1)
	g.NotifyMsg(append([]byte{msgPresence}, bad...))
	if p, _ := s.get("codex", noStatus); p.Version != 6 {
		t.Errorf("a record with an unknown source was merged: %+v", p)
	}
}

package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

func TestApplySendStoresMessage(t *testing.T) {
	f, _ := openTemp(t)
	m := testMessage(msgID(1), "general", "@claude please review")
	m.Tags = []string{"review"}
	m.Metadata = []byte(`{"k":1}`)
	ts := baseTS + 123

	r := mustSendResult(t, applyOne(f, sendEntry(t, 5, ts, m)))
	wantTS := time.Unix(0, ts).UTC()
	if r.ID != m.ID || r.Seq != 5 || !r.Timestamp.Equal(wantTS) || r.Duplicate {
		t.Errorf("result = %+v, want id %s seq 5 timestamp %s not duplicate", r, m.ID, wantTS)
	}
	if got := f.AppliedIndex(); got != 5 {
		t.Errorf("AppliedIndex = %d, want 5", got)
	}

	got, err := f.Message(m.ID)
	if err != nil {
		t.Fatalf("Message: %v", err)
	}
	if got.Seq != 5 || !got.Timestamp.Equal(wantTS) {
		t.Errorf("stored seq/timestamp = %d/%s, want 5/%s", got.Seq, got.Timestamp, wantTS)
	}
	want := m
	want.Seq, want.Timestamp = 5, got.Timestamp
	want.Recipients = []string{"claude"} // resolved at apply
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("stored message\n got %+v\nwant %+v", *got, want)
	}
}

func TestApplySendKeepsClientTimestamp(t *testing.T) {
	f, _ := openTemp(t)
	m := testMessage(msgID(1), "general", "hi")
	m.Timestamp = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	r := mustSendResult(t, applyOne(f, sendEntry(t, 1, baseTS, m)))
	if !r.Timestamp.Equal(m.Timestamp) {
		t.Errorf("result timestamp = %s, want the client's %s", r.Timestamp, m.Timestamp)
	}
	got, err := f.Message(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Timestamp.Equal(m.Timestamp) {
		t.Errorf("stored timestamp = %s, want the client's %s", got.Timestamp, m.Timestamp)
	}
}

func TestApplySendDuplicate(t *testing.T) {
	f, _ := openTemp(t)
	m := testMessage(msgID(1), "general", "hello")
	first := mustSendResult(t, applyOne(f, sendEntry(t, 1, baseTS, m)))
	before := dataDump(t, f)

	// The retry is proposed later, by another node with another clock.
	dup := mustSendResult(t, applyOne(f, sendEntry(t, 2, baseTS+int64(time.Hour), m)))
	if !dup.Duplicate || dup.Seq != first.Seq || dup.ID != m.ID || !dup.Timestamp.Equal(first.Timestamp) {
		t.Errorf("duplicate result = %+v, want seq %d timestamp %s duplicate", dup, first.Seq, first.Timestamp)
	}
	if n := channelCount(t, f, "general"); n != 1 {
		t.Errorf("channel count = %d after a duplicate, want 1", n)
	}
	if after := dataDump(t, f); after != before {
		t.Errorf("a duplicate changed the state:\nbefore\n%s\nafter\n%s", before, after)
	}
	if got := f.AppliedIndex(); got != 2 {
		t.Errorf("AppliedIndex = %d, want 2", got)
	}
	page, err := f.ChannelPage("general", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 {
		t.Errorf("channel has %d messages, want 1", len(page.Messages))
	}
}

func TestApplySendConflict(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m *api.Message)
	}{
		{"other text", func(m *api.Message) { m.Content.Text = "something else" }},
		{"other channel", func(m *api.Message) { m.Channel = "elsewhere" }},
		{"other recipients", func(m *api.Message) { m.To = api.Recipients{"all"} }},
		{"client timestamp added", func(m *api.Message) { m.Timestamp = time.Unix(0, baseTS).UTC() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := openTemp(t)
			m := testMessage(msgID(1), "general", "hello")
			mustSendResult(t, applyOne(f, sendEntry(t, 1, baseTS, m)))
			before := dataDump(t, f)

			other := m
			tt.modify(&other)
			err := mustError(t, applyOne(f, sendEntry(t, 2, baseTS+1, other)))
			if !errors.Is(err, api.ErrConflict) {
				t.Errorf("error = %v, want one wrapping ErrConflict", err)
			}
			if after := dataDump(t, f); after != before {
				t.Errorf("a conflict changed the state:\nbefore\n%s\nafter\n%s", before, after)
			}
			got, err := f.Message(m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Content.Text != "hello" || got.Seq != 1 || got.Channel != "general" {
				t.Errorf("stored message changed: %+v", got)
			}
		})
	}
}

func TestApplyTimestampsMonotonic(t *testing.T) {
	// Proposer clocks: 1000, then two entries from a node running behind,
	// then a later one.
	stamps := []int64{baseTS + 1000, baseTS + 500, baseTS + 500, baseTS + 2000, baseTS + 2000}
	want := []int64{baseTS + 1000, baseTS + 1001, baseTS + 1002, baseTS + 2000, baseTS + 2001}

	for _, mode := range []string{"one batch", "single entries"} {
		t.Run(mode, func(t *testing.T) {
			f, _ := openTemp(t)
			var logs []*raft.Log
			for i, ts := range stamps {
				logs = append(logs, sendEntry(t, uint64(i+1), ts, testMessage(msgID(i), "general", "hi")))
			}
			var results []any
			if mode == "one batch" {
				results = f.ApplyBatch(logs)
			} else {
				for _, l := range logs {
					results = append(results, applyOne(f, l))
				}
			}
			var prev time.Time
			for i, res := range results {
				r := mustSendResult(t, res)
				if w := time.Unix(0, want[i]).UTC(); !r.Timestamp.Equal(w) {
					t.Errorf("entry %d: timestamp %s, want %s", i+1, r.Timestamp.Format(time.RFC3339Nano), w.Format(time.RFC3339Nano))
				}
				if i > 0 && !r.Timestamp.After(prev) {
					t.Errorf("entry %d: timestamp %s not after %s", i+1, r.Timestamp, prev)
				}
				prev = r.Timestamp
				stored, err := f.Message(r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !stored.Timestamp.Equal(r.Timestamp) {
					t.Errorf("entry %d: stored timestamp %s, result %s", i+1, stored.Timestamp, r.Timestamp)
				}
			}
		})
	}
}

func TestApplyBatchRefusedEntriesAreIsolated(t *testing.T) {
	f, _ := openTemp(t)
	m1 := testMessage(msgID(1), "general", "one")
	m2 := testMessage(msgID(2), "general", "two")
	m3 := testMessage(msgID(3), "other", "three")
	bad := testMessage(msgID(4), "general", "bad")
	bad.From = "Not Valid"
	conflicting := m1
	conflicting.Content.Text = "one, changed"

	logs := []*raft.Log{
		sendEntry(t, 1, baseTS+10, m1),
		sendEntry(t, 2, baseTS+20, bad),
		sendEntry(t, 3, baseTS+30, m2),
		sendEntry(t, 4, baseTS+40, conflicting),
		{Type: raft.LogCommand, Index: 5, Data: []byte("{not json")},
		rawEntry(t, 6, Command{V: 1, Op: api.OpSend, TS: baseTS + 60, Body: []byte(`{"message":"nope"}`)}),
		sendEntry(t, 7, baseTS+70, m3),
	}
	results := f.ApplyBatch(logs)
	if len(results) != len(logs) {
		t.Fatalf("%d results for %d logs", len(results), len(logs))
	}
	if r := mustSendResult(t, results[0]); r.Seq != 1 {
		t.Errorf("m1 seq = %d, want 1", r.Seq)
	}
	var fe *api.FieldError
	if err := mustError(t, results[1]); !errors.As(err, &fe) || fe.Field != "from" || !errors.Is(err, api.ErrInvalid) {
		t.Errorf("invalid message: %v, want a FieldError on from wrapping ErrInvalid", err)
	}
	if r := mustSendResult(t, results[2]); r.Seq != 3 {
		t.Errorf("m2 seq = %d, want 3", r.Seq)
	}
	if err := mustError(t, results[3]); !errors.Is(err, api.ErrConflict) {
		t.Errorf("conflict: %v, want ErrConflict", err)
	}
	mustError(t, results[4])
	mustError(t, results[5])
	if r := mustSendResult(t, results[6]); r.Seq != 7 {
		t.Errorf("m3 seq = %d, want 7", r.Seq)
	}
	if got := f.AppliedIndex(); got != 7 {
		t.Errorf("AppliedIndex = %d, want 7", got)
	}
	if _, err := f.Message(bad.ID); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Message(invalid id) = %v, want ErrNotFound", err)
	}

	// The same state as a node that applied only the good entries.
	ref, _ := openTemp(t)
	ref.ApplyBatch([]*raft.Log{logs[0], logs[2], logs[6]})
	if got, want := dataDump(t, f), dataDump(t, ref); got != want {
		t.Errorf("refused entries left a trace:\n got\n%s\nwant\n%s", got, want)
	}
}

func TestApplyRefusedCommands(t *testing.T) {
	tests := []struct {
		name    string
		entry   func(t *testing.T) *raft.Log
		wantSub string // in the error text
		wantIs  error  // errors.Is target, if any
		field   string // FieldError.Field, if any
	}{
		{
			name: "unknown op",
			entry: func(t *testing.T) *raft.Log {
				return rawEntry(t, 1, Command{V: 1, Op: "frobnicate", TS: baseTS, Body: []byte(`{}`)})
			},
			wantSub: `unknown op "frobnicate"`,
		},
		{
			name: "version too high",
			entry: func(t *testing.T) *raft.Log {
				return rawEntry(t, 1, Command{V: CommandVersion + 1, Op: api.OpSend, TS: baseTS, Body: []byte(`{}`)})
			},
			wantSub: "version",
		},
		{
			name: "version zero",
			entry: func(t *testing.T) *raft.Log {
				return rawEntry(t, 1, Command{V: 0, Op: api.OpSend, TS: baseTS, Body: []byte(`{}`)})
			},
			wantSub: "version",
		},
		{
			name: "not json",
			entry: func(t *testing.T) *raft.Log {
				return &raft.Log{Type: raft.LogCommand, Index: 1, Data: []byte("\x00\x01")}
			},
			wantSub: "decode",
		},
		{
			name: "send without message",
			entry: func(t *testing.T) *raft.Log {
				return rawEntry(t, 1, Command{V: 1, Op: api.OpSend, TS: baseTS, Body: []byte(`{}`)})
			},
			wantIs: api.ErrInvalid,
			field:  "from",
		},
		{
			name: "send with seq",
			entry: func(t *testing.T) *raft.Log {
				m := testMessage(msgID(1), "general", "hi")
				m.Seq = 99
				return sendEntry(t, 1, baseTS, m)
			},
			wantIs: api.ErrInvalid,
			field:  "seq",
		},
		{
			name: "register_node without node_id",
			entry: func(t *testing.T) *raft.Log {
				return nodeEntry(t, 1, baseTS, api.RegisterNodeCommand{APIAddr: "127.0.0.1:7000"})
			},
			wantIs: api.ErrInvalid,
			field:  "node_id",
		},
		{
			name: "register_node without api_addr",
			entry: func(t *testing.T) *raft.Log {
				return nodeEntry(t, 1, baseTS, api.RegisterNodeCommand{NodeID: "n1"})
			},
			wantIs: api.ErrInvalid,
			field:  "api_addr",
		},
		{
			// Over bbolt's key limit: must be refused, not panic every node.
			name: "register_node node_id too long",
			entry: func(t *testing.T) *raft.Log {
				return nodeEntry(t, 1, baseTS, api.RegisterNodeCommand{NodeID: strings.Repeat("n", 40000), APIAddr: "127.0.0.1:7000"})
			},
			wantIs: api.ErrInvalid,
			field:  "node_id",
		},
		{
			name: "register_node bad body",
			entry: func(t *testing.T) *raft.Log {
				return rawEntry(t, 1, Command{V: 1, Op: api.OpRegisterNode, TS: baseTS, Body: []byte(`[1]`)})
			},
			wantSub: "decode",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := openTemp(t)
			empty := dataDump(t, f)
			err := mustError(t, applyOne(f, tt.entry(t)))
			if tt.wantSub != "" && !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantSub)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error = %v, want errors.Is %v", err, tt.wantIs)
			}
			if tt.field != "" {
				var fe *api.FieldError
				if !errors.As(err, &fe) || fe.Field != tt.field {
					t.Errorf("error = %v, want a FieldError on %q", err, tt.field)
				}
			}
			if got := dataDump(t, f); got != empty {
				t.Errorf("a refused command changed the state:\n%s", got)
			}
			if got := f.AppliedIndex(); got != 1 {
				t.Errorf("AppliedIndex = %d, want 1: a refused entry is still applied", got)
			}
		})
	}
}

func TestApplyNonCommandEntries(t *testing.T) {
	f, _ := openTemp(t)
	empty := dataDump(t, f)
	logs := []*raft.Log{
		{Type: raft.LogConfiguration, Index: 1, Data: []byte("raft config bytes")},
		{Type: raft.LogNoop, Index: 2},
		{Type: raft.LogBarrier, Index: 3},
	}
	results := f.ApplyBatch(logs)
	if len(results) != 3 {
		t.Fatalf("%d results for 3 logs", len(results))
	}
	for i, r := range results {
		if r != nil {
			t.Errorf("result %d = %v, want nil", i, r)
		}
	}
	if got := f.AppliedIndex(); got != 3 {
		t.Errorf("AppliedIndex = %d, want 3", got)
	}
	if got := dataDump(t, f); got != empty {
		t.Errorf("non-command entries changed the state:\n%s", got)
	}

	// Mixed with commands, each result sits at its entry's position.
	results = f.ApplyBatch([]*raft.Log{
		{Type: raft.LogNoop, Index: 4},
		sendEntry(t, 5, baseTS, testMessage(msgID(1), "general", "hi")),
		{Type: raft.LogConfiguration, Index: 6, Data: []byte("x")},
	})
	if results[0] != nil || results[2] != nil {
		t.Errorf("results = %v, want nil around the send", results)
	}
	if r := mustSendResult(t, results[1]); r.Seq != 5 {
		t.Errorf("seq = %d, want 5", r.Seq)
	}
	if got := f.AppliedIndex(); got != 6 {
		t.Errorf("AppliedIndex = %d, want 6", got)
	}

	// Apply (not batched) behaves the same.
	if r := f.Apply(&raft.Log{Type: raft.LogNoop, Index: 7}); r != nil {
		t.Errorf("Apply(noop) = %v, want nil", r)
	}
	if got := f.AppliedIndex(); got != 7 {
		t.Errorf("AppliedIndex = %d, want 7", got)
	}
}

func TestRegisterNode(t *testing.T) {
	f, _ := openTemp(t)
	res := applyOne(f, nodeEntry(t, 1, baseTS, api.RegisterNodeCommand{NodeID: "n2", APIAddr: "127.0.0.1:8002", RaftAddr: "127.0.0.1:9002"}))
	info, ok := res.(*NodeInfo)
	if !ok {
		t.Fatalf("result = %T %v, want *NodeInfo", res, res)
	}
	if want := (NodeInfo{NodeID: "n2", APIAddr: "127.0.0.1:8002", RaftAddr: "127.0.0.1:9002", Index: 1}); *info != want {
		t.Errorf("result = %+v, want %+v", *info, want)
	}
	applyOne(f, nodeEntry(t, 2, baseTS, api.RegisterNodeCommand{NodeID: "n1", APIAddr: "127.0.0.1:8001"}))

	n, err := f.Node("n2")
	if err != nil {
		t.Fatal(err)
	}
	if n != *info {
		t.Errorf("Node(n2) = %+v, want %+v", n, *info)
	}
	nodes, err := f.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].NodeID != "n1" || nodes[1].NodeID != "n2" {
		t.Errorf("Nodes = %+v, want n1, n2 in order", nodes)
	}

	// A node that moves re-registers; the later entry wins.
	applyOne(f, nodeEntry(t, 3, baseTS, api.RegisterNodeCommand{NodeID: "n2", APIAddr: "10.0.0.2:8002"}))
	n, err = f.Node("n2")
	if err != nil {
		t.Fatal(err)
	}
	if want := (NodeInfo{NodeID: "n2", APIAddr: "10.0.0.2:8002", Index: 3}); n != want {
		t.Errorf("Node(n2) after re-register = %+v, want %+v", n, want)
	}
	if nodes, _ := f.Nodes(); len(nodes) != 2 {
		t.Errorf("Nodes = %+v, want 2 entries", nodes)
	}

	long := strings.Repeat("n", api.MaxIDLen)
	if _, ok := applyOne(f, nodeEntry(t, 4, baseTS, api.RegisterNodeCommand{NodeID: long, APIAddr: "127.0.0.1:1"})).(*NodeInfo); !ok {
		t.Errorf("register_node with a %d-byte id was refused", api.MaxIDLen)
	}
	if _, err := f.Node("n9"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Node(n9) = %v, want ErrNotFound", err)
	}
}

// fillChannels stores n messages in "alpha", interleaved with one message
// in "beta" after every second alpha message. It returns alpha's seqs.
func fillChannels(t *testing.T, f *FSM, n int) []uint64 {
	t.Helper()
	var logs []*raft.Log
	var alpha []uint64
	idx := f.AppliedIndex()
	for i := range n {
		idx++
		logs = append(logs, sendEntry(t, idx, baseTS+int64(idx), testMessage(fmt.Sprintf("alpha-%d", i), "alpha", fmt.Sprintf("a%d", i))))
		alpha = append(alpha, idx)
		if i%2 == 1 {
			idx++
			logs = append(logs, sendEntry(t, idx, baseTS+int64(idx), testMessage(fmt.Sprintf("beta-%d", i), "beta", "b")))
		}
	}
	for _, r := range f.ApplyBatch(logs) {
		mustSendResult(t, r)
	}
	return alpha
}

func seqsOf(p api.Page) []uint64 {
	var out []uint64
	for _, m := range p.Messages {
		out = append(out, m.Seq)
	}
	return out
}

func TestChannelPage(t *testing.T) {
	f, _ := openTemp(t)
	alpha := fillChannels(t, f, 25)

	tests := []struct {
		name    string
		after   uint64
		limit   int
		want    []uint64
		hasMore bool
	}{
		{"first page", 0, 10, alpha[:10], true},
		{"second page", alpha[9], 10, alpha[10:20], true},
		{"last page", alpha[19], 10, alpha[20:], false},
		{"exactly the rest", alpha[14], 10, alpha[15:], false},
		{"after a seq of another channel", alpha[1] + 1, 3, alpha[2:5], true},
		{"past the end", alpha[24], 10, nil, false},
		{"limit one", 0, 1, alpha[:1], true},
		{"default limit covers all", 0, 0, alpha, false},
		{"negative limit is the default", 0, -5, alpha, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := f.ChannelPage("alpha", tt.after, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got := seqsOf(p); !slices.Equal(got, tt.want) {
				t.Errorf("seqs = %v, want %v", got, tt.want)
			}
			if p.HasMore != tt.hasMore {
				t.Errorf("HasMore = %t, want %t", p.HasMore, tt.hasMore)
			}
			if p.Messages == nil {
				t.Errorf("Messages is nil, want an empty list")
			}
			for _, m := range p.Messages {
				if m.Channel != "alpha" {
					t.Errorf("message %s of channel %s on alpha's page", m.ID, m.Channel)
				}
			}
		})
	}

	// Walking the pages visits every message once, in order.
	var walked []uint64
	after := uint64(0)
	for range 100 {
		p, err := f.ChannelPage("alpha", after, 7)
		if err != nil {
			t.Fatal(err)
		}
		walked = append(walked, seqsOf(p)...)
		if !p.HasMore {
			break
		}
		after = p.Messages[len(p.Messages)-1].Seq
	}
	if !slices.Equal(walked, alpha) {
		t.Errorf("walked %v, want %v", walked, alpha)
	}

	p, err := f.ChannelPage("nope", 0, 10)
	if err != nil || len(p.Messages) != 0 || p.HasMore || p.Messages == nil {
		t.Errorf("unknown channel: %+v, %v; want an empty page", p, err)
	}
	// A channel whose name is a prefix of another does not see its messages.
	p, err = f.ChannelPage("alph", 0, 10)
	if err != nil || len(p.Messages) != 0 {
		t.Errorf("prefix channel: %d messages, %v; want none", len(p.Messages), err)
	}
}

func TestChannelPageLimits(t *testing.T) {
	f, _ := openTemp(t)
	alpha := fillChannels(t, f, api.MaxPageLimit+5)

	p, err := f.ChannelPage("alpha", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != api.DefaultPageLimit || !p.HasMore {
		t.Errorf("default limit: %d messages, has_more %t; want %d, true", len(p.Messages), p.HasMore, api.DefaultPageLimit)
	}
	p, err = f.ChannelPage("alpha", 0, api.MaxPageLimit*10)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != api.MaxPageLimit || !p.HasMore {
		t.Errorf("over max limit: %d messages, has_more %t; want %d, true", len(p.Messages), p.HasMore, api.MaxPageLimit)
	}
	if got := seqsOf(p); !slices.Equal(got, alpha[:api.MaxPageLimit]) {
		t.Errorf("max page is not the first %d seqs", api.MaxPageLimit)
	}
	p, err = f.ChannelPage("alpha", alpha[api.MaxPageLimit-1], api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	if got := seqsOf(p); !slices.Equal(got, alpha[api.MaxPageLimit:]) || p.HasMore {
		t.Errorf("rest = %v has_more %t, want %v false", got, p.HasMore, alpha[api.MaxPageLimit:])
	}
}

func TestChannels(t *testing.T) {
	f, _ := openTemp(t)
	chans, err := f.Channels()
	if err != nil || len(chans) != 0 || chans == nil {
		t.Errorf("empty state: Channels = %#v, %v; want an empty list", chans, err)
	}
	alpha := fillChannels(t, f, 6) // alpha seqs 1 2 4 5 7 8; beta 3 6 9
	// A duplicate and a conflict do not count.
	next := f.AppliedIndex()
	mustSendResult(t, applyOne(f, sendEntry(t, next+1, baseTS+int64(next+1), testMessage("alpha-0", "alpha", "a0"))))
	mustError(t, applyOne(f, sendEntry(t, next+2, baseTS+int64(next+2), testMessage("alpha-0", "alpha", "changed"))))
	mustSendResult(t, applyOne(f, sendEntry(t, next+3, baseTS+int64(next+3), testMessage("zeta-0", "zeta", "z"))))

	chans, err = f.Channels()
	if err != nil {
		t.Fatal(err)
	}
	want := []api.ChannelInfo{
		{Name: "alpha", Count: 6, FirstSeq: alpha[0], LastSeq: alpha[5]},
		{Name: "beta", Count: 3, FirstSeq: 3, LastSeq: 9},
		{Name: "zeta", Count: 1, FirstSeq: next + 3, LastSeq: next + 3},
	}
	if !slices.Equal(chans, want) {
		t.Errorf("Channels =\n%+v\nwant\n%+v", chans, want)
	}
}

func TestMessageLookup(t *testing.T) {
	f, _ := openTemp(t)
	fillChannels(t, f, 4)
	m, err := f.Message("alpha-3")
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "alpha-3" || m.Content.Text != "a3" || m.Channel != "alpha" {
		t.Errorf("Message(alpha-3) = %+v", m)
	}
	for _, id := range []string{"alpha-9", "", "alpha"} {
		if _, err := f.Message(id); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("Message(%q) = %v, want ErrNotFound", id, err)
		}
	}
}

func TestQueriesAfterClose(t *testing.T) {
	f, path := openTemp(t)
	fillChannels(t, f, 2)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if _, err := f.Message("alpha-0"); !errors.Is(err, ErrClosed) {
		t.Errorf("Message after Close = %v, want ErrClosed", err)
	}
	if _, err := f.ChannelPage("alpha", 0, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("ChannelPage after Close = %v, want ErrClosed", err)
	}
	if _, err := f.Snapshot(); !errors.Is(err, ErrClosed) {
		t.Errorf("Snapshot after Close = %v, want ErrClosed", err)
	}
	// The file is released: it opens again.
	g := openAt(t, path)
	defer g.Close()
	if _, err := g.Message("alpha-0"); err != nil {
		t.Errorf("Message after reopen: %v", err)
	}
}

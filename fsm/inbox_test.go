package fsm

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// fillInbox sends alice six messages (seqs returned) of mixed priority,
// type and sender.
func fillInbox(b *mbox) []uint64 {
	var out []uint64
	for _, s := range []struct {
		from string
		prio api.Priority
		typ  string
	}{
		{"codex", "urgent", "request"}, {"claude", "normal", "chat"}, {"codex", "low", "status"},
		{"claude", "urgent", "chat"}, {"gemini", "high", "request"}, {"codex", "normal", "chat"},
	} {
		m := b.msg(s.from, "text", "alice")
		m.Priority, m.Type = s.prio, s.typ
		out = append(out, b.send(m).Seq)
	}
	return out
}

func TestInboxFilters(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	s := fillInbox(b)
	b.send(b.msg("codex", "not for alice", "bob"))

	tests := []struct {
		name string
		q    api.InboxQuery
		want []uint64
		more bool
	}{
		{"everything", api.InboxQuery{}, s, false},
		{"priority", api.InboxQuery{Priority: "urgent"}, []uint64{s[0], s[3]}, false},
		{"type", api.InboxQuery{Type: "request"}, []uint64{s[0], s[4]}, false},
		{"from", api.InboxQuery{From: "codex"}, []uint64{s[0], s[2], s[5]}, false},
		{"from and type", api.InboxQuery{From: "codex", Type: "chat"}, []uint64{s[5]}, false},
		{"after", api.InboxQuery{After: s[3]}, s[4:], false},
		{"limit", api.InboxQuery{Limit: 2}, s[:2], true},
		{"limit and filter", api.InboxQuery{From: "claude", Limit: 1}, []uint64{s[1]}, true},
		{"nothing matches", api.InboxQuery{From: "nobody"}, []uint64{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := b.inbox("alice", tt.q)
			if got := seqs(p); !slices.Equal(got, tt.want) || p.HasMore != tt.more {
				t.Errorf("seqs %v has_more %t, want %v %t", got, p.HasMore, tt.want, tt.more)
			}
			if tt.more && p.NextAfter != tt.want[len(tt.want)-1] {
				t.Errorf("next_after = %d, want %d", p.NextAfter, tt.want[len(tt.want)-1])
			}
		})
	}

	// Read state and the unread filter.
	b.ok(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", Upto: s[1]})
	p := b.inbox("alice", api.InboxQuery{Unread: true})
	if got := seqs(p); !slices.Equal(got, s[2:]) {
		t.Errorf("unread = %v, want %v", got, s[2:])
	}
	for _, e := range p.Messages {
		if e.Read {
			t.Errorf("unread page holds read entry %d", e.Seq)
		}
	}
	all := b.inbox("alice", api.InboxQuery{})
	for i, e := range all.Messages {
		if e.Read != (i < 2) {
			t.Errorf("entry %d read = %t", e.Seq, e.Read)
		}
	}
	if got := seqs(b.inbox("alice", api.InboxQuery{Unread: true, Priority: "urgent"})); !slices.Equal(got, []uint64{s[3]}) {
		t.Errorf("unread urgent = %v, want [%d]", got, s[3])
	}
}

// pageAll reads agent's inbox page by page from q, following the page's
// cursor (NextAfter, or NextBefore for Newest), and fails t if it takes
// more than max pages.
func pageAll(t *testing.T, b *mbox, agent string, q api.InboxQuery, max int) []uint64 {
	t.Helper()
	var got []uint64
	for pages := 0; ; pages++ {
		if pages > max {
			t.Fatal("paging does not end")
		}
		p := b.inbox(agent, q)
		got = append(got, seqs(p)...)
		if !p.HasMore {
			return got
		}
		if q.Newest {
			q.Before = p.NextBefore
		} else {
			q.After = p.NextAfter
		}
	}
}

func TestInboxPagesFollowNextAfter(t *testing.T) {
	b := newMbox(t)
	s := fillInbox(b)
	got := pageAll(t, b, "alice", api.InboxQuery{From: "codex", Limit: 1}, len(s))
	if want := []uint64{s[0], s[2], s[5]}; !slices.Equal(got, want) {
		t.Errorf("pages gave %v, want %v", got, want)
	}
}

// Newest pages walk the same entries backwards, follow NextBefore, stop
// at After, and leave other agents' entries out at both ends.
func TestInboxNewestFirst(t *testing.T) {
	b := newMbox(t)
	s := fillInbox(b)
	b.send(b.msg("codex", "after alice's", "zoe")) // a key past alice's
	got := pageAll(t, b, "alice", api.InboxQuery{From: "codex", Limit: 1, Newest: true}, len(s))
	if want := []uint64{s[5], s[2], s[0]}; !slices.Equal(got, want) {
		t.Errorf("newest pages gave %v, want %v", got, want)
	}
	all := seqs(b.inbox("alice", api.InboxQuery{Newest: true, Limit: api.MaxPageLimit}))
	if len(all) != len(s) || !slices.IsSortedFunc(all, func(a, b uint64) int { return int(b) - int(a) }) {
		t.Errorf("newest page %v, want all %d of alice's entries newest first", all, len(s))
	}
	if got := seqs(b.inbox("alice", api.InboxQuery{Newest: true, After: s[2], Limit: api.MaxPageLimit})); !slices.Equal(got, all[:len(all)-3]) {
		t.Errorf("newest with after=%d gave %v, want %v", s[2], got, all[:len(all)-3])
	}
	for _, bad := range []api.InboxQuery{{Before: 5}, {Newest: true, After: 4, Before: 5}} {
		var fe *api.FieldError
		if _, err := b.f.Inbox("alice", bad); !errors.As(err, &fe) || fe.Field != "before" {
			t.Errorf("Inbox(%+v) = %v, want a FieldError on before", bad, err)
		}
	}
}

func TestInboxScanIsBounded(t *testing.T) {
	b := newMbox(t)
	// MaxInboxScan+5 messages from codex, then one from claude: a query
	// for claude's stops after MaxInboxScan entries and says where.
	var logs []*raft.Log
	for range MaxInboxScan + 5 {
		m := b.msg("codex", "x", "alice")
		b.idx++
		b.ts += 1000
		logs = append(logs, opEntry(t, b.idx, b.ts, api.OpSend, api.SendCommand{Message: m}))
	}
	for _, r := range b.f.ApplyBatch(logs) {
		mustSendResult(t, r)
	}
	last := b.send(b.msg("claude", "needle", "alice")).Seq
	p := b.inbox("alice", api.InboxQuery{From: "claude"})
	if len(p.Messages) != 0 || !p.HasMore || p.NextAfter == 0 || p.NextAfter >= last {
		t.Fatalf("first page: %d messages, has_more %t, next_after %d; want an empty page cut by the scan bound", len(p.Messages), p.HasMore, p.NextAfter)
	}
	p = b.inbox("alice", api.InboxQuery{From: "claude", After: p.NextAfter})
	if got := seqs(p); !slices.Equal(got, []uint64{last}) || p.HasMore {
		t.Errorf("second page = %v has_more %t, want [%d]", got, p.HasMore, last)
	}
}

func TestInboxCountsAndMarkRead(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	wantCounts := func(total, unread uint64, byPrio map[api.Priority]uint64, upto uint64) {
		t.Helper()
		c := b.counts("alice")
		want := api.InboxCounts{Agent: "alice", Total: total, Unread: unread,
			UnreadByPriority: map[api.Priority]uint64{"urgent": 0, "high": 0, "normal": 0, "low": 0}, ReadUpto: upto}
		maps.Copy(want.UnreadByPriority, byPrio)
		if c.Agent != want.Agent || c.Total != want.Total || c.Unread != want.Unread || c.ReadUpto != want.ReadUpto ||
			!maps.Equal(c.UnreadByPriority, want.UnreadByPriority) {
			t.Errorf("counts = %+v, want %+v", c, want)
		}
	}
	wantCounts(0, 0, nil, 0)
	s := fillInbox(b) // urgent normal low urgent high normal
	wantCounts(6, 6, map[api.Priority]uint64{"urgent": 2, "normal": 2, "low": 1, "high": 1}, 0)

	// One message.
	m4, err := b.f.Inbox("alice", api.InboxQuery{After: s[2], Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	res := b.ok(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", ID: m4.Messages[0].ID}).(*api.MarkReadResult)
	if res.Marked != 1 || res.Counts.Unread != 5 {
		t.Errorf("mark one = %+v", res)
	}
	wantCounts(6, 5, map[api.Priority]uint64{"urgent": 1, "normal": 2, "low": 1, "high": 1}, 0)
	// Again: nothing changes, counts are not decremented twice.
	res = b.ok(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", ID: m4.Messages[0].ID}).(*api.MarkReadResult)
	if res.Marked != 0 {
		t.Errorf("marking a read message again marked %d", res.Marked)
	}
	wantCounts(6, 5, map[api.Priority]uint64{"urgent": 1, "normal": 2, "low": 1, "high": 1}, 0)

	// Up to s[4]: s[0], s[1], s[2], s[4] (s[3] was read already).
	res = b.ok(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", Upto: s[4]}).(*api.MarkReadResult)
	if res.Marked != 4 {
		t.Errorf("upto marked %d, want 4", res.Marked)
	}
	wantCounts(6, 1, map[api.Priority]uint64{"normal": 1}, s[4])
	// Up to a lower seq: nothing to do, the mark stays.
	res = b.ok(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", Upto: s[1]}).(*api.MarkReadResult)
	if res.Marked != 0 {
		t.Errorf("lower upto marked %d", res.Marked)
	}
	wantCounts(6, 1, map[api.Priority]uint64{"normal": 1}, s[4])
	// Past the end.
	b.ok(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", Upto: 1 << 40})
	wantCounts(6, 0, nil, 1<<40)

	// Reading never deletes.
	if got := seqs(b.inbox("alice", api.InboxQuery{})); !slices.Equal(got, s) {
		t.Errorf("inbox after reading = %v, want %v", got, s)
	}
	// Read is per agent: bob's copy of a message to both stays unread.
	both := b.send(b.msg("codex", "for both", "alice", "bob"))
	b.ok(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", Upto: both.Seq})
	if c := b.counts("bob"); c.Unread != 1 {
		t.Errorf("bob's unread = %d after alice read, want 1", c.Unread)
	}
}

func TestMarkReadRefusals(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	r := b.send(b.msg("codex", "hi", "alice"))
	other := b.send(b.msg("codex", "for bob", "bob"))
	tests := []struct {
		name   string
		cmd    api.MarkReadCommand
		is     error
		field  string
		substr string
	}{
		{"no agent", api.MarkReadCommand{ID: r.ID}, api.ErrInvalid, "agent", "required"},
		{"bad agent", api.MarkReadCommand{Agent: "Alice", ID: r.ID}, api.ErrInvalid, "agent", "must match"},
		{"neither id nor upto", api.MarkReadCommand{Agent: "alice"}, api.ErrInvalid, "id", "give a message id"},
		{"both", api.MarkReadCommand{Agent: "alice", ID: r.ID, Upto: 3}, api.ErrInvalid, "upto", "not both"},
		{"bad id", api.MarkReadCommand{Agent: "alice", ID: "no spaces allowed"}, api.ErrInvalid, "id", "must be a message id"},
		{"unknown agent", api.MarkReadCommand{Agent: "zed", Upto: 5}, api.ErrNotFound, "", "agent zed: not registered"},
		{"unknown message", api.MarkReadCommand{Agent: "alice", ID: "msg-nope"}, api.ErrNotFound, "", "message msg-nope is not in alice's inbox"},
		{"not in the inbox", api.MarkReadCommand{Agent: "alice", ID: other.ID}, api.ErrNotFound, "", "is not in alice's inbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := dataDump(t, b.f)
			err := mustError(t, b.apply(api.OpMarkRead, tt.cmd))
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.substr) {
				t.Errorf("error = %v, want %v containing %q", err, tt.is, tt.substr)
			}
			var fe *api.FieldError
			if tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field) {
				t.Errorf("error = %v, want a FieldError on %s", err, tt.field)
			}
			if dataDump(t, b.f) != before {
				t.Errorf("a refused mark changed the state")
			}
		})
	}
}

func TestInboxQueryRefusals(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	if _, err := b.f.Inbox("zed", api.InboxQuery{}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Inbox(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := b.f.InboxCounts("zed"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("InboxCounts(unknown) = %v, want ErrNotFound", err)
	}
	for _, q := range []api.InboxQuery{{Priority: "whenever"}, {Type: "Bad Type"}, {From: "A"}, {Limit: api.MaxPageLimit + 1}} {
		var fe *api.FieldError
		if _, err := b.f.Inbox("alice", q); !errors.As(err, &fe) {
			t.Errorf("Inbox(%+v) = %v, want a FieldError", q, err)
		}
	}
	// A registered agent with no messages has an empty inbox, and an
	// unregistered one that was sent a message has one.
	if p := b.inbox("alice", api.InboxQuery{}); len(p.Messages) != 0 || p.HasMore {
		t.Errorf("empty inbox = %+v", p)
	}
	b.send(b.msg("codex", "early", "late-starter"))
	if c := b.counts("late-starter"); c.Total != 1 {
		t.Errorf("late-starter counts = %+v", c)
	}
}

func TestReceiptsLifecycle(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	b.register("bob", "reviewer")
	req := b.send(b.msg("codex", "review please", "alice", "bob"))
	rc := b.receipts(req.ID)
	for _, a := range []string{"alice", "bob"} {
		if rc[a].State != api.ReceiptDelivered || !rc[a].DeliveredAt.Equal(req.Timestamp) || !rc[a].ReadAt.IsZero() {
			t.Errorf("%s: %+v, want delivered at %s", a, rc[a], req.Timestamp)
		}
		if !rc[a].Reached(api.ReceiptDelivered) || rc[a].Reached(api.ReceiptRead) || rc[a].Reached(api.ReceiptAnswered) {
			t.Errorf("%s: Reached wrong for a delivered receipt", a)
		}
	}

	b.ok(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", ID: req.ID})
	readAt := time.Unix(0, b.ts).UTC()
	// A reply from someone who was not a recipient answers nothing.
	outsider := b.msg("carol", "drive-by", "codex")
	outsider.InReplyTo = req.ID
	b.send(outsider)
	reply := b.msg("bob", "looks good", "codex")
	reply.InReplyTo = req.ID
	rr := b.send(reply)
	// A second reply does not move the answered time.
	again := b.msg("bob", "one more thing", "codex")
	again.InReplyTo = req.ID
	b.send(again)

	full, err := b.f.Receipts(req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if full.ID != req.ID || full.Seq != req.Seq || full.From != "codex" || len(full.Receipts) != 2 {
		t.Fatalf("receipts = %+v", full)
	}
	rc = b.receipts(req.ID)
	if a := rc["alice"]; a.State != api.ReceiptRead || !a.ReadAt.Equal(readAt) || !a.Reached(api.ReceiptRead) || a.Reached(api.ReceiptAnswered) {
		t.Errorf("alice: %+v, want read at %s", a, readAt)
	}
	bob := rc["bob"]
	if bob.State != api.ReceiptAnswered || !bob.AnsweredAt.Equal(rr.Timestamp) || bob.ReplyID != reply.ID || !bob.ReadAt.IsZero() {
		t.Errorf("bob: %+v, want answered at %s by %s", bob, rr.Timestamp, reply.ID)
	}
	if !bob.Reached(api.ReceiptRead) || !bob.Reached(api.ReceiptAnswered) {
		t.Errorf("bob: an answered receipt must count as read and answered")
	}
	if _, err := b.f.Receipts("msg-nope"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Receipts(unknown) = %v", err)
	}
}

func TestThreads(t *testing.T) {
	b := newMbox(t)
	root := b.send(b.msg("codex", "root", "claude"))
	r1m := b.msg("claude", "first reply", "codex")
	r1m.InReplyTo = root.ID
	r1 := b.send(r1m)
	b.send(b.msg("codex", "unrelated", "claude"))
	r2m := b.msg("codex", "reply to the reply", "claude")
	r2m.InReplyTo = r1.ID
	r2 := b.send(r2m)
	orphan := b.msg("codex", "reply to a message this cluster never saw", "claude")
	orphan.InReplyTo = "msg-elsewhere-1"
	b.send(orphan)

	for _, id := range []string{r1.ID, r2.ID} {
		m, _ := b.f.Message(id)
		if m.ThreadID != root.ID {
			t.Errorf("%s thread_id = %q, want the root %s", id, m.ThreadID, root.ID)
		}
	}
	if m, _ := b.f.Message(root.ID); m.ThreadID != "" {
		t.Errorf("root thread_id = %q, want it left empty", m.ThreadID)
	}
	if m, _ := b.f.Message(orphan.ID); m.ThreadID != "msg-elsewhere-1" {
		t.Errorf("orphan thread_id = %q, want its parent's id", m.ThreadID)
	}
	want := []uint64{root.Seq, r1.Seq, r2.Seq}
	for _, id := range []string{root.ID, r2.ID} { // by thread id, or by any message of it
		p, err := b.f.Thread(id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, m := range p.Messages {
			got = append(got, m.Seq)
		}
		if !slices.Equal(got, want) || p.ThreadID != root.ID || p.HasMore {
			t.Errorf("Thread(%s) = %v (thread %s, more %t), want %v of %s", id, got, p.ThreadID, p.HasMore, want, root.ID)
		}
	}
	p, err := b.f.Thread(root.ID, root.Seq, 1)
	if err != nil || len(p.Messages) != 1 || p.Messages[0].Seq != r1.Seq || !p.HasMore {
		t.Errorf("Thread page after root, limit 1 = %+v, %v", p, err)
	}
	if p, err := b.f.Thread("msg-elsewhere-1", 0, 0); err != nil || len(p.Messages) != 1 {
		t.Errorf("Thread(orphan's parent) = %+v, %v", p, err)
	}
	if _, err := b.f.Thread("msg-nope", 0, 0); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Thread(unknown) = %v, want ErrNotFound", err)
	}
}

func TestDropMessageIndexes(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	kept := b.send(b.msg("codex", "kept", "alice"))
	r := b.send(b.msg("codex", "to trim", "alice", "bob"))
	reply := b.msg("alice", "re", "codex")
	reply.InReplyTo = r.ID
	b.send(reply)
	b.ok(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", ID: r.ID})
	m, err := b.f.Message(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	err = b.f.db.Update(func(tx *bbolt.Tx) error {
		dropMessageIndexes(tx, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := b.counts("alice"); c.Total != 1 || c.Unread != 1 || c.UnreadByPriority["normal"] != 1 {
		t.Errorf("alice after the trim = %+v, want the kept message only, unread", c)
	}
	if c := b.counts("bob"); c.Total != 0 || c.Unread != 0 || c.UnreadByPriority["normal"] != 0 {
		t.Errorf("bob after the trim = %+v, want zeros", c)
	}
	if got := seqs(b.inbox("alice", api.InboxQuery{})); !slices.Equal(got, []uint64{kept.Seq}) {
		t.Errorf("alice's inbox = %v", got)
	}
	if r, _ := b.f.Receipts(r.ID); len(r.Receipts) != 0 {
		t.Errorf("receipts left: %+v", r.Receipts)
	}
	for line := range strings.Lines(dump(t, b.f)) {
		if strings.HasPrefix(line, fmt.Sprintf("threads %x ", channelIndexKey(r.ID, r.Seq))) {
			t.Errorf("thread entry left: %s", line)
		}
	}
}

package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// max_messages keeps the newest N; inboxes, counts, threads and receipts
// lose the trimmed messages; the ids stay reserved.
func TestRetentionMaxMessages(t *testing.T) {
	b := newMbox(t)
	b.register("claude", "reviewer")
	var sent []*SendResult
	var msgs []api.Message
	for i := range 5 {
		m := b.msg("codex", "hello", "claude")
		m.Title = string(rune('a' + i))
		msgs = append(msgs, m)
		sent = append(sent, b.send(m))
	}
	res := b.ok(api.OpSetRetention, api.SetRetentionCommand{Channel: "general", MaxMessages: 2}).(*api.TrimResult)
	if res.Trimmed != 3 || res.UpToSeq != sent[2].Seq || res.Retention.Trimmed != 3 {
		t.Fatalf("trim = %+v, want 3 up to seq %d", res, sent[2].Seq)
	}
	page, err := b.f.ChannelPage("general", 0, 10)
	if err != nil || len(page.Messages) != 2 || page.Messages[0].Seq != sent[3].Seq {
		t.Fatalf("channel after trim = %+v, %v", page.Messages, err)
	}
	chans, _ := b.f.Channels()
	if len(chans) != 1 || chans[0].Count != 2 || chans[0].FirstSeq != sent[3].Seq || chans[0].LastSeq != sent[4].Seq {
		t.Fatalf("channels after trim = %+v", chans)
	}
	if c := b.counts("claude"); c.Total != 2 || c.Unread != 2 {
		t.Fatalf("claude's counts after trim = %+v, want 2 total, 2 unread", c)
	}
	if in := b.inbox("claude", api.InboxQuery{}); len(seqs(in)) != 2 {
		t.Fatalf("claude's inbox after trim = %v", seqs(in))
	}
	if _, err := b.f.Message(msgs[0].ID); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("trimmed message still readable: %v", err)
	}
	// A late retry of a trimmed send answers its seq and stores nothing.
	again := b.send(msgs[0])
	if !again.Duplicate || again.Seq != sent[0].Seq {
		t.Fatalf("retry of a trimmed send = %+v, want duplicate at %d", again, sent[0].Seq)
	}
	if n := channelCount(t, b.f, "general"); n != 2 {
		t.Fatalf("channel count after the retry = %d, want 2", n)
	}
	if lines := b.auditLines(); !containsLabel(lines, "TRIM") || !containsLabel(lines, "RETENTION") {
		t.Fatalf("audit has no RETENTION/TRIM lines: %v", lines)
	}
}

// A reply to a message retention trimmed is stored, in the thread its
// in_reply_to names: the parent's own thread is gone with it.
func TestReplyToTrimmedMessage(t *testing.T) {
	b := newMbox(t)
	first := b.msg("codex", "one", "claude")
	b.send(first)
	b.send(b.msg("codex", "two", "claude"))
	b.ok(api.OpSetRetention, api.SetRetentionCommand{Channel: "general", MaxMessages: 1})
	if _, err := b.f.Message(first.ID); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("the first message was not trimmed: %v", err)
	}
	reply := b.msg("claude", "about one", "codex")
	reply.InReplyTo = first.ID
	res := b.send(reply)
	got, err := b.f.Message(reply.ID)
	if err != nil || got.Seq != res.Seq || got.ThreadID != first.ID {
		t.Fatalf("reply = %+v, %v; want it stored at %d in thread %s", got, err, res.Seq, first.ID)
	}
	page, err := b.f.Thread(first.ID, 0, 10)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].ID != reply.ID {
		t.Fatalf("thread %s = %+v, %v; want the reply alone", first.ID, page, err)
	}
}

func containsLabel(lines []string, label string) bool {
	for _, l := range lines {
		if strings.Contains(l, "] "+label) {
			return true
		}
	}
	return false
}

// max_age trims by the trimming entry's time, never a clock: a message
// exactly max_age old stays, one nanosecond older goes.
func TestRetentionMaxAgeUsesEntryTime(t *testing.T) {
	b := newMbox(t)
	first := b.send(b.msg("codex", "old", "claude"))
	second := b.send(b.msg("codex", "newer", "claude"))
	b.ok(api.OpSetRetention, api.SetRetentionCommand{Channel: "general", MaxAge: "1h"})
	// Trim at exactly first+1h: the first message is not older than the
	// cutoff, so it stays.
	b.ts = first.Timestamp.UnixNano() + int64(time.Hour) - 1000
	if r := b.ok(api.OpTrim, api.TrimCommand{Channel: "general"}).(*api.TrimResult); r.Trimmed != 0 {
		t.Fatalf("trim at the boundary removed %d", r.Trimmed)
	}
	b.ts = first.Timestamp.UnixNano() + int64(time.Hour) // next entry: +1 µs past the boundary
	r := b.ok(api.OpTrim, api.TrimCommand{Channel: "general"}).(*api.TrimResult)
	if r.Trimmed != 1 || r.UpToSeq != first.Seq {
		t.Fatalf("trim past the boundary = %+v, want the first message only", r)
	}
	if _, err := b.f.Message(second.ID); err != nil {
		t.Fatalf("newer message gone: %v", err)
	}
}

func TestRetentionRefusals(t *testing.T) {
	b := newMbox(t)
	before := dump(t, b.f)
	for _, tt := range []struct {
		op    api.Op
		body  any
		field string
		is    error
	}{
		{api.OpSetRetention, api.SetRetentionCommand{Channel: "Bad Channel"}, "channel", api.ErrInvalid},
		{api.OpSetRetention, api.SetRetentionCommand{Channel: "c", MaxAge: "soon"}, "max_age", api.ErrInvalid},
		{api.OpSetRetention, api.SetRetentionCommand{Channel: "c", MaxAge: "1s"}, "max_age", api.ErrInvalid},
		{api.OpTrim, api.TrimCommand{Channel: "nopolicy"}, "", api.ErrNotFound},
	} {
		err, ok := b.apply(tt.op, tt.body).(error)
		if !ok || !errors.Is(err, tt.is) {
			t.Errorf("%s %+v: got %v, want %v", tt.op, tt.body, err, tt.is)
			continue
		}
		var fe *api.FieldError
		if tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field) {
			t.Errorf("%s %+v: error %v does not name %s", tt.op, tt.body, err, tt.field)
		}
	}
	if after := dump(t, b.f); dataOnly(after) != dataOnly(before) {
		t.Fatal("a refused retention command changed the state")
	}
}

// dataOnly drops the meta lines (the applied index moves on every entry).
func dataOnly(d string) string {
	var out []string
	for _, l := range strings.Split(d, "\n") {
		if !strings.HasPrefix(l, "meta ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestTrimDue(t *testing.T) {
	b := newMbox(t)
	first := b.send(b.msg("codex", "one", "claude"))
	b.send(b.msg("codex", "two", "claude"))
	if due, err := b.f.TrimDue("general", first.Timestamp); err != nil || due {
		t.Fatalf("no policy: due=%v, %v", due, err)
	}
	b.ok(api.OpSetRetention, api.SetRetentionCommand{Channel: "general", MaxMessages: 2, MaxAge: "1h"})
	if due, _ := b.f.TrimDue("general", first.Timestamp.Add(time.Hour)); due {
		t.Fatal("due with 2 of 2 messages, the oldest exactly 1h old")
	}
	if due, _ := b.f.TrimDue("general", first.Timestamp.Add(time.Hour+1)); !due {
		t.Fatal("not due with the oldest message past max_age")
	}
	b.send(b.msg("codex", "three", "claude"))
	if due, _ := b.f.TrimDue("general", first.Timestamp); !due {
		t.Fatal("not due with 3 messages over max_messages 2")
	}
	if due, _ := b.f.TrimDue("nochannel", first.Timestamp); due {
		t.Fatal("due for an unknown channel")
	}
}

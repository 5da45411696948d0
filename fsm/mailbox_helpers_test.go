package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

// mbox applies mailbox commands to a fresh state machine one entry at a
// time, at increasing indexes and times.
type mbox struct {
	t   *testing.T
	f   *FSM
	idx uint64
	ts  int64
}

func newMbox(t *testing.T) *mbox {
	t.Helper()
	f, _ := openTemp(t)
	return &mbox{t: t, f: f, ts: baseTS}
}

func opEntry(tb testing.TB, index uint64, ts int64, op api.Op, body any) *raft.Log {
	tb.Helper()
	data, err := Encode(op, ts, body)
	if err != nil {
		tb.Fatalf("Encode %s: %v", op, err)
	}
	return &raft.Log{Type: raft.LogCommand, Index: index, Term: 1, Data: data}
}

// apply applies one command and returns its result.
func (b *mbox) apply(op api.Op, body any) any {
	b.t.Helper()
	b.idx++
	b.ts += 1000
	return applyOne(b.f, opEntry(b.t, b.idx, b.ts, op, body))
}

// ok applies a command that must succeed.
func (b *mbox) ok(op api.Op, body any) any {
	b.t.Helper()
	r := b.apply(op, body)
	if err, isErr := r.(error); isErr {
		b.t.Fatalf("%s %+v: %v", op, body, err)
	}
	return r
}

func (b *mbox) register(id, role string, caps ...string) *api.Agent {
	b.t.Helper()
	a, ok := b.ok(api.OpRegisterAgent, api.RegisterAgentCommand{ID: id, Role: role, Capabilities: caps}).(*api.Agent)
	if !ok {
		b.t.Fatalf("register %s: result is not an *Agent", id)
	}
	return a
}

// msg is a valid message from from to to with text; id from the counter.
func (b *mbox) msg(from, text string, to ...string) api.Message {
	m := testMessage(fmt.Sprintf("msg-20261121-103000-%s-%08x", from, b.idx+1), "general", text)
	m.From, m.To = from, to
	return m
}

func (b *mbox) send(m api.Message) *SendResult {
	b.t.Helper()
	return mustSendResult(b.t, b.ok(api.OpSend, api.SendCommand{Message: m}))
}

func (b *mbox) sendErr(m api.Message) error {
	b.t.Helper()
	return mustError(b.t, b.apply(api.OpSend, api.SendCommand{Message: m}))
}

func (b *mbox) counts(agent string) api.InboxCounts {
	b.t.Helper()
	c, err := b.f.InboxCounts(agent)
	if err != nil {
		b.t.Fatalf("InboxCounts(%s): %v", agent, err)
	}
	return c
}

func (b *mbox) inbox(agent string, q api.InboxQuery) api.InboxPage {
	b.t.Helper()
	p, err := b.f.Inbox(agent, q)
	if err != nil {
		b.t.Fatalf("Inbox(%s, %+v): %v", agent, q, err)
	}
	return p
}

func (b *mbox) receipts(id string) map[string]api.Receipt {
	b.t.Helper()
	r, err := b.f.Receipts(id)
	if err != nil {
		b.t.Fatalf("Receipts(%s): %v", id, err)
	}
	out := map[string]api.Receipt{}
	for _, x := range r.Receipts {
		out[x.Agent] = x
	}
	return out
}

// auditLines renders the whole trail.
func (b *mbox) auditLines() []string {
	b.t.Helper()
	p, err := b.f.Audit(0, api.MaxPageLimit)
	if err != nil {
		b.t.Fatal(err)
	}
	var out []string
	for _, e := range p.Events {
		out = append(out, e.Line())
	}
	return out
}

// seqs lists the seqs of an inbox page.
func seqs(p api.InboxPage) []uint64 {
	out := []uint64{}
	for _, e := range p.Messages {
		out = append(out, e.Seq)
	}
	return out
}

// dumpWithout is dump without the meta bucket and the named buckets.
func dumpWithout(tb testing.TB, f *FSM, buckets ...string) string {
	tb.Helper()
	var keep []string
	for line := range strings.Lines(dataDump(tb, f)) {
		skip := false
		for _, b := range buckets {
			if strings.HasPrefix(line, b+" ") {
				skip = true
			}
		}
		if !skip {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "")
}

package fsm

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

// mailboxLog builds n entries of the mailbox ops from a fixed seed:
// registrations (some re-registering under another role), unregistrations
// (some of unknown agents), sends to every addressing form with mentions
// and replies, read marks of one message or up to a seq (some refused),
// strict_senders switched on and off, and a rules document set and
// cleared. Proposer clocks jump back and forth.
func mailboxLog(tb testing.TB, seed uint64, n int) []*raft.Log {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x5deece66d))
	agents := []string{"alice", "bob", "carol", "engineer_1", "engineer_2", "tina", "rex"}
	roles := []string{"reviewer", "engineer", "tester"}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	var sent []string
	var logs []*raft.Log
	for i := range n {
		idx := uint64(i + 1)
		ts := baseTS + int64(idx)*1000 + rng.Int64N(20000) - 10000
		add := func(op api.Op, body any) { logs = append(logs, opEntry(tb, idx, ts, op, body)) }
		switch k := rng.IntN(100); {
		case k < 15:
			add(api.OpRegisterAgent, api.RegisterAgentCommand{ID: pick(agents), Role: pick(roles), Capabilities: []string{pick([]string{"go", "review"})}})
		case k < 19:
			add(api.OpUnregisterAgent, api.UnregisterAgentCommand{ID: pick(append(agents, "ghost"))})
		case k < 65:
			to := []string{pick([]string{"alice", "zed", "all", "*", "role:reviewer", "role:tester", "engineer_*", "[ab]*", "qa_*"})}
			if rng.IntN(3) == 0 {
				to = append(to, pick(agents))
			}
			from := pick(append(agents, "codex", "stranger"))
			m := testMessage(fmt.Sprintf("msg-20261121-103000-%s-%08x", from, idx), pick([]string{"general", "ops"}),
				fmt.Sprintf("@%s text %d", pick(agents), idx))
			m.From, m.To = from, to
			m.Priority = api.Priorities[rng.IntN(len(api.Priorities))]
			if len(sent) > 0 && rng.IntN(3) == 0 {
				m.InReplyTo = sent[rng.IntN(len(sent))]
			}
			sent = append(sent, m.ID)
			add(api.OpSend, api.SendCommand{Message: m})
		case k < 80:
			c := api.MarkReadCommand{Agent: pick(append(agents, "zed", "nobody"))}
			if len(sent) > 0 && rng.IntN(2) == 0 {
				c.ID = sent[rng.IntN(len(sent))]
			} else {
				c.Upto = idx - uint64(rng.IntN(int(idx)))
			}
			add(api.OpMarkRead, c)
		case k < 85:
			add(api.OpSetConfig, api.SetConfigCommand{Key: "strict_senders", Value: json.RawMessage(fmt.Sprint(rng.IntN(3) == 0))})
		case k < 90:
			if rng.IntN(2) == 0 {
				add(api.OpSetRules, rulesTesterReviewer)
			} else {
				add(api.OpSetRules, api.SetRulesCommand{Clear: true})
			}
		default:
			// A retry of an earlier send.
			if len(logs) > 0 {
				prev := logs[rng.IntN(len(logs))]
				logs = append(logs, &raft.Log{Type: raft.LogCommand, Index: idx, Term: 1, Data: prev.Data})
			} else {
				logs = append(logs, &raft.Log{Type: raft.LogNoop, Index: idx, Term: 1})
			}
		}
	}
	return logs
}

// renderResult renders any apply result for comparison.
func renderResult(r any) string {
	if err, ok := r.(error); ok {
		return errorString(err)
	}
	if sr, ok := r.(*SendResult); ok {
		return fmt.Sprintf("%s dup=%t", mustMarshal(sr), sr.Duplicate)
	}
	return fmt.Sprintf("%T %s", r, mustMarshal(r))
}

func mustMarshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "unmarshalable: " + err.Error()
	}
	return string(b)
}

func TestMailboxDeterministicAcrossBatchSplits(t *testing.T) {
	const n = 600
	logs := mailboxLog(t, 7, n)
	apply := func(sizes func() int) (*FSM, []string) {
		f, _ := openTemp(t)
		return f, applyChunksWith(f, logs, sizes, renderResult)
	}
	singles, resSingles := apply(func() int { return 1 })
	rng := rand.New(rand.NewPCG(3, 9))
	random, resRandom := apply(func() int { return 1 + rng.IntN(50) })
	whole, resWhole := apply(func() int { return n })

	// The log must reach every path, or equal dumps say little.
	counts := map[string]int{}
	for _, r := range resSingles {
		switch {
		case strings.Contains(r, `"blocked":[`):
			counts["partly blocked sends"]++
		case strings.Contains(r, "the rules block every recipient"):
			counts["blocked sends"]++
		case strings.Contains(r, "strict_senders is on"):
			counts["strict refusals"]++
		case strings.Contains(r, "matches no agent"):
			counts["addressing refusals"]++
		case strings.HasSuffix(r, "dup=true"):
			counts["duplicates"]++
		case strings.HasPrefix(r, `{"id"`):
			counts["sends"]++
		case strings.Contains(r, `"marked":0`):
			counts["marks of nothing"]++
		case strings.Contains(r, "MarkReadResult"):
			counts["marks"]++
		case strings.Contains(r, "apply mark_read") && strings.Contains(r, "not found"):
			counts["refused marks"]++
		case strings.Contains(r, "apply unregister_agent") && strings.Contains(r, "not found"):
			counts["refused unregisters"]++
		case strings.HasPrefix(r, "*api.Agent"):
			counts["agent changes"]++
		}
	}
	t.Logf("paths: %v", counts)
	for _, what := range []string{"partly blocked sends", "blocked sends", "strict refusals", "addressing refusals",
		"duplicates", "sends", "marks", "refused marks", "refused unregisters", "agent changes"} {
		if counts[what] == 0 {
			t.Errorf("the generated log has no %s (%v)", what, counts)
		}
	}
	for i := range resSingles {
		if resSingles[i] != resRandom[i] || resSingles[i] != resWhole[i] {
			t.Errorf("entry %d: results differ:\nsingles %s\nrandom  %s\nwhole   %s", i+1, resSingles[i], resRandom[i], resWhole[i])
		}
	}
	want := dump(t, singles)
	if dump(t, random) != want || dump(t, whole) != want {
		t.Errorf("Dump differs between batch splits")
	}

	// Counts stay exact: every agent's counters equal a recount of its
	// inbox.
	for _, a := range []string{"alice", "bob", "carol", "engineer_1", "engineer_2", "tina", "rex", "zed", "codex"} {
		c, err := singles.InboxCounts(a)
		if err != nil {
			continue
		}
		var total, unread uint64
		byPrio := map[api.Priority]uint64{}
		for after := uint64(0); ; {
			p, err := singles.Inbox(a, api.InboxQuery{After: after, Limit: api.MaxPageLimit})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Messages {
				total++
				if !e.Read {
					unread++
					byPrio[e.Priority]++
				}
			}
			if !p.HasMore {
				break
			}
			after = p.NextAfter
		}
		if c.Total != total || c.Unread != unread {
			t.Errorf("%s: counts %+v, recount total %d unread %d", a, c, total, unread)
		}
		for _, p := range api.Priorities {
			if c.UnreadByPriority[p] != byPrio[p] {
				t.Errorf("%s: unread %s = %d, recount %d", a, p, c.UnreadByPriority[p], byPrio[p])
			}
		}
		p, err := singles.Inbox(a, api.InboxQuery{Unread: true, Limit: api.MaxPageLimit})
		if err != nil || uint64(len(p.Messages)) != min(unread, api.MaxPageLimit) {
			t.Errorf("%s: unread page has %d entries, want %d (%v)", a, len(p.Messages), unread, err)
		}
	}
}

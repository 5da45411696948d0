package fsm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

// mixedLog builds n entries at indexes start, start+1, ... from a fixed
// seed: new sends on a few channels, retried sends (duplicates), reused ids
// with other content (conflicts), invalid messages, register_node, raft
// configuration and no-op entries and unknown ops, with proposer clocks that
// jump back and forth.
func mixedLog(tb testing.TB, seed uint64, start uint64, n int) []*raft.Log {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	channels := []string{"general", "agent-os-paper", "ops"}
	senders := []string{"codex", "claude", "gemini"}
	var sent []api.Message
	var logs []*raft.Log
	for i := range n {
		idx := start + uint64(i)
		ts := baseTS + int64(idx)*1000 + rng.Int64N(20000) - 10000
		switch k := rng.IntN(100); {
		case k < 50 || len(sent) == 0:
			from := senders[rng.IntN(len(senders))]
			m := testMessage(fmt.Sprintf("msg-20261121-103000-%s-%08x", from, seed<<20|idx), channels[rng.IntN(len(channels))], fmt.Sprintf("text %d %x", idx, rng.Uint64()))
			m.From = from
			if rng.IntN(4) == 0 {
				m.Tags = []string{"review"}
				m.Priority = "urgent"
			}
			sent = append(sent, m)
			logs = append(logs, sendEntry(tb, idx, ts, m))
		case k < 62:
			logs = append(logs, sendEntry(tb, idx, ts, sent[rng.IntN(len(sent))]))
		case k < 70:
			m := sent[rng.IntN(len(sent))]
			m.Content.Text += " (edited)"
			logs = append(logs, sendEntry(tb, idx, ts, m))
		case k < 76:
			m := testMessage(fmt.Sprintf("bad-%d", idx), "general", "x")
			m.Priority = "whenever"
			logs = append(logs, sendEntry(tb, idx, ts, m))
		case k < 86:
			node := fmt.Sprintf("n%d", rng.IntN(4))
			logs = append(logs, nodeEntry(tb, idx, ts, api.RegisterNodeCommand{
				NodeID:   node,
				APIAddr:  fmt.Sprintf("127.0.0.1:%d", 8000+rng.IntN(1000)),
				RaftAddr: fmt.Sprintf("127.0.0.1:%d", 9000+rng.IntN(1000)),
			}))
		case k < 91:
			logs = append(logs, &raft.Log{Type: raft.LogConfiguration, Index: idx, Term: 1, Data: []byte(fmt.Sprintf("config %d", idx))})
		case k < 96:
			logs = append(logs, &raft.Log{Type: raft.LogNoop, Index: idx, Term: 1})
		default:
			logs = append(logs, rawEntry(tb, idx, Command{V: 1, Op: "frobnicate", TS: ts, Body: []byte(`{}`)}))
		}
	}
	return logs
}

// applyChunks applies logs in batches whose sizes come from sizes (cycled)
// and returns the results in log order, rendered by resultString.
func applyChunks(f *FSM, logs []*raft.Log, sizes func() int) []string {
	return applyChunksWith(f, logs, sizes, resultString)
}

// applyChunksWith is applyChunks with the results rendered by render.
func applyChunksWith(f *FSM, logs []*raft.Log, sizes func() int, render func(any) string) []string {
	var out []string
	for len(logs) > 0 {
		n := min(max(sizes(), 1), len(logs))
		for _, r := range f.ApplyBatch(logs[:n]) {
			out = append(out, render(r))
		}
		logs = logs[n:]
	}
	return out
}

func TestApplyDeterministicAcrossBatchSplits(t *testing.T) {
	logs := mixedLog(t, 1, 1, 400)

	singles, _ := openTemp(t)
	resSingles := applyChunks(singles, logs, func() int { return 1 })

	random, _ := openTemp(t)
	rng := rand.New(rand.NewPCG(42, 7))
	resRandom := applyChunks(random, logs, func() int { return 1 + rng.IntN(40) })

	whole, _ := openTemp(t)
	resWhole := applyChunks(whole, logs, func() int { return len(logs) })

	// The generated log must exercise every path, or the comparison says
	// little.
	var sends, dups, conflicts, invalid, nodes, nils, unknown int
	for i, r := range resSingles {
		switch {
		case strings.HasPrefix(r, "send ") && strings.HasSuffix(r, "dup=true"):
			dups++
		case strings.HasPrefix(r, "send "):
			sends++
		case strings.HasPrefix(r, "node "):
			nodes++
		case r == "nil":
			nils++
		case strings.Contains(r, api.ErrConflict.Error()):
			conflicts++
		case strings.Contains(r, "priority: must be one of"):
			invalid++
		case strings.Contains(r, `unknown op "frobnicate"`):
			unknown++
		default:
			t.Errorf("entry %d: unexpected result %s", i+1, r)
		}
	}
	for name, n := range map[string]int{"sends": sends, "duplicates": dups, "conflicts": conflicts, "invalid": invalid, "nodes": nodes, "non-commands": nils, "unknown ops": unknown} {
		if n == 0 {
			t.Errorf("the generated log has no %s", name)
		}
	}

	for i := range resSingles {
		if resSingles[i] != resRandom[i] || resSingles[i] != resWhole[i] {
			t.Errorf("entry %d: results differ:\nsingles %s\nrandom  %s\nwhole   %s", i+1, resSingles[i], resRandom[i], resWhole[i])
		}
	}
	want := dump(t, singles)
	if got := dump(t, random); got != want {
		t.Errorf("random batches: Dump differs from single entries")
	}
	if got := dump(t, whole); got != want {
		t.Errorf("one batch: Dump differs from single entries")
	}
	if singles.AppliedIndex() != 400 || random.AppliedIndex() != 400 || whole.AppliedIndex() != 400 {
		t.Errorf("AppliedIndex = %d/%d/%d, want 400", singles.AppliedIndex(), random.AppliedIndex(), whole.AppliedIndex())
	}
	if chans, _ := singles.Channels(); len(chans) != 3 {
		t.Errorf("Channels = %+v, want 3", chans)
	}
}

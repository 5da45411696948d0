package fsm

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

// artifactLog builds n entries of the artifact ops and what touches them,
// from a fixed seed: uploads (re-uploads among them) by three agents,
// sends naming stored and unknown artifacts (some twice, some as
// objects), retention policies and trims, admin and retention deletes,
// and the quota and retention settings changed; the entries' times move
// on by up to 90 s so that retention deletes are sometimes due.
func artifactLog(tb testing.TB, seed uint64, n int) []*raft.Log {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0xa5a5a5a5))
	l := &entryLog{tb: tb, ts: baseTS}
	ids := []byte("0123456789")
	agents := []string{"alice", "bob", "carol"}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	l.add(time.Millisecond, api.OpRegisterAgent, api.RegisterAgentCommand{ID: "bob", Role: "engineer"})
	for range n {
		d := time.Duration(rng.Int64N(int64(90 * time.Second)))
		switch k := rng.IntN(100); {
		case k < 30:
			c := ids[rng.IntN(len(ids))]
			l.add(d, api.OpArtifactPut, api.ArtifactPutCommand{ID: artID(c), Name: fmt.Sprintf("f%c.txt", c), ContentType: "text/plain",
				Size: rng.Int64N(300), From: pick(agents)})
		case k < 60:
			var refs []api.ArtifactRef
			for range rng.IntN(4) {
				r := api.ArtifactRef{Ref: artID(ids[rng.IntN(len(ids))])}
				switch rng.IntN(4) {
				case 0:
					r.Name = "named.bin"
				case 1:
					r = api.ArtifactRef{Ref: "shared/context/path.md"}
				}
				refs = append(refs, r)
			}
			m := testMessage(fmt.Sprintf("msg-20261121-103000-alice-%08x", l.idx+1), pick([]string{"files", "general"}), "see")
			m.From, m.To, m.Content.Artifacts = "alice", api.Recipients{"bob"}, refs
			l.add(d, api.OpSend, api.SendCommand{Message: m})
		case k < 68:
			l.add(d, api.OpSetRetention, api.SetRetentionCommand{Channel: pick([]string{"files", "general"}), MaxMessages: uint64(1 + rng.IntN(5))})
		case k < 76:
			l.add(d, api.OpTrim, api.TrimCommand{Channel: pick([]string{"files", "general"})})
		case k < 84:
			l.add(d, api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: artID(ids[rng.IntN(len(ids))]), By: api.SystemSender, Unreferenced: true})
		case k < 90:
			l.add(d, api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: artID(ids[rng.IntN(len(ids))]), By: "admin"})
		case k < 95:
			l.add(d, api.OpSetConfig, api.SetConfigCommand{Key: "artifact_quota_bytes", Value: json.RawMessage(pick([]string{"0", "400", "800"}))})
		default:
			l.add(d, api.OpSetConfig, api.SetConfigCommand{Key: "artifact_retention_seconds", Value: json.RawMessage(pick([]string{"0", "60", "120"}))})
		}
	}
	return l.logs
}

// Artifact ops apply alike in any batch split, every path of them is
// reached, and the state keeps its invariants: each artifact's Refs is
// the number of stored messages recorded after it that name it, and each
// agent's usage the sum of the sizes of the stored artifacts it uploaded.
func TestArtifactsDeterministicAcrossBatchSplits(t *testing.T) {
	const n = 500
	logs := artifactLog(t, 17, n)
	apply := func(sizes func() int) (*FSM, []string) {
		f, _ := openTemp(t)
		return f, applyChunksWith(f, logs, sizes, renderResult)
	}
	singles, resSingles := apply(func() int { return 1 })
	rng := rand.New(rand.NewPCG(5, 11))
	random, resRandom := apply(func() int { return 1 + rng.IntN(40) })
	whole, resWhole := apply(func() int { return len(logs) })

	counts := map[string]int{}
	for _, r := range resSingles {
		switch {
		case strings.Contains(r, `"existed":true`):
			counts["re-uploads"]++
		case strings.Contains(r, `"kept":"referenced`):
			counts["kept referenced"]++
		case strings.Contains(r, `"kept":"not due`):
			counts["kept not due"]++
		case strings.Contains(r, `"kept":"kept forever`):
			counts["kept forever"]++
		case strings.HasPrefix(r, "*api.Artifact"):
			counts["puts and deletes"]++
		case strings.Contains(r, "does not fit"):
			counts["over quota"]++
		case strings.Contains(r, "upload it first"):
			counts["unknown artifact sends"]++
		case strings.Contains(r, "apply artifact_delete") && strings.Contains(r, "not found"):
			counts["deletes of nothing"]++
		case strings.HasPrefix(r, `{"id"`):
			counts["sends"]++
		case strings.Contains(r, `"trimmed":0,`):
		case strings.HasPrefix(r, "*api.TrimResult"):
			counts["trims"]++
		}
	}
	t.Logf("paths: %v", counts)
	for _, what := range []string{"re-uploads", "kept referenced", "kept not due", "kept forever", "puts and deletes", "over quota",
		"unknown artifact sends", "deletes of nothing", "sends", "trims"} {
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

	// The invariants.
	refs := map[string]int64{}
	for after := uint64(0); ; {
		p, err := singles.MessagesAfter(after, api.MaxPageLimit)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Messages {
			ids, _ := messageArtifactIDs(m)
			for _, id := range ids {
				if a, err := singles.Artifact(id); err == nil && a.Index < m.Seq {
					refs[id]++
				}
			}
			after = m.Seq
		}
		if !p.HasMore {
			break
		}
	}
	usage := map[string]int64{}
	p, err := singles.Artifacts(api.ArtifactQuery{Limit: api.MaxPageLimit})
	if err != nil || p.HasMore {
		t.Fatalf("Artifacts: %v (has_more %t)", err, p.HasMore)
	}
	if len(p.Artifacts) == 0 {
		t.Errorf("the log leaves no artifact stored")
	}
	for _, a := range p.Artifacts {
		if a.Refs != refs[a.ID] {
			t.Errorf("%s: refs %d, a recount of the stored messages %d", a.ID, a.Refs, refs[a.ID])
		}
		usage[a.From] += a.Size
	}
	for _, agent := range []string{"alice", "bob", "carol"} {
		if used, _, _ := singles.ArtifactUsage(agent); used != usage[agent] {
			t.Errorf("%s: usage %d, a recount %d", agent, used, usage[agent])
		}
	}
}

package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

// BenchmarkTaskLifecycle applies create, claim and complete of one task
// (three entries, a delegation and a completion reply among them), 64
// tasks per ApplyBatch as raft batches under load. The entries are
// encoded before the timer starts.
func BenchmarkTaskLifecycle(b *testing.B) {
	f, _ := openTemp(b)
	idx := uint64(0)
	ts := baseTS
	entry := func(op api.Op, body any) *raft.Log {
		idx++
		ts += 1000
		return opEntry(b, idx, ts, op, body)
	}
	var setup []*raft.Log
	for _, a := range []api.RegisterAgentCommand{{ID: "boss", Role: "orchestrator"}, {ID: "rita", Role: "reviewer"}, {ID: "rex", Role: "reviewer"}} {
		setup = append(setup, entry(api.OpRegisterAgent, a))
	}
	f.ApplyBatch(setup)
	logs := make([]*raft.Log, 0, 3*b.N)
	for i := range b.N {
		id := fmt.Sprintf("task-bench-%d", i)
		c := api.TaskCreateCommand{ID: id, From: "boss", To: "role:reviewer", Title: "Review change " + id, Description: "Look at the retry logic"}
		c.Normalize(time.Unix(0, baseTS))
		logs = append(logs, entry(api.OpTaskCreate, c))
		fence := idx + 1
		logs = append(logs, entry(api.OpTaskClaim, api.TaskClaimCommand{ID: id, Agent: "rita"}))
		logs = append(logs, entry(api.OpTaskComplete, api.TaskCompleteCommand{ID: id, Agent: "rita", Fence: fence,
			Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "LGTM", ConfidenceScore: ptr(0.97)}}))
	}
	const perBatch = 3 * 64
	b.ReportAllocs()
	b.ResetTimer()
	for rest := logs; len(rest) > 0; {
		n := min(perBatch, len(rest))
		for i, r := range f.ApplyBatch(rest[:n]) {
			if err, ok := r.(error); ok {
				b.Fatalf("entry %d: %v", rest[i].Index, err)
			}
		}
		rest = rest[n:]
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	if p, err := f.Tasks(api.TaskQuery{State: api.TaskSucceeded, Limit: 1}); err != nil || len(p.Tasks) != min(b.N, 1) {
		b.Fatalf("succeeded tasks: %+v, %v", p, err)
	}
}

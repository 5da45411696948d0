package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkTaskLifecycle applies create, claim and complete of one task
// (three entries, a delegation and a completion reply among them), 64
// tasks per ApplyBatch as raft batches under load. The entries are
// encoded before the timer starts.
func BenchmarkTaskLifecycle(b *testing.B) {
	f, _ := openTemp(b)
	idx := uint64(0)
	ts := baseTS
	entry := func(op Op, body any) *raft.Log {
		idx++
		ts += 1000
		return opEntry(b, idx, ts, op, body)
	}
	var setup []*raft.Log
	for _, a := range []RegisterAgentCommand{{ID: "boss", Role: "orchestrator"}, {ID: "rita", Role: "reviewer"}, {ID: "rex", Role: "reviewer"}} {
		setup = append(setup, entry(OpRegisterAgent, a))
	}
	f.ApplyBatch(setup)
	logs := make([]*raft.Log, 0, 3*b.N)
	for i := range b.N {
		id := fmt.Sprintf("task-bench-%d", i)
		c := TaskCreateCommand{ID: id, From: "boss", To: "role:reviewer", Title: "Review change " + id, Description: "Look at the retry logic"}
		c.Normalize(time.Unix(0, baseTS))
		logs = append(logs, entry(OpTaskCreate, c))
		fence := idx + 1
		logs = append(logs, entry(OpTaskClaim, TaskClaimCommand{ID: id, Agent: "rita"}))
		logs = append(logs, entry(OpTaskComplete, TaskCompleteCommand{ID: id, Agent: "rita", Fence: fence,
			Completion: TaskCompletion{Status: TaskStatusSuccess, Result: "LGTM", ConfidenceScore: ptr(0.97)}}))
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
	if p, err := f.Tasks(TaskQuery{State: TaskSucceeded, Limit: 1}); err != nil || len(p.Tasks) != min(b.N, 1) {
		b.Fatalf("succeeded tasks: %+v, %v", p, err)
	}
}

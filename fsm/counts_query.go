package fsm

import (
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// TaskCounts is the number of tasks in each state (every state of
// TaskStates, zero included), counted from the state index without
// decoding a task: a read for the node's metrics at scrape time, never
// called by apply.
func (f *FSM) TaskCounts() (map[api.TaskState]int, error) {
	out := make(map[api.TaskState]int, len(api.TaskStates))
	err := f.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTaskIndex)
		for _, st := range api.TaskStates {
			out[st] = countSeqs(indexSeqsAfter(b, tidxState, string(st), 0))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fsm: task counts: %w", err)
	}
	return out, nil
}

// ApprovalCount is the number of approvals in state st, counted from the
// state index (a read for the node's metrics).
func (f *FSM) ApprovalCount(st api.ApprovalState) (int, error) {
	var n int
	err := f.view(func(tx *bbolt.Tx) error {
		n = countSeqs(indexSeqsAfter(tx.Bucket(bucketApprovalIndex), aidxState, string(st), 0))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("fsm: approval count: %w", err)
	}
	return n, nil
}

// countSeqs drains next and counts what it yielded.
func countSeqs(next func() (uint64, bool)) int {
	n := 0
	for _, ok := next(); ok; _, ok = next() {
		n++
	}
	return n
}

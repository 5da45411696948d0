package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Task returns task id with its history, oldest event first, or a
// *NotFoundError.
func (f *FSM) Task(id string) (*api.Task, error) {
	var t *api.Task
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		if t, err = taskByID(tx, id); err != nil {
			return err
		}
		t.History, err = history(tx, t.Seq)
		return err
	})
	return t, err
}

// Tasks returns a page of tasks in creation order, with Seq > q.After,
// that match every filter of q, without their history. Limit ≤ 0 means
// DefaultPageLimit; it is capped at MaxPageLimit.
//
// It reads one index range and the tasks in it: that of a state still
// live (waiting, ready, running) when q names one, else claimed_by, to,
// from, a final state, in that order of preference (the likely smaller
// set first); with no filter, the tasks themselves. The other filters
// are checked on each task read, so a page costs the tasks of that range
// it skips as well as those it returns.
func (f *FSM) Tasks(q api.TaskQuery) (api.TaskPage, error) {
	page := api.TaskPage{Tasks: []*api.Task{}}
	if err := q.Validate(); err != nil {
		return page, err
	}
	var kind byte
	var name string
	switch {
	case q.State != "" && !q.State.Final():
		kind, name = tidxState, string(q.State)
	case q.ClaimedBy != "":
		kind, name = tidxClaimedBy, q.ClaimedBy
	case q.To != "":
		kind, name = tidxTo, q.To
	case q.From != "":
		kind, name = tidxFrom, q.From
	case q.State != "":
		kind, name = tidxState, string(q.State)
	}
	match := func(t *api.Task) bool {
		return (q.State == "" || t.State == q.State) && (q.To == "" || t.To == q.To) &&
			(q.From == "" || t.From == q.From) && (q.ClaimedBy == "" || t.ClaimedBy == q.ClaimedBy)
	}
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		page.Tasks, page.HasMore, err = seqPage(taskSeqsAfter(tx, kind, name, q.After), q.Limit,
			func(seq uint64) (*api.Task, error) { return getTask(tx, seq) }, match)
		if err != nil {
			return fmt.Errorf("fsm: tasks: %w", err)
		}
		return nil
	})
	return page, err
}

// taskSeqsAfter returns a function yielding, in order, the seqs above
// after of the tasks under kind ‖ name ‖ 0x00 in task_index, or (kind 0)
// of every task.
func taskSeqsAfter(tx *bbolt.Tx, kind byte, name string, after uint64) func() (uint64, bool) {
	if kind == 0 {
		return keySeqsAfter(tx.Bucket(bucketTasks), nil, after)
	}
	return indexSeqsAfter(tx.Bucket(bucketTaskIndex), kind, name, after)
}

// indexSeqsAfter yields, in order, the seqs above after under kind ‖ name
// ‖ 0x00 in an index bucket b (task_index, approval_index).
func indexSeqsAfter(b *bbolt.Bucket, kind byte, name string, after uint64) func() (uint64, bool) {
	k := taskIndexKey(kind, name, 0)
	return keySeqsAfter(b, k[:len(k)-8], after)
}

// keySeqsAfter yields, in order, the seqs above after of the keys prefix ‖
// seq (8) in b; a nil prefix: b's keys are seqs.
func keySeqsAfter(b *bbolt.Bucket, prefix []byte, after uint64) func() (uint64, bool) {
	c := b.Cursor()
	start := append(slices.Clip(prefix), u64(after+1)...)
	var k []byte
	first := true
	return func() (uint64, bool) {
		if first {
			k, _ = c.Seek(start)
			first = false
		} else {
			k, _ = c.Next()
		}
		if k == nil || !bytes.HasPrefix(k, prefix) || len(k) != len(prefix)+8 {
			return 0, false
		}
		return binary.BigEndian.Uint64(k[len(prefix):]), true
	}
}

// TaskEvents returns the task updates of the entries after index after,
// oldest first: every task an entry changed, in the order of its seq, with
// the event (Event.Seq is the entry's index). A page holds whole entries
// only: it ends at the first entry boundary where it holds limit updates
// or more (≤ 0: DefaultPageLimit; capped at MaxPageLimit), so it may hold
// more when one entry (a tick, a cascade) changed many tasks, and resuming
// after the last update's Event.Seq loses nothing. It reads the updates it
// returns and, per update, the task's unchanging fields.
func (f *FSM) TaskEvents(after uint64, limit int) (api.TaskUpdatePage, error) {
	page := api.TaskUpdatePage{Updates: []api.TaskUpdate{}}
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		page.Updates, page.HasMore, err = objectEvents(tx, bucketTaskEvents, after, limit,
			func(seq, index uint64, v []byte) (api.TaskUpdate, error) { return taskUpdate(tx, seq, index, v) })
		if err != nil {
			return fmt.Errorf("fsm: task events: %w", err)
		}
		return nil
	})
	return page, err
}

// taskUpdate builds the update of task seq at entry index from its stored
// snapshot v: the event from the history, the snapshot with the fields it
// leaves out (description, context: they never change) from the task.
func taskUpdate(tx *bbolt.Tx, seq, index uint64, v []byte) (api.TaskUpdate, error) {
	var u api.TaskUpdate
	var snap api.Task
	if err := json.Unmarshal(v, &snap); err != nil {
		return u, fmt.Errorf("task at seq %d, index %d: decode: %w", seq, index, err)
	}
	cur, err := getTask(tx, seq)
	if err != nil {
		return u, err
	}
	snap.Description, snap.Context = cur.Description, cur.Context
	if u.Event, err = eventAt(tx, seq, index); err != nil {
		return u, err
	}
	u.Task = &snap
	return u, nil
}

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

// countSeqs drains next and counts what it yielded.
func countSeqs(next func() (uint64, bool)) int {
	n := 0
	for _, ok := next(); ok; _, ok = next() {
		n++
	}
	return n
}

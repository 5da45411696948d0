package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Tasks in the state file: typed accessors over the task buckets, so the
// task commands and queries read and write tasks, events and index
// entries rather than byte layouts.
//
//	tasks:        task seq (8) → Task JSON (no history)
//	task_ids:     task id → task seq (8) ‖ SHA-256 of the create command (32)
//	task_index:   one kind byte, then:
//	    's' state ‖ 0x00 ‖ seq (8)          tasks by state
//	    't' to ‖ 0x00 ‖ seq (8)             tasks by assignee, as written
//	    'f' from ‖ 0x00 ‖ seq (8)           tasks by creator
//	    'c' claimed_by ‖ 0x00 ‖ seq (8)     tasks by claimant
//	    'd' dependency seq (8) ‖ seq (8)    the tasks that wait on a task
//	    'l' lease end (8, Unix ns) ‖ seq (8) running tasks by lease end
//	task_history: task seq (8) ‖ entry index (8) → TaskEvent JSON
//	task_events:  entry index (8) ‖ task seq (8) → the task after the entry
//	              (Task JSON without history, description and context)
//
// A task's seq is the index of the entry that created it, so tasks, the
// 's', 't', 'f', 'c' ranges and task_history's per-task range all come in
// creation order. An entry makes at most one event per task (a transition
// is decided once per entry), which is what keys task_history and
// task_events by (task, entry) and (entry, task). Values in the index are
// empty: every key is derived from the Task records and rewritten with
// them (putTask). States, assignees and agent ids never contain 0x00.

// Index key kinds of bucketTaskIndex.
const (
	tidxState     = 's'
	tidxTo        = 't'
	tidxFrom      = 'f'
	tidxClaimedBy = 'c'
	tidxDep       = 'd'
	tidxLease     = 'l'
)

// taskIndexKey is kind ‖ name ‖ 0x00 ‖ seq.
func taskIndexKey(kind byte, name string, seq uint64) []byte {
	k := make([]byte, 0, len(name)+10)
	k = append(k, kind)
	k = append(k, name...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// taskPairKey is kind ‖ a (8) ‖ b (8): the 'd' and 'l' keys, and
// (index, seq) or (seq, index) in task_events and task_history.
func taskPairKey(kind byte, a, b uint64) []byte {
	k := make([]byte, 0, 17)
	if kind != 0 {
		k = append(k, kind)
	}
	k = binary.BigEndian.AppendUint64(k, a)
	return binary.BigEndian.AppendUint64(k, b)
}

// taskKeys is what task_index keys a task by; a transition captures it
// (keysOf) before it changes the task, so putTask can move the keys.
type taskKeys struct {
	state     api.TaskState
	to        string
	from      string
	claimedBy string
	lease     int64 // 0: none
}

func keysOf(t *api.Task) taskKeys {
	k := taskKeys{state: t.State, to: t.To, from: t.From, claimedBy: t.ClaimedBy}
	if t.LeaseExpires != nil {
		k.lease = t.LeaseExpires.UnixNano()
	}
	return k
}

// index writes (put) or deletes (!put) the keys k of task seq.
func (k taskKeys) index(b *bbolt.Bucket, seq uint64, put bool) {
	set := func(key []byte) {
		if put {
			mustPut(b, key, nil)
		} else {
			mustDelete(b, key)
		}
	}
	if k.state != "" {
		set(taskIndexKey(tidxState, string(k.state), seq))
	}
	if k.to != "" {
		set(taskIndexKey(tidxTo, k.to, seq))
	}
	if k.from != "" {
		set(taskIndexKey(tidxFrom, k.from, seq))
	}
	if k.claimedBy != "" {
		set(taskIndexKey(tidxClaimedBy, k.claimedBy, seq))
	}
	if k.lease != 0 {
		set(taskPairKey(tidxLease, uint64(k.lease), seq))
	}
}

// getTask reads the task stored at seq; a record that does not decode
// (a damaged file) is an error, never a panic later.
func getTask(tx *bbolt.Tx, seq uint64) (*api.Task, error) {
	t, err := getRecord[api.Task](tx.Bucket(bucketTasks), seq, "task")
	if err != nil {
		return nil, err
	}
	if t.State == api.TaskRunning && t.LeaseExpires == nil {
		// Every running task has a lease: the commands rely on it.
		return nil, fmt.Errorf("task at seq %d: decode: running without a lease", seq)
	}
	return t, nil
}

// getTaskID reads the task_ids record of task id (readIDRecord): where
// the task is stored and the SHA-256 of the create that made it.
func getTaskID(tx *bbolt.Tx, id string) (idRecord, bool) {
	return readIDRecord(tx.Bucket(bucketTaskIDs), id)
}

// taskByID reads task id, or a *NotFoundError naming it.
func taskByID(tx *bbolt.Tx, id string) (*api.Task, error) {
	return objectByID(tx, bucketTaskIDs, id, getTask, TaskNotFound)
}

// TaskNotFound is the *NotFoundError for task id.
func TaskNotFound(id string) error { return notFound("task %s", id) }

// createSum is the SHA-256 of a create command as applied, so a retry of
// the same create matches and another task under the same id does not.
// The known_names flag is not the task's: a retry through a node of
// another build is the same create.
func createSum(c *api.TaskCreateCommand) [32]byte {
	k := *c
	k.KnownNames = false
	return commandSum(&k, "task "+c.ID, "create")
}

// addTaskID records the id of a new task t (its seq set), created by a
// command hashing to sum, and its dependency keys; putTask writes the rest.
func addTaskID(tx *bbolt.Tx, t *api.Task, sum [32]byte) {
	writeIDRecord(tx.Bucket(bucketTaskIDs), t.ID, idRecord{seq: t.Seq, sum: sum})
	idx := tx.Bucket(bucketTaskIndex)
	for _, d := range t.DependsOn {
		rec, _ := getTaskID(tx, d) // checked by the create
		mustPut(idx, taskPairKey(tidxDep, rec.seq, t.Seq), nil)
	}
}

// putTask writes t after a transition: its record, its index keys moved
// from before (the zero taskKeys for a new task), and the event ev (its
// state set from t) in its history and in the stream's index.
func putTask(tx *bbolt.Tx, before taskKeys, t *api.Task, ev api.TaskEvent) {
	t.Updated = ev.Time
	ev.State = t.State
	data, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("fsm: task %s: encode: %v", t.ID, err))
	}
	mustPut(tx.Bucket(bucketTasks), u64(t.Seq), data)
	if after := keysOf(t); after != before {
		idx := tx.Bucket(bucketTaskIndex)
		before.index(idx, t.Seq, false)
		after.index(idx, t.Seq, true)
	}
	snap := *t
	snap.Description, snap.Context, snap.History = "", nil, nil
	putObjectEvent(tx, bucketTaskHistory, bucketTaskEvents, "task", t.ID, t.Seq, ev.Seq, ev, &snap)
}

// history reads the events of task seq, oldest first.
func history(tx *bbolt.Tx, seq uint64) ([]api.TaskEvent, error) {
	return objectHistory[api.TaskEvent](tx, bucketTaskHistory, "task", seq)
}

// eventAt reads the event of task seq at entry index.
func eventAt(tx *bbolt.Tx, seq, index uint64) (api.TaskEvent, error) {
	return objectEventAt[api.TaskEvent](tx, bucketTaskHistory, "task", seq, index)
}

// firstEvent and lastEvent read the oldest and newest event of task seq.
func firstEvent(tx *bbolt.Tx, seq uint64) (api.TaskEvent, error) { return edgeEvent(tx, seq, true) }
func lastEvent(tx *bbolt.Tx, seq uint64) (api.TaskEvent, error)  { return edgeEvent(tx, seq, false) }

func edgeEvent(tx *bbolt.Tx, seq uint64, first bool) (api.TaskEvent, error) {
	c := tx.Bucket(bucketTaskHistory).Cursor()
	var k []byte
	if first {
		k, _ = c.Seek(u64(seq))
	} else {
		k, _ = c.Seek(u64(seq + 1))
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
	}
	if len(k) != 16 || binary.BigEndian.Uint64(k) != seq {
		return api.TaskEvent{}, fmt.Errorf("task at seq %d: no history", seq)
	}
	return eventAt(tx, seq, binary.BigEndian.Uint64(k[8:]))
}

// dependents lists the seqs of the tasks that depend on task seq, in
// creation order.
func dependents(tx *bbolt.Tx, seq uint64) []uint64 {
	var out []uint64
	prefix := taskPairKey(tidxDep, seq, 0)[:9]
	c := tx.Bucket(bucketTaskIndex).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		out = append(out, binary.BigEndian.Uint64(k[9:]))
	}
	return out
}

// leasesUpTo lists the seqs of the running tasks whose lease ends at or
// before ts, earliest end first.
func leasesUpTo(tx *bbolt.Tx, ts int64) []uint64 {
	return pairSeqsUpTo(tx.Bucket(bucketTaskIndex), tidxLease, ts)
}

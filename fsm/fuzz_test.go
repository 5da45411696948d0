package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// fuzzIndex is the Raft index the fuzzed entry is applied at: right after
// the entries of fuzzBase.
const fuzzIndex = 4

// fuzzBase is the state every FuzzDecodeCommand input is applied to, so
// duplicates, conflicts and re-registrations are reachable: msgID(1) on
// "general", "msg_001" (with a client timestamp) on "ops", node n1.
func fuzzBase(tb testing.TB) []*raft.Log {
	m1 := testMessage(msgID(1), "general", "hello")
	m2 := testMessage("msg_001", "ops", "deploy at noon")
	m2.Timestamp = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	return []*raft.Log{
		sendEntry(tb, 1, baseTS, m1),
		sendEntry(tb, 2, baseTS+1000, m2),
		nodeEntry(tb, 3, baseTS+2000, api.RegisterNodeCommand{NodeID: "n1", APIAddr: "127.0.0.1:7001", RaftAddr: "127.0.0.1:8001"}),
	}
}

// fuzzTemp opens a fresh state file for one fuzz input, in memory
// (/dev/shm) where there is such a directory: each input creates and
// fsyncs a few files, which on a disk stalls the fuzzer for seconds at a
// time once the kernel starts writing back. Applies do not fsync at all.
func fuzzTemp(tb testing.TB) *FSM {
	tb.Helper()
	dir := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "maos-fsm-fuzz-"); err == nil {
			dir = d
			tb.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	if dir == "" {
		dir = tb.TempDir()
	}
	f := openAt(tb, filepath.Join(dir, "state.db"))
	tb.Cleanup(func() { _ = f.Close() })
	f.db.NoSync = true
	return f
}

// fuzzState opens a fresh state file (fuzzTemp) holding fuzzBase.
func fuzzState(tb testing.TB) *FSM {
	tb.Helper()
	f := fuzzTemp(tb)
	for _, l := range fuzzBase(tb) {
		if r := applyOne(f, l); r == nil {
			tb.Fatalf("base entry %d: no result", l.Index)
		} else if err, ok := r.(error); ok {
			tb.Fatalf("base entry %d: %v", l.Index, err)
		}
	}
	return f
}

// metaKeys returns the meta bucket as key → u64 (as int64).
func metaKeys(tb testing.TB, f *FSM) map[string]int64 {
	tb.Helper()
	out := map[string]int64{}
	err := f.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).ForEach(func(k, v []byte) error {
			out[string(k)] = int64(getU64(tx.Bucket(bucketMeta), k))
			return nil
		})
	})
	if err != nil {
		tb.Fatalf("read meta: %v", err)
	}
	return out
}

// FuzzDecodeCommand applies arbitrary bytes as the data of a command entry
// (raft.LogCommand) through ApplyBatch on a state holding fuzzBase. Whatever
// the bytes, apply must:
//   - not panic (the only documented panic, a failed write of the state
//     file, cannot be caused by an entry's content);
//   - return exactly one result: an error value for anything invalid, or
//     the op's result (*SendResult, *NodeInfo) -- never nil for a command;
//   - count the entry as applied (AppliedIndex moves to it) either way;
//   - when the result is an error, leave every data bucket byte for byte as
//     it was, and in meta move only applied_index and (never backwards)
//     last_ts;
//   - when it stored a message, store one that validates at the seq of the
//     entry, and answer a re-application of the same bytes as a duplicate
//     with the same seq and no change;
//   - compute the same result and the same Dump on a second state file
//     (apply reads nothing but the entry and the state);
//   - leave a state that still applies a valid send, with a timestamp not
//     before any it holds.
func FuzzDecodeCommand(f *testing.F) {
	for _, seed := range decodeCommandSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st := fuzzState(t)
		beforeData := dataDump(t, st)
		beforeMeta := metaKeys(t, st)

		entry := func(index uint64) *raft.Log {
			return &raft.Log{Type: raft.LogCommand, Index: index, Term: 2, Data: bytes.Clone(data)}
		}
		results := st.ApplyBatch([]*raft.Log{entry(fuzzIndex)})
		if len(results) != 1 {
			t.Fatalf("%d results for one entry", len(results))
		}
		res := results[0]
		if got := st.AppliedIndex(); got != fuzzIndex {
			t.Fatalf("AppliedIndex = %d after the entry at %d (result %s)", got, fuzzIndex, resultString(res))
		}
		meta := metaKeys(t, st)
		if meta[string(keyAppliedIndex)] != fuzzIndex {
			t.Fatalf("stored applied_index = %d, want %d", meta[string(keyAppliedIndex)], fuzzIndex)
		}
		if meta[string(keyLastTS)] < beforeMeta[string(keyLastTS)] {
			t.Fatalf("last_ts went back from %d to %d", beforeMeta[string(keyLastTS)], meta[string(keyLastTS)])
		}
		for k := range meta {
			if _, ok := beforeMeta[k]; !ok {
				t.Fatalf("the entry added meta key %q", k)
			}
		}
		cmd, decErr := decode(data)
		reapplied := false // the same bytes were applied again at fuzzIndex+1

		switch r := res.(type) {
		case error:
			if got := dataDump(t, st); got != beforeData {
				t.Fatalf("refused entry (%v) changed the state:\nbefore\n%s\nafter\n%s", r, beforeData, got)
			}
		case *SendResult:
			if decErr != nil || cmd.Op != api.OpSend {
				t.Fatalf("a send result %+v for an entry that is not a send (op %q, decode error %v)", r, cmd.Op, decErr)
			}
			checkStoredSend(t, st, r)
			if r.Duplicate {
				if got := dataDump(t, st); got != beforeData {
					t.Fatalf("a duplicate send changed the state:\nbefore\n%s\nafter\n%s", beforeData, got)
				}
				break
			}
			if r.Seq != fuzzIndex {
				t.Fatalf("new message stored at seq %d, want the entry's index %d", r.Seq, fuzzIndex)
			}
			// The same bytes again (a retried proposal) are a duplicate.
			afterFirst := dataDump(t, st)
			again := applyOne(st, entry(fuzzIndex+1))
			reapplied = true
			dup, ok := again.(*SendResult)
			if !ok || !dup.Duplicate || dup.Seq != r.Seq || dup.ID != r.ID || !dup.Timestamp.Equal(r.Timestamp) {
				t.Fatalf("re-applied send = %s, want a duplicate of %s", resultString(again), resultString(r))
			}
			if got := dataDump(t, st); got != afterFirst {
				t.Fatalf("re-applying a send changed the state")
			}
		case *NodeInfo:
			if decErr != nil || cmd.Op != api.OpRegisterNode {
				t.Fatalf("a node result %+v for an entry that is not register_node (op %q, decode error %v)", r, cmd.Op, decErr)
			}
			if r.Index != fuzzIndex || r.NodeID == "" || r.APIAddr == "" {
				t.Fatalf("node result %+v", *r)
			}
			got, err := st.Node(r.NodeID)
			if err != nil || got != *r {
				t.Fatalf("Node(%q) = %+v, %v; apply returned %+v", r.NodeID, got, err, *r)
			}
		case nil:
			t.Fatalf("nil result for a command entry; want an error or the op's result")
		default:
			// Another op's result (set_config, register_agent, ...): the
			// determinism and replay checks below still apply.
		}

		// Deterministic: a second node computes the same.
		other := fuzzState(t)
		if r2 := applyOne(other, entry(fuzzIndex)); resultString(r2) != resultString(res) {
			t.Fatalf("two states, two results: %s vs %s", resultString(res), resultString(r2))
		}
		if reapplied {
			applyOne(other, entry(fuzzIndex+1))
		}
		if a, b := dump(t, st), dump(t, other); a != b {
			t.Fatalf("two states, two dumps:\n%s\nvs\n%s", a, b)
		}

		// Still usable, and time does not go back: a send stamped with an
		// early clock gets a timestamp after every one before it.
		lastTS := metaKeys(t, st)[string(keyLastTS)]
		next := testMessage("msg-fuzz-next-0001", "general", "after the fuzzed entry")
		switch nr := applyOne(st, sendEntry(t, fuzzIndex+2, baseTS, next)).(type) {
		case *SendResult:
			if nr.Duplicate {
				break // the fuzzed entry stored this very message
			}
			ts := nr.Timestamp.UnixNano()
			if ts < lastTS || (ts == lastTS && lastTS != math.MaxInt64) {
				t.Fatalf("send after the fuzzed entry stamped %d, not after the last time %d", ts, lastTS)
			}
		case error:
			if !errors.Is(nr, api.ErrConflict) { // the fuzzed entry took the id
				t.Fatalf("a valid send after the fuzzed entry failed: %v", nr)
			}
		default:
			t.Fatalf("a valid send after the fuzzed entry: %s", resultString(nr))
		}
	})
}

// checkStoredSend checks that the message a send result points at is
// stored, by id and at its seq, and validates as sent.
func checkStoredSend(t *testing.T, st *FSM, r *SendResult) {
	t.Helper()
	stored, err := st.Message(r.ID)
	if err != nil {
		t.Fatalf("send result %+v but Message(%q): %v", r, r.ID, err)
	}
	if stored.Seq != r.Seq || stored.ID != r.ID || !stored.Timestamp.Equal(r.Timestamp) {
		t.Fatalf("send result %+v, stored id %s seq %d at %s", r, stored.ID, stored.Seq, stored.Timestamp)
	}
	c := *stored
	c.Seq = 0
	if err := c.Validate(); err != nil {
		t.Fatalf("stored message does not validate: %v", err)
	}
	page, err := st.ChannelPage(stored.Channel, r.Seq-1, 1)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].ID != r.ID {
		t.Fatalf("channel %s after %d: %+v, %v; want %s", stored.Channel, r.Seq-1, page, err, r.ID)
	}
}

// decodeCommandSeeds are the in-code seeds of FuzzDecodeCommand; the
// committed corpus under testdata/fuzz/FuzzDecodeCommand holds more.
func decodeCommandSeeds(tb testing.TB) [][]byte {
	enc := func(op api.Op, ts int64, body any) []byte {
		b, err := Encode(op, ts, body)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	full := testMessage("msg-20261121-103000-codex-9f3a61c2", "agent-os-paper", "@claude please review")
	full.Title, full.Tags, full.Metadata = "Review", []string{"review"}, json.RawMessage(`{"k":[1,{"a":null}]}`)
	full.Timestamp = time.Date(2026, 11, 21, 10, 30, 0, 123e6, time.UTC)
	dupOfBase := testMessage(msgID(1), "general", "hello")
	conflict := testMessage(msgID(1), "general", "other text")
	invalid := testMessage("msg-x", "general", "x")
	invalid.Priority = "whenever"
	return [][]byte{
		enc(api.OpSend, baseTS+5000, api.SendCommand{Message: testMessage(msgID(2), "general", "fuzz")}),
		enc(api.OpSend, baseTS+5000, api.SendCommand{Message: full}),
		enc(api.OpSend, baseTS-5000, api.SendCommand{Message: dupOfBase}),
		enc(api.OpSend, baseTS+5000, api.SendCommand{Message: conflict}),
		enc(api.OpSend, baseTS+5000, api.SendCommand{Message: invalid}),
		enc(api.OpSend, math.MaxInt64, api.SendCommand{Message: testMessage(msgID(3), "general", "end of time")}),
		enc(api.OpSend, math.MinInt64, api.SendCommand{Message: testMessage(msgID(4), "general", "start of time")}),
		enc(api.OpRegisterNode, baseTS, api.RegisterNodeCommand{NodeID: "n2", APIAddr: "127.0.0.1:7002", RaftAddr: "127.0.0.1:8002"}),
		enc(api.OpRegisterNode, baseTS, api.RegisterNodeCommand{NodeID: strings.Repeat("n", api.MaxIDLen+1), APIAddr: "a:1"}),
		enc(api.OpTaskCreate, baseTS+5000, api.TaskCreateCommand{ID: "task-1", From: "codex", To: "role:reviewer", Title: "fuzz", Priority: api.PriorityNormal,
			TimeoutSeconds: 1, MaxAttempts: 1, Channel: "general", Context: json.RawMessage(`{"a":[1]}`)}),
		enc(api.OpTaskCreate, baseTS+5000, api.TaskCreateCommand{ID: "task-2", From: "codex", To: "claude", Title: "waits", Priority: api.PriorityNormal,
			TimeoutSeconds: 1, MaxAttempts: 1, Channel: "general", DependsOn: []string{"task-none"}}),
		enc(api.OpTaskCreate, baseTS+5000, api.TaskCreateCommand{ID: "task-3", From: api.SystemSender, To: "all", Title: "x"}),
		enc(api.OpTaskClaim, baseTS+5000, api.TaskClaimCommand{ID: "task-1", Agent: "claude"}),
		enc(api.OpTaskComplete, baseTS+5000, api.TaskCompleteCommand{ID: "task-1", Agent: "claude", Fence: 4, Completion: api.TaskCompletion{Status: api.TaskStatusSuccess}}),
		enc(api.OpTick, math.MaxInt64, api.TickCommand{}),
		enc(api.OpApprovalRequest, baseTS+5000, api.ApprovalRequestCommand{ID: "appr-1", From: "codex", Approvers: []string{"claude", "role:lead"}, Quorum: 2,
			Title: "fuzz", Action: json.RawMessage(`{"a":[1,2.50]}`), Priority: api.PriorityNormal, Timeout: api.ApprovalTimeout(time.Second),
			OnTimeout: api.OnTimeoutEscalate, Channel: "general"}),
		enc(api.OpApprovalDecide, baseTS+5000, api.ApprovalDecideCommand{ID: "appr-1", Approver: "claude", Decision: api.DecisionModify,
			ActionHash: "sha256:" + strings.Repeat("0", 64), Action: json.RawMessage(`"x"`)}),
		enc(api.OpApprovalCancel, baseTS+5000, api.ApprovalCancelCommand{ID: "appr-1", From: "codex"}),
		[]byte("\x02\x09task_tick\x02null"),
		[]byte("\x02\x0btask_create\x02{\"id\":\"t\",\"depends_on\":[\"t\"]}"),
		[]byte(`{"v":1,"op":"set_rules","ts":1,"body":{}}`),
		[]byte(`{"v":2,"op":"send","ts":1,"body":{}}`),
		[]byte(`{"v":0,"op":"send","ts":1,"body":{}}`),
		[]byte(`{"v":1,"op":"send","ts":1,"body":null}`),
		[]byte(`{"v":1,"op":"send","ts":1}`),
		[]byte(`{"v":1,"op":"send","ts":1,"body":[1]}`),
		[]byte(`{"v":1,"op":"send","ts":1e3,"body":{}}`),
		[]byte(`{"v":1,"op":"send","ts":1,"body":{"message":{"to":7}}}`),
		[]byte(`{"v":1,"op":"send","ts":1,"body":{"message":{"id":"a","from":"b","channel":"c","to":"d","content":{"text":"\u0000"},"seq":9}}}`),
		[]byte(`{"v":1,"op":"send"`),
		[]byte(``),
		[]byte(`null`),
		[]byte(`{}`),
		[]byte("\xff\xfe\x00"),
	}
}

// FuzzMessageJSON decodes arbitrary bytes as a client's message, normalizes
// and validates it as the API does. It must never panic; a validation
// failure is a *FieldError wrapping ErrInvalid; and a message that
// validates must survive json.Marshal/Unmarshal (what a forwarding node and
// the log do to it) as one that still validates, hashes equal (so a retry
// through another node is a duplicate, not a conflict) and marshals to the
// same bytes -- and the state machine must store it.
func FuzzMessageJSON(f *testing.F) {
	for _, seed := range []string{
		`{"from":"alice","channel":"general","to":["bob"],"content":{"text":"hello"}}`,
		`{"from":"alice","channel":"general","to":"bob","content":{"text":"hello"}}`,
		`{"id":"msg-20261121-103000-codex-9f3a61c2","timestamp":"2026-11-21T10:30:00.123+01:00","channel":"agent-os-paper",
		  "from":"codex","to":["claude","role:reviewer","engineer_*"],"type":"request","title":"Review","priority":"high",
		  "content":{"text":"@claude please review","code":"x := 1","artifacts":["plan.md"]},"tags":["review"],
		  "in_reply_to":"msg-1","thread_id":"msg-0","correlation_id":"task_123","requires_response":true,
		  "visibility":"private","metadata":{ "a" : [1, {"b":null}], "h":"<&>\u2028" }}`,
		`{"from":"alice","channel":"general","to":["bob"],"content":{"text":"hi"},"metadata":null}`,
		`{"from":"alice","channel":"general","to":["bob"],"content":{"text":"hi"},"tags":[],"metadata":{"s":"` + "\xff" + `"}}`,
		`{"from":"alice","channel":"general","to":["bob"],"content":{"text":"` + "\xff\xfe" + `"},"title":"t\u0085"}`,
		`{"FROM":"alice","Channel":"general","to":["bob"],"content":{"text":"case"}}`,
		`{"from":"alice","channel":"general","to":[],"content":{"text":"x"}}`,
		`{"from":"alice","channel":"general","to":["bob"],"content":{"text":"x"},"seq":3}`,
		`{"from":"alice","channel":"general","to":["bob"],"content":{"text":"x"},"timestamp":"0001-01-01T00:00:00Z"}`,
		`{"from":"alice","channel":"general","to":["bob"],"content":{"text":"x"},"timestamp":"9999-12-31T23:59:59.999999999-23:59"}`,
		`{"from":"alice","channel":"general","to":null,"content":{"text":"x"}}`,
		`[]`,
		`null`,
		``,
	} {
		f.Add([]byte(seed))
	}
	now := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		var m api.Message
		if err := json.Unmarshal(data, &m); err != nil {
			return
		}
		m.Normalize(now)
		if err := m.Validate(); err != nil {
			var fe *api.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, api.ErrInvalid) || fe.Field == "" || fe.Reason == "" {
				t.Fatalf("Validate() = %v (%T), want a *FieldError wrapping ErrInvalid", err, err)
			}
			return
		}
		// The API checks the free text too, before it proposes.
		if err := api.CheckText(m.FreeText()); err != nil {
			if !errors.Is(err, api.ErrInvalid) {
				t.Fatalf("CheckText() = %v, want a *FieldError wrapping ErrInvalid", err)
			}
			return
		}
		b, err := json.Marshal(&m)
		if err != nil {
			t.Fatalf("a valid message does not marshal: %v", err)
		}
		var m2 api.Message
		if err := json.Unmarshal(b, &m2); err != nil {
			t.Fatalf("a valid message does not unmarshal from its own JSON %s: %v", b, err)
		}
		if err := m2.Validate(); err != nil {
			t.Fatalf("valid message %s no longer validates after a round trip: %v", b, err)
		}
		h1, err1 := contentHash(&m, false)
		h2, err2 := contentHash(&m2, false)
		if err1 != nil || err2 != nil || h1 != h2 {
			t.Fatalf("content hash differs after a round trip (%v, %v): %s", err1, err2, b)
		}
		if b2, err := json.Marshal(&m2); err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("JSON differs after a round trip:\n%s\n%s (%v)", b, b2, err)
		}

		// What the API accepts, the state machine stores; the same send
		// again is a duplicate at the same seq.
		st := fuzzTemp(t)
		data1, err := Encode(api.OpSend, baseTS, api.SendCommand{Message: m2})
		if err != nil {
			t.Fatalf("encode a valid send: %v", err)
		}
		r := applyOne(st, &raft.Log{Type: raft.LogCommand, Index: 1, Data: data1})
		// The one refusal the API cannot foresee: a role or glob that
		// matches no agent of the (here empty) registry.
		var fe *api.FieldError
		if err, ok := r.(error); ok && errors.As(err, &fe) && strings.HasPrefix(fe.Field, "to[") && strings.Contains(fe.Reason, "matches no agent") {
			return
		}
		res, ok := r.(*SendResult)
		if !ok || res.Seq != 1 || res.ID != m.ID {
			t.Fatalf("apply of a valid send = %s", resultString(r))
		}
		checkStoredSend(t, st, res)
		r = applyOne(st, &raft.Log{Type: raft.LogCommand, Index: 2, Data: data1})
		if dup, ok := r.(*SendResult); !ok || !dup.Duplicate || dup.Seq != 1 {
			t.Fatalf("re-apply of a valid send = %s, want a duplicate of seq 1", resultString(r))
		}
	})
}

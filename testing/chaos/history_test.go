package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

func TestHistoryRecordsConcurrentOps(t *testing.T) {
	h := NewHistory()
	const clients, each = 8, 200
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				handle := h.Invoke(Op{Client: c, Kind: KindSend, Channel: "chaos-0", ID: "x"})
				h.Complete(handle, func(op *Op) {
					if op.Client != c {
						t.Errorf("handle %d completes client %d's op, want client %d", handle, op.Client, c)
					}
					op.Outcome, op.Seq = OK, uint64(i+1)
				})
			}
		}()
	}
	wg.Wait()
	ops := h.Ops()
	if len(ops) != clients*each || h.Len() != len(ops) {
		t.Fatalf("%d ops recorded (Len %d), want %d", len(ops), h.Len(), clients*each)
	}
	for i, op := range ops {
		if op.Outcome != OK || op.Return < op.Invoke {
			t.Fatalf("op %d: %+v", i, op)
		}
		if i > 0 && op.Invoke < ops[i-1].Invoke {
			t.Fatalf("ops not in invoke order at %d", i)
		}
	}
}

func TestHistoryComplete(t *testing.T) {
	h := NewHistory()
	a := h.Invoke(Op{Kind: KindSend, ID: "a", Outcome: OK, Return: 99}) // outcome and return are cleared
	b := h.Invoke(Op{Kind: KindSend, ID: "b"})
	if ops := h.Ops(); ops[a].Outcome != "" || ops[a].Return != 0 || ops[a].Completed() {
		t.Fatalf("in-flight op: %+v", ops[a])
	}
	h.Complete(b, func(op *Op) { op.Err = "boom" }) // no outcome: unknown
	h.Complete(42, func(*Op) { t.Error("fill called for a bad handle") })
	h.Complete(-1, nil)
	ops := h.Ops()
	if ops[b].Outcome != Unknown || !ops[b].Completed() || ops[b].Return < ops[b].Invoke {
		t.Errorf("completed without outcome: %+v", ops[b])
	}
	if ops[a].Completed() {
		t.Errorf("op a completed: %+v", ops[a])
	}
	// Ops is a copy.
	ops[b].ID = "changed"
	if h.Ops()[b].ID != "b" {
		t.Error("Ops returned the history's own slice")
	}
}

func TestAcked(t *testing.T) {
	h := HistoryFromOps([]Op{
		sendUnknown(0, "a", "chaos-0", 0, 10),
		sendOK(0, "a", "chaos-0", 20, 30, 4),
		sendOK(1, "b", "chaos-1", 20, 30, 5),
		sendFail(2, "c", "chaos-1", 20, 30, "no_leader"),
		readOK(3, "chaos-0", 0, 1),
	})
	got := h.Acked()
	if len(got) != 2 || got["a"] != 4 || got["b"] != 5 {
		t.Errorf("Acked() = %v", got)
	}
}

func TestHistoryWriteJSON(t *testing.T) {
	ops := []Op{sendOK(0, "a", "chaos-0", 0, 10, 1), readOK(1, "chaos-0", 20, 30, ent(1, "a"))}
	path := filepath.Join(t.TempDir(), "history.json")
	if err := HistoryFromOps(ops).WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back []Op
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ops) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, ops)
	}
}

package chaos

import (
	"sort"
	"testing"

	"github.com/anishathalye/porcupine"
)

// events turns operations into porcupine's event form.
func events(ops []porcupine.Operation) []porcupine.Event {
	type ev struct {
		t  int64
		ev porcupine.Event
	}
	var evs []ev
	for i, op := range ops {
		evs = append(evs,
			ev{op.Call, porcupine.Event{ClientId: op.ClientId, Kind: porcupine.CallEvent, Value: op.Input, Id: i}},
			ev{op.Return, porcupine.Event{ClientId: op.ClientId, Kind: porcupine.ReturnEvent, Value: op.Output, Id: i}})
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return evs[i].ev.Kind == porcupine.CallEvent && evs[j].ev.Kind == porcupine.ReturnEvent
	})
	out := make([]porcupine.Event, len(evs))
	for i, e := range evs {
		out[i] = e.ev
	}
	return out
}

// TestModelEvents checks the model through porcupine's event interface
// (PartitionEvent) too.
func TestModelEvents(t *testing.T) {
	ops, logs := simulate(2, 4, 2, 200, 3)
	channels := []string{"chaos-0", "chaos-1", "chaos-2"}
	lh := buildLinHistory(ops, channels, logs, "n1")
	model := newModel(lh.logs)
	if !porcupine.CheckEvents(model, events(lh.ops)) {
		t.Fatal("events of a correct history are not linearizable")
	}
	if !porcupine.CheckOperations(model, lh.ops) {
		t.Fatal("operations of a correct history are not linearizable")
	}
	if got := len(model.PartitionEvent(events(lh.ops))); got != len(channels) {
		t.Errorf("%d event partitions, want %d", got, len(channels))
	}
	// A stale read.
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].Kind == KindRead && len(ops[i].Read) > 1 {
			ops[i].Read = ops[i].Read[1:]
			break
		}
	}
	lh = buildLinHistory(ops, channels, logs, "n1")
	model = newModel(lh.logs)
	if porcupine.CheckEvents(model, events(lh.ops)) {
		t.Fatal("events with a stale read are linearizable")
	}
}

// TestMergeSends: attempts of one message with one seq become one op
// spanning the first invoke to the earliest return; other seqs stay apart.
func TestMergeSends(t *testing.T) {
	in := linInput{Kind: linSend, Channel: "chaos-0", ID: "a"}
	op := func(call, ret int64, seq uint64, pending bool) porcupine.Operation {
		return porcupine.Operation{Input: in, Call: call, Return: ret, Output: linOutput{Applied: true, Seq: seq, Pending: pending, Attempts: 1}, Metadata: "m"}
	}
	got := mergeSends([]porcupine.Operation{
		op(10, pendingReturn, 5, true),
		op(30, 40, 5, false),
		op(50, 60, 5, false),
		op(70, 80, 6, false),
	})
	if len(got) != 2 {
		t.Fatalf("%d ops, want 2: %+v", len(got), got)
	}
	m, out := got[0], got[0].Output.(linOutput)
	if m.Call != 10 || m.Return != 40 || out.Seq != 5 || out.Pending || out.Attempts != 3 {
		t.Errorf("merged op %+v, output %+v", m, out)
	}
	if out := got[1].Output.(linOutput); out.Seq != 6 || got[1].Call != 70 || got[1].Return != 80 {
		t.Errorf("op of the other seq %+v", got[1])
	}
	if got := mergeSends([]porcupine.Operation{op(10, pendingReturn, 5, true), op(20, pendingReturn, 5, true)}); len(got) != 1 ||
		got[0].Return != pendingReturn || !got[0].Output.(linOutput).Pending {
		t.Errorf("pending attempts merged into %+v", got)
	}
}

package fsm

import (
	"testing"

	"github.com/maos-project/maos/api"
)

// A no-op changes nothing but the applied index, and leaves the state
// byte for byte as a build that does not know the op leaves it (an
// unknown op, skipped before the clock): builds of both kinds can share a
// log during a rolling upgrade.
func TestNoopAppliesAsAnUnknownOpDoes(t *testing.T) {
	entry := func(op api.Op, idx uint64) []byte {
		data, err := Encode(op, baseTS+int64(idx)*1000+999_999, struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	var dumps [2]string
	for k, op := range []api.Op{api.OpNoop, "op_of_a_later_build"} {
		f, _ := openTemp(t)
		applyOne(f, sendEntry(t, 1, baseTS+1000, testMessage(msgID(1), "general", "before")))
		l := sendEntry(t, 2, 0, testMessage("x", "general", "x"))
		l.Data = entry(op, 2)
		res := applyOne(f, l)
		if op == api.OpNoop && res != nil {
			t.Fatalf("no-op result %v, want nil", res)
		}
		mustSendResult(t, applyOne(f, sendEntry(t, 3, baseTS+3000, testMessage(msgID(3), "general", "after"))))
		if got := f.AppliedIndex(); got != 3 {
			t.Fatalf("%s: applied index %d, want 3", op, got)
		}
		dumps[k] = dump(t, f)
		if op == api.OpNoop {
			l.Index = 4
			applyOne(f, l)
			if a, c := f.AppliedIndex(), f.CommandIndex(); a != 4 || c != 3 {
				t.Fatalf("after a no-op at 4: applied %d, last command %d; want 4 and 3", a, c)
			}
		}
	}
	if dumps[0] != dumps[1] {
		t.Fatalf("state after a no-op differs from state after an unknown op:\n%s\n---\n%s", dumps[0], dumps[1])
	}
}

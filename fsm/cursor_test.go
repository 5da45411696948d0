package fsm

import (
	"errors"
	"testing"

	"github.com/maos-project/maos/api"
)

func TestCursorNeverMovesBack(t *testing.T) {
	b := newMbox(t)
	for _, tt := range []struct{ set, want uint64 }{{5, 5}, {3, 5}, {9, 9}, {9, 9}, {0, 9}} {
		c, ok := b.ok(api.OpSetCursor, api.SetCursorCommand{Agent: "claude", Seq: tt.set}).(*api.Cursor)
		if !ok || c.Seq != tt.want {
			t.Fatalf("set %d: cursor %+v, want %d", tt.set, c, tt.want)
		}
	}
	if c, err := b.f.CursorOf("claude"); err != nil || c.Seq != 9 {
		t.Fatalf("CursorOf = %+v, %v", c, err)
	}
	if c, err := b.f.CursorOf("nobody"); err != nil || c.Seq != 0 {
		t.Fatalf("CursorOf(nobody) = %+v, %v", c, err)
	}
	if err, ok := b.apply(api.OpSetCursor, api.SetCursorCommand{Agent: "Bad Agent", Seq: 1}).(error); !ok || !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("bad agent: %v", err)
	}
}

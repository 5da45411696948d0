package fsm

import (
	"reflect"
	"testing"
)

// The inbox index stores a priority as its byte: the values are part of
// the state file's format and must never move.
func TestPriorityBytesAreFixed(t *testing.T) {
	for _, tc := range []struct {
		p     Priority
		b     byte
		valid bool
	}{
		{PriorityUrgent, 0, true},
		{PriorityHigh, 1, true},
		{PriorityNormal, 2, true},
		{PriorityLow, 3, true},
		{"", 2, false},
		{"Urgent", 2, false},
		{"asap", 2, false},
	} {
		if got := priorityByte(tc.p); got != tc.b {
			t.Errorf("priorityByte(%q) = %d, want %d", tc.p, got, tc.b)
		}
		if got := ValidPriority(tc.p); got != tc.valid {
			t.Errorf("ValidPriority(%q) = %t, want %t", tc.p, got, tc.valid)
		}
	}
	if len(Priorities) != numPriorities {
		t.Fatalf("%d priorities, numPriorities is %d", len(Priorities), numPriorities)
	}
	for i, p := range Priorities {
		if int(priorityByte(p)) != i {
			t.Errorf("Priorities[%d] = %s has byte %d: the list must be in byte order", i, p, priorityByte(p))
		}
	}
	if got, want := PriorityList(), "urgent, high, normal, low"; got != want {
		t.Errorf("PriorityList() = %q, want %q", got, want)
	}
}

// Priority is a defined type: a plain string (a flag, a query parameter)
// is not a priority until converted, so no caller passes one unchecked.
func TestPriorityIsADefinedType(t *testing.T) {
	if typ := reflect.TypeOf(PriorityUrgent); typ == reflect.TypeOf("") || typ.Name() != "Priority" {
		t.Errorf("PriorityUrgent has type %v, want fsm.Priority (not string)", typ)
	}
}

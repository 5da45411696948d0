package fsm

import (
	"reflect"
	"testing"

	"github.com/maos-project/maos/api"
)

// The inbox index stores a priority as its byte: the values are part of
// the state file's format and must never move.
func TestPriorityBytesAreFixed(t *testing.T) {
	for _, tc := range []struct {
		p     api.Priority
		b     byte
		valid bool
	}{
		{api.PriorityUrgent, 0, true},
		{api.PriorityHigh, 1, true},
		{api.PriorityNormal, 2, true},
		{api.PriorityLow, 3, true},
		{"", 2, false},
		{"Urgent", 2, false},
		{"asap", 2, false},
	} {
		if got := priorityByte(tc.p); got != tc.b {
			t.Errorf("priorityByte(%q) = %d, want %d", tc.p, got, tc.b)
		}
		if got := api.ValidPriority(tc.p); got != tc.valid {
			t.Errorf("ValidPriority(%q) = %t, want %t", tc.p, got, tc.valid)
		}
	}
	if len(api.Priorities) != numPriorities {
		t.Fatalf("%d priorities, numPriorities is %d", len(api.Priorities), numPriorities)
	}
	for i, p := range api.Priorities {
		if int(priorityByte(p)) != i {
			t.Errorf("Priorities[%d] = %s has byte %d: the list must be in byte order", i, p, priorityByte(p))
		}
	}
	if got, want := api.PriorityList(), "urgent, high, normal, low"; got != want {
		t.Errorf("PriorityList() = %q, want %q", got, want)
	}
}

// Priority is a defined type: a plain string (a flag, a query parameter)
// is not a priority until converted, so no caller passes one unchecked.
func TestPriorityIsADefinedType(t *testing.T) {
	if typ := reflect.TypeOf(api.PriorityUrgent); typ == reflect.TypeOf("") || typ.Name() != "Priority" {
		t.Errorf("PriorityUrgent has type %v, want api.Priority (not string)", typ)
	}
}

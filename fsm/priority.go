package fsm

import "strings"

// Priority is how urgent a message is: one of PriorityUrgent, PriorityHigh,
// PriorityNormal and PriorityLow. On the wire (JSON, in command bodies as
// in the API) and in a stored message it is the name; in the inbox index
// (an entry's value, an unread entry's value, the order of the unread
// counters) it is its byte (priorityByte), fixed here because the state
// file holds it. A defined type, so a plain string (a flag, a query
// parameter) becomes one only where the code says so.
type Priority string

// The priorities.
const (
	PriorityUrgent Priority = "urgent"
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
	PriorityLow    Priority = "low"
)

// Priorities lists the priorities in the order a watcher serves them, which
// is also the order of their bytes.
var Priorities = []Priority{PriorityUrgent, PriorityHigh, PriorityNormal, PriorityLow}

// numPriorities is len(Priorities), as a constant for array types.
const numPriorities = 4

// ValidPriority reports whether p is one of the four priorities (exactly:
// lower case, no blanks).
func ValidPriority(p Priority) bool {
	switch p {
	case PriorityUrgent, PriorityHigh, PriorityNormal, PriorityLow:
		return true
	}
	return false
}

// priorityByte is p's byte in the state file: urgent 0, high 1, normal 2,
// low 3. A value that is not a priority counts as normal (a stored message
// was validated, so only a damaged one gets there).
func priorityByte(p Priority) byte {
	switch p {
	case PriorityUrgent:
		return 0
	case PriorityHigh:
		return 1
	case PriorityLow:
		return 3
	}
	return 2
}

// PriorityList is the priorities as an error message or a flag's help
// lists them: "urgent, high, normal, low".
func PriorityList() string {
	names := make([]string, len(Priorities))
	for i, p := range Priorities {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

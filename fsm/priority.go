package fsm

import (
	"github.com/maos-project/maos/api"
)

// numPriorities is len(Priorities), as a constant for array types.
const numPriorities = 4

// priorityByte is p's byte in the state file: urgent 0, high 1, normal 2,
// low 3. A value that is not a priority counts as normal (a stored message
// was validated, so only a damaged one gets there).
func priorityByte(p api.Priority) byte {
	switch p {
	case api.PriorityUrgent:
		return 0
	case api.PriorityHigh:
		return 1
	case api.PriorityLow:
		return 3
	}
	return 2
}

package fsm

import (
	"strconv"
	"strings"
)

// Forks (seed 003, "fork - Fork Me"): a message an agent's fork policy
// takes is handled by a temporary agent "A-fork-N", N its slot (1 to the
// agent's max_forks), which answers the sender under its own name and
// tells A what it did. The name is the whole link between a fork and its
// parent: the API lets A's token act as A's forks (transport), and A's
// watcher tells its forks' notes from mail (watcher). Nothing is stored
// about forks beyond what any agent has.

// forkInfix separates a parent's id and a fork's slot.
const forkInfix = "-fork-"

// ForkName is the id of agent's fork in slot n (n ≥ 1): "A-fork-N". It is
// a ValidName only when A is short enough; callers check.
func ForkName(agent string, n int) string {
	return agent + forkInfix + strconv.Itoa(n)
}

// ForkParent returns the agent whose fork name is, and true, when name is
// "A-fork-N" with A a ValidName and N a positive decimal without leading
// zeros; otherwise "", false.
func ForkParent(name string) (string, bool) {
	i := strings.LastIndex(name, forkInfix)
	if i <= 0 {
		return "", false
	}
	parent, slot := name[:i], name[i+len(forkInfix):]
	if slot == "" || slot[0] == '0' || len(slot) > 4 || strings.Trim(slot, "0123456789") != "" || !ValidName(parent) {
		return "", false
	}
	return parent, true
}

// Principal is who name is accountable as: its parent when name is a fork
// ("A-fork-N" → A), else name itself. A token acts as its agent and every
// fork of it (transport's Identity.ActsAs), so what is counted per agent
// against a bound (the artifact quota, the API's send limiter) is counted
// per principal: forks share their parent's.
func Principal(name string) string {
	if p, ok := ForkParent(name); ok {
		return p
	}
	return name
}

// IsForkOf reports whether name is a fork of agent ("A-fork-N").
func IsForkOf(name, agent string) bool {
	p, ok := ForkParent(name)
	return ok && p == agent
}

package fsm

import (
	"github.com/maos-project/maos/api"
)

// Forks (seed 003, "fork - Fork Me"): a message an agent's fork policy
// takes is handled by a temporary agent "A-fork-N", N its slot (1 to the
// agent's max_forks), which answers the sender under its own name and
// tells A what it did. The name is the whole link between a fork and its
// parent: the API lets A's token act as A's forks (transport), and A's
// watcher tells its forks' notes from mail (watcher). Nothing is stored
// about forks beyond what any agent has.

// Principal is who name is accountable as: its parent when name is a fork
// ("A-fork-N" → A), else name itself. A token acts as its agent and every
// fork of it (transport's Identity.ActsAs), so what is counted per agent
// against a bound (the artifact quota, the API's send limiter) is counted
// per principal: forks share their parent's.
func Principal(name string) string {
	if p, ok := api.ForkParent(name); ok {
		return p
	}
	return name
}

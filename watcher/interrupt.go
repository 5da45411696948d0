package watcher

import (
	"context"
	"fmt"

	"github.com/maos-project/maos/api"
)

// Interrupt sends ESC to the terminal pane of agent, one of f's agents with
// delivery tmux. It is the hook maosd gives the API's interrupt endpoint;
// an agent f does not run, or one without a pane, is an error wrapping
// api.ErrNotFound.
func (f *File) Interrupt(ctx context.Context, agent string) error {
	for _, a := range f.Agents {
		if a.ID != agent {
			continue
		}
		if a.Delivery != DeliveryTmux || a.TmuxTarget == "" {
			return fmt.Errorf("watcher: agent %s has no tmux pane (delivery %q): %w", agent, a.Delivery, api.ErrNotFound)
		}
		return InterruptTmux(ctx, a.TmuxTarget)
	}
	return fmt.Errorf("watcher: agent %s is not run by this node's watchers: %w", agent, api.ErrNotFound)
}

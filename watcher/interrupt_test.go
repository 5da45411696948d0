package watcher

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

func TestFileInterruptNeedsAPane(t *testing.T) {
	f := &File{Agents: []AgentConfig{
		{ID: "worker", Delivery: DeliveryCommand},
		{ID: "claude", Delivery: DeliveryTmux, TmuxTarget: "maos-no-such-session-xyz:0.0"},
	}}
	for _, tt := range []struct{ agent, text string }{
		{"worker", "no tmux pane"},
		{"stranger", "not run by this node"},
	} {
		err := f.Interrupt(context.Background(), tt.agent)
		if !errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("Interrupt(%s) = %v, want not found mentioning %q", tt.agent, err, tt.text)
		}
	}
	// A tmux agent goes to tmux, whose refusal names the pane.
	if err := f.Interrupt(context.Background(), "claude"); err == nil || !strings.Contains(err.Error(), "maos-no-such-session-xyz") {
		t.Errorf("Interrupt(claude) = %v, want tmux's error naming the pane", err)
	}
}

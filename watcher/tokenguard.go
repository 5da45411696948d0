package watcher

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// refusalGrace is how long the cluster must refuse an agent's token, with
// no answer accepting it between, before the watcher stops the agent: a
// token created through another node a moment ago may not have been
// applied yet by the node this watcher talks to; a revoked one is refused
// for good.
const refusalGrace = 2 * time.Second

// tokenGuard stops one agent whose token the cluster refuses (revoked, or
// unknown to it): instead of retrying forever, each retry a DENIED audit
// line, the watcher says so once and stops that agent. It is fed every
// answer of the agent's client (transport.Client.WithTokenWatch).
type tokenGuard struct {
	log  *slog.Logger
	stop context.CancelFunc

	mu      sync.Mutex
	since   time.Time // first refusal of the current run of them
	stopped bool
}

func (g *tokenGuard) answer(refused bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	switch {
	case !refused:
		g.since = time.Time{}
	case g.since.IsZero():
		g.since = now
	case !g.stopped && now.Sub(g.since) >= refusalGrace:
		g.stopped = true
		g.log.Error("watcher: the cluster refuses this agent's token (revoked, or unknown to it); stopping this agent: "+
			"give it a valid token (token_file) and start the watcher again", "refused_for", now.Sub(g.since).Round(time.Millisecond))
		g.stop()
	}
}

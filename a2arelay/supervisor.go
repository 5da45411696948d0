package a2arelay

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/watcher"
)

// DefaultPoll is how often a Supervisor lists the registry.
const DefaultPoll = 3 * time.Second

// RelayTimeout bounds one relay run (one attempt of a task): a remote
// task may work for long, while the watcher renews the maos task's claim.
const RelayTimeout = 24 * time.Hour

// Supervisor runs, in one maosd, a watcher for every agent of the
// registry with an A2A remote, whose Runner is a Relay: every node runs
// one, and the agent's lease makes exactly one relay at a time (another
// takes over when its node dies). Agents gone from the registry, or
// registered again without a2a, have their watcher stopped.
type Supervisor struct {
	// Client reaches the node's own API with its admin token.
	Client *client.Client
	// Watcher is the options of the relay watchers (Client, Node,
	// Instance, Logger, Metrics, …); Client is set to Supervisor.Client.
	Watcher watcher.Options
	// Dir holds the relays' artifact files: Dir/<agent>/<task>.
	// Default $TMPDIR/maos-a2arelay.
	Dir string
	// Poll is how often the registry is listed (default DefaultPoll).
	Poll time.Duration
	// Logger gets a line per started and stopped relay.
	Logger *slog.Logger
}

// Run supervises until ctx ends, then stops every relay and returns once
// they stopped. A failed listing is logged and tried again next Poll.
func (s *Supervisor) Run(ctx context.Context) {
	if s.Poll <= 0 {
		s.Poll = DefaultPoll
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Dir == "" {
		s.Dir = filepath.Join(os.TempDir(), "maos-a2arelay")
	}
	s.Watcher.Client = s.Client
	running := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, stop := range running {
			stop()
		}
		wg.Wait()
	}()
	for {
		if agents, err := s.remotes(ctx); err != nil {
			if ctx.Err() == nil {
				s.Logger.Warn("a2arelay: listing the agents failed; trying again", "err", err)
			}
		} else {
			s.reconcile(ctx, agents, running, &wg)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.Poll):
		}
	}
}

// remotes lists the agents with an A2A remote.
func (s *Supervisor) remotes(ctx context.Context) (map[string]api.Agent, error) {
	out := map[string]api.Agent{}
	q := api.AgentQuery{Limit: api.MaxPageLimit}
	for {
		page, err := s.Client.Agents(ctx, q, api.Local)
		if err != nil {
			return nil, err
		}
		for _, a := range page.Agents {
			if a.A2A != nil {
				out[a.ID] = a
			}
		}
		if !page.HasMore || len(page.Agents) == 0 {
			return out, nil
		}
		q.After = page.Agents[len(page.Agents)-1].ID
	}
}

// reconcile starts a relay for each agent of want without one and stops
// those of agents no longer in want.
func (s *Supervisor) reconcile(ctx context.Context, want map[string]api.Agent, running map[string]context.CancelFunc, wg *sync.WaitGroup) {
	for id, stop := range running {
		if _, ok := want[id]; !ok {
			s.Logger.Info("a2arelay: the agent is no A2A remote any more; stopping its relay", "agent", id)
			stop()
			delete(running, id)
		}
	}
	for id, a := range want {
		if _, ok := running[id]; ok {
			continue
		}
		f, err := s.file(a)
		if err != nil {
			s.Logger.Warn("a2arelay: cannot relay this agent", "agent", id, "err", err)
			continue
		}
		rctx, stop := context.WithCancel(ctx)
		running[id] = stop
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Logger.Info("a2arelay: relaying", "agent", id, "url", a.A2A.URL)
			_ = watcher.Run(rctx, f, s.Watcher)
		}()
	}
}

// file is the watcher configuration of agent a's relay: its Relay as
// runner, its record kept (a registration would erase a2a), no channel
// context (the remote gets the task or message alone).
func (s *Supervisor) file(a api.Agent) (*watcher.File, error) {
	relay := &Relay{Agent: a.ID, Client: s.Client, Dir: filepath.Join(s.Dir, a.ID), Logger: s.Logger}
	none := 0
	f := &watcher.File{Agents: []watcher.AgentConfig{{ID: a.ID, Role: a.Role, Runner: relay, KeepRecord: true, Skip: relay.Skip,
		ContextMessages: &none, Timeout: watcher.Duration(RelayTimeout)}}}
	return f, f.Validate()
}

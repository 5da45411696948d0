package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/watcher"
)

// Watcher workload: every node runs Config.Watchers watcher agents (maosd
// --agents) whose model CLI is the stub model; one more client sends
// messages to them through random nodes, each retried by id like the other
// senders; after the faults are healed, every request must get exactly
// one reply.
const (
	// WatcherChannel is the channel of the watcher requests and replies;
	// the agents watch only it.
	WatcherChannel = "chaos-w"
	// WatcherSender sends every request; the replies are addressed to it.
	WatcherSender = "chaos-wc"
	// watcherPrefix starts every request id: chaos-w-{n}.
	watcherPrefix = "chaos-w-"
	// watcherSink is the plain-id recipient of the main workload's messages
	// when watchers run, instead of "all", which would put every one of
	// them into every watcher agent's inbox.
	watcherSink = "chaos-sink"
	// watcherRole is the registry role of the watcher agents.
	watcherRole = "chaos-worker"
	// stubSleep is how long each invocation of the stub model takes, so
	// faults hit invocations in flight.
	stubSleep = "100ms"
	// Pause between two watcher requests.
	minWatcherPause = 50 * time.Millisecond
	maxWatcherPause = 100 * time.Millisecond
	// DefaultWatcherWait bounds the wait, after the faults, until every
	// request has its reply (a paused node's watcher answers late).
	DefaultWatcherWait = 60 * time.Second
)

// WatcherAgentID names the i-th watcher agent of a node: w-n1-0, ...
func WatcherAgentID(node string, i int) string { return fmt.Sprintf("w-%s-%d", node, i) }

// writeAgentFiles writes one --agents file per node into dir and returns
// the NodeArgs that give each node its file, and every agent id.
func writeAgentFiles(dir, stub string, nodes, perNode int) (func(string) []string, []string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("chaos: watcher config: %w", err)
	}
	var agents []string
	files := map[string]string{}
	for k := 1; k <= nodes; k++ {
		node := fmt.Sprintf("n%d", k)
		var b strings.Builder
		b.WriteString("agents:\n")
		for i := 0; i < perNode; i++ {
			id := WatcherAgentID(node, i)
			agents = append(agents, id)
			fmt.Fprintf(&b, "  - id: %s\n    role: %s\n    channels: [%s]\n    command: [%q, \"--sleep\", %q]\n"+
				"    timeout: 30s\n    context_messages: 0\n", id, watcherRole, WatcherChannel, stub, stubSleep)
		}
		name := filepath.Join(dir, "agents-"+node+".yaml")
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
			return nil, nil, fmt.Errorf("chaos: watcher config: %w", err)
		}
		files[node] = name
	}
	return func(id string) []string {
		if f, ok := files[id]; ok {
			return []string{"--agents", f}
		}
		return nil
	}, agents, nil
}

// watcherClient sends requests to random agents until ctx ends; each is
// retried by id (sendOne) and recorded in w's history.
func (w *workload) watcherClient(ctx context.Context, agents []string) {
	r := watcherRNG(w.cfg.Seed)
	for n := 1; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("%s%d", watcherPrefix, n)
		agent := agents[r.IntN(len(agents))]
		w.sendOne(ctx, 0, r, &api.Message{ID: id, Channel: WatcherChannel, From: WatcherSender,
			To: api.Recipients{agent}, Type: "chat", Content: api.Content{Text: "question " + id + " for " + agent}})
		sleepOrDone(ctx, randBetween(r, minWatcherPause, maxWatcherPause))
	}
}

// WatcherCheck is the verdict on the watcher agents: every request (a
// message of WatcherSender to one agent) stored in WatcherChannel has
// exactly one reply (in_reply_to the request), with the id derived from
// agent and request (watcher.ReplyID), on every node; no reply answers
// something that is not a request; every acknowledged request is stored.
type WatcherCheck struct {
	// Agents is the number of watcher agents (all nodes).
	Agents int `json:"agents"`
	// Acked is the number of requests acknowledged OK; Stored how many
	// requests the channel holds (an unknown outcome may be stored too).
	Acked  int `json:"acked"`
	Stored int `json:"stored"`
	// Answered is how many stored requests have a reply; Incidents how
	// many of those replies are incidents (the CLI failed: not a
	// violation, but worth a look).
	Answered  int `json:"answered"`
	Incidents int `json:"incidents"`
	// WaitedFor is how long, after the faults, the replies took to be
	// complete (or the wait ran out).
	WaitedFor time.Duration `json:"waited_for_ns"`
	// Unanswered: stored requests with no reply on some node.
	Unanswered []string `json:"unanswered"`
	// Duplicated: requests with more than one reply on some node.
	Duplicated []string `json:"duplicated"`
	// Orphans: replies of a watcher agent to a message that is not a
	// request, and replies whose id is not the one derived from agent and
	// request.
	Orphans []string `json:"orphans"`
	// Lost: acknowledged requests missing from some node.
	Lost []string `json:"lost"`
	// Notes say where each finding was seen.
	Notes []string `json:"notes"`
}

// OK reports whether every request got exactly one reply and nothing else.
func (c *WatcherCheck) OK() bool {
	return len(c.Unanswered) == 0 && len(c.Duplicated) == 0 && len(c.Orphans) == 0 && len(c.Lost) == 0
}

// watcherView is what one read of WatcherChannel shows.
type watcherView struct {
	requests map[string]*api.Message   // by id
	replies  map[string][]*api.Message // by in_reply_to
	orphans  []string
}

func readWatcherChannel(ctx context.Context, cl *client.Client, cons api.Consistency) (*watcherView, error) {
	v := &watcherView{requests: map[string]*api.Message{}, replies: map[string][]*api.Message{}}
	var after uint64
	for page := 0; ; page++ {
		if page >= maxPages {
			return nil, fmt.Errorf("chaos: read %s: more than %d pages", WatcherChannel, maxPages)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		p, err := cl.ChannelPage(rctx, WatcherChannel, after, PageLimit, cons)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("chaos: read %s after %d: %w", WatcherChannel, after, err)
		}
		for _, m := range p.Messages {
			after = m.Seq
			switch {
			case m.From == WatcherSender:
				v.requests[m.ID] = m
			case m.InReplyTo != "":
				v.replies[m.InReplyTo] = append(v.replies[m.InReplyTo], m)
			default:
				v.orphans = append(v.orphans, m.ID)
			}
		}
		if !p.HasMore || len(p.Messages) == 0 {
			return v, nil
		}
	}
}

// pending lists the stored requests without a reply and the acknowledged
// ones not stored.
func (v *watcherView) pending(acked map[string]uint64) []string {
	var out []string
	for id := range v.requests {
		if len(v.replies[id]) == 0 {
			out = append(out, id)
		}
	}
	for id := range acked {
		if v.requests[id] == nil {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// waitReplies polls strong reads through the live nodes until every stored
// and every acknowledged request has a reply, or wait has passed; it
// returns how long it waited. Call it after the faults are healed and the
// load stopped.
func waitReplies(ctx context.Context, c *harness.Cluster, hw *History, wait time.Duration) (time.Duration, error) {
	start := time.Now()
	acked := hw.Acked()
	i := 0
	err := harness.WaitForCtx(ctx, wait, "every watcher request to have its reply", func() error {
		live := c.Live()
		if len(live) == 0 {
			return errors.New("no live node")
		}
		i++
		v, err := readWatcherChannel(ctx, live[i%len(live)].Client(), api.Strong)
		if err != nil {
			return err
		}
		if p := v.pending(acked); len(p) > 0 {
			return fmt.Errorf("%d requests without a reply: %s", len(p), idList(p))
		}
		return nil
	})
	return time.Since(start), err
}

// CheckWatchers reads WatcherChannel from every node (local reads: call it
// once the nodes converged) and checks the replies against the requests
// and the acknowledged sends of hw (see checkWatcherViews).
func CheckWatchers(ctx context.Context, nodes []*harness.Node, hw *History, agents []string) (*WatcherCheck, error) {
	names := make([]string, len(nodes))
	views := make([]*watcherView, len(nodes))
	for i, n := range nodes {
		v, err := readWatcherChannel(ctx, n.Client(), api.Local)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.ID, err)
		}
		names[i], views[i] = n.ID, v
	}
	return checkWatcherViews(names, views, hw.Acked(), len(agents)), nil
}

// checkWatcherViews checks what each node (names[i]) shows (views[i])
// against the acknowledged requests: each stored request has exactly one
// reply, from its addressee, with the derived id; every reply answers a
// request; every acknowledged request is stored.
func checkWatcherViews(names []string, views []*watcherView, acked map[string]uint64, agents int) *WatcherCheck {
	res := &WatcherCheck{Agents: agents, Acked: len(acked), Unanswered: []string{}, Duplicated: []string{},
		Orphans: []string{}, Lost: []string{}, Notes: []string{}}
	unanswered, duplicated, orphans, lost := idSet{}, idSet{}, idSet{}, idSet{}
	note := func(format string, args ...any) {
		if len(res.Notes) < 40 {
			res.Notes = append(res.Notes, fmt.Sprintf(format, args...))
		}
	}
	for k, v := range views {
		name := names[k]
		for id := range acked {
			if v.requests[id] == nil {
				lost[id] = true
				note("%s: acknowledged request %s is not stored", name, id)
			}
		}
		if k == 0 {
			res.Stored = len(v.requests)
		}
		for id, q := range v.requests {
			rs := v.replies[id]
			switch {
			case len(rs) == 0:
				unanswered[id] = true
				note("%s: request %s (seq %d, to %v) has no reply", name, id, q.Seq, q.To)
				continue
			case len(rs) > 1:
				duplicated[id] = true
				var ids []string
				for _, r := range rs {
					ids = append(ids, fmt.Sprintf("%s from %s at seq %d", r.ID, r.From, r.Seq))
				}
				note("%s: request %s has %d replies: %s", name, id, len(rs), strings.Join(ids, "; "))
			}
			for _, r := range rs {
				if len(q.To) != 1 || r.From != q.To[0] || r.ID != watcher.ReplyID(q.To[0], q) {
					orphans[r.ID] = true
					note("%s: reply %s from %s to request %s (to %v) is not the reply the addressee derives", name, r.ID, r.From, id, q.To)
				}
			}
			if k == 0 {
				res.Answered++
				if rs[0].Type == "incident" {
					res.Incidents++
					note("%s: request %s was answered with an incident: %s", name, id, firstLine(rs[0].Content.Text))
				}
			}
		}
		for id, rs := range v.replies {
			if v.requests[id] != nil {
				continue
			}
			for _, r := range rs {
				orphans[r.ID] = true
				note("%s: reply %s from %s answers %s, which is no request", name, r.ID, r.From, id)
			}
		}
		for _, id := range v.orphans {
			orphans[id] = true
			note("%s: %s in %s is neither a request nor a reply", name, id, WatcherChannel)
		}
	}
	res.Unanswered, res.Duplicated, res.Orphans, res.Lost = unanswered.sorted(), duplicated.sorted(), orphans.sorted(), lost.sorted()
	return res
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// text is the report's watcher section.
func (c *WatcherCheck) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "watchers: %d agents; requests acked %d, stored %d, answered %d (%d incidents) within %s\n",
		c.Agents, c.Acked, c.Stored, c.Answered, c.Incidents, roundMS(c.WaitedFor))
	for _, l := range []struct {
		name string
		ids  []string
	}{{"unanswered", c.Unanswered}, {"answered twice", c.Duplicated}, {"orphan replies", c.Orphans}, {"lost requests", c.Lost}} {
		fmt.Fprintf(&b, "  %s: %s\n", l.name, idList(l.ids))
	}
	for _, n := range c.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

// watcherRNG is the watcher client's rng, apart from the other clients'.
func watcherRNG(seed int64) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 0x77617463)) }

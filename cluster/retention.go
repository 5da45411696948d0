package cluster

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

// trimInterval is how often the leader applies the channels' retention
// policies. A trim is a proposed command, so every node removes the same
// messages; its time is the entry's, never a node's clock.
var trimInterval = time.Minute

// trimLoop proposes a trim for every channel with a retention policy that
// has something to trim, once per trimInterval, while this node leads. A channel with more to trim than
// one entry removes (fsm.MaxTrimPerEntry) is trimmed again at once, up to a
// bound, so a large backlog drains without one huge batch.
func (n *Node) trimLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(trimInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.shutdown:
			return
		case <-tick.C:
		}
		if n.raft.State() != raft.Leader {
			continue
		}
		policies, err := n.fsm.Retentions()
		if err != nil {
			n.logger.Warn("retention: list policies", "error", err)
			continue
		}
		for _, p := range policies {
			// Propose only when something is due, so an idle policy costs
			// no log entry a minute.
			if due, err := n.fsm.TrimDue(p.Channel, n.cfg.Now()); err == nil && due {
				n.trimChannel(p.Channel)
			}
		}
		n.deleteDueArtifacts()
	}
}

func (n *Node) trimChannel(channel string) {
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RetryTimeout)
		raw, err := n.Apply(ctx, api.OpTrim, api.TrimCommand{Channel: channel})
		cancel()
		if err != nil {
			n.logger.Warn("retention: trim", "channel", channel, "error", err)
			return
		}
		var res api.TrimResult
		if json.Unmarshal(raw, &res) != nil || !res.More {
			if res.Trimmed > 0 {
				n.logger.Info("retention: trimmed", "channel", channel, "messages", res.Trimmed, "up_to_seq", res.UpToSeq)
			}
			return
		}
	}
}

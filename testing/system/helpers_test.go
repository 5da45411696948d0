package system

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/transport/openapitest"
)

// taggedBatch is n messages from → to in channel ch, with ids PREFIX-TAG-000,
// PREFIX-TAG-001, ... and texts "TAG 0", "TAG 1", ...: the load of the
// fault tests, tagged by the phase that sends it.
func taggedBatch(prefix, ch, from, to, tag string, n int) []*api.Message {
	out := make([]*api.Message, 0, n)
	for i := range n {
		out = append(out, &api.Message{ID: fmt.Sprintf("%s-%s-%03d", prefix, tag, i), Channel: ch, From: from,
			To: api.Recipients{to}, Content: api.Content{Text: fmt.Sprintf("%s %d", tag, i)}})
	}
	return out
}

// readTimeout bounds one read request of a check.
const readTimeout = 20 * time.Second

// maxPages bounds the paging loop of readChannel.
const maxPages = 10_000

// readChannel pages through GET /v1/channels/{ch}/messages (after, limit
// 1000) until has_more is false and returns every message in order. It
// fails if seqs do not strictly increase.
func readChannel(cl *client.Client, ch string, cons api.Consistency) ([]*api.Message, error) {
	var out []*api.Message
	var after uint64
	for page := 0; page < maxPages; page++ {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		p, err := cl.ChannelPage(ctx, ch, after, api.MaxPageLimit, cons)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read %s after %d (%s): %w", ch, after, cons, err)
		}
		for _, m := range p.Messages {
			if m.Seq <= after {
				return nil, fmt.Errorf("read %s (%s): seq %d in a page after %d", ch, cons, m.Seq, after)
			}
			after = m.Seq
			out = append(out, m)
		}
		if !p.HasMore {
			return out, nil
		}
		if len(p.Messages) == 0 {
			return nil, fmt.Errorf("read %s (%s): has_more after %d but an empty page", ch, cons, after)
		}
	}
	return nil, fmt.Errorf("read %s (%s): more than %d pages", ch, cons, maxPages)
}

// sent is what a test sent: the message and, once a node acknowledged it,
// the seq it was given.
type sent struct {
	msg   *api.Message
	seq   uint64 // 0 if never acknowledged
	acked bool
}

// checkReport counts what checkStored saw.
type checkReport struct {
	perChannel map[string]int // messages stored per channel
	unacked    int            // stored messages whose send was never acknowledged
}

// checkStored reads channels from every node of c, with local and with
// strong reads, and checks against sends (by id):
//   - every acknowledged message is stored exactly once, at the seq its
//     acknowledgement gave, with the channel, sender and text sent;
//   - every stored message is one the test sent (no phantom, no
//     duplicate under another seq);
//   - the seq -> id sequence of each channel is the same on every node and
//     at both levels.
//
// Call it after c.WaitConverged, so local reads see every entry.
func checkStored(t *testing.T, c *harness.Cluster, channels []string, sends map[string]*sent) checkReport {
	t.Helper()
	return checkStoredOn(t, c.Nodes(), channels, sends)
}

// checkStoredOn is checkStored on the given nodes.
func checkStoredOn(t *testing.T, nodes []*harness.Node, channels []string, sends map[string]*sent) checkReport {
	t.Helper()
	rep := checkReport{perChannel: map[string]int{}}
	type view struct {
		where string
		seqs  []uint64
		ids   []string
	}
	for _, ch := range channels {
		var ref *view
		for _, n := range nodes {
			for _, cons := range []api.Consistency{api.Local, api.Strong} {
				where := fmt.Sprintf("%s/%s", n.ID, cons)
				msgs, err := readChannel(n.Client(), ch, cons)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				v := &view{where: where}
				seen := make(map[string]uint64, len(msgs))
				for _, m := range msgs {
					v.seqs = append(v.seqs, m.Seq)
					v.ids = append(v.ids, m.ID)
					if prev, dup := seen[m.ID]; dup {
						t.Errorf("%s: channel %s holds %s twice: seq %d and %d", where, ch, m.ID, prev, m.Seq)
						continue
					}
					seen[m.ID] = m.Seq
					s, ok := sends[m.ID]
					switch {
					case !ok:
						t.Errorf("%s: channel %s holds %s (seq %d), which the test never sent", where, ch, m.ID, m.Seq)
						continue
					case s.acked && s.seq != m.Seq:
						t.Errorf("%s: %s stored at seq %d, its send was acknowledged with seq %d", where, m.ID, m.Seq, s.seq)
					}
					if m.Channel != s.msg.Channel || m.From != s.msg.From || m.Content.Text != s.msg.Content.Text {
						t.Errorf("%s: %s stored as channel %q from %q text %q, sent as %q from %q text %q", where, m.ID,
							m.Channel, m.From, m.Content.Text, s.msg.Channel, s.msg.From, s.msg.Content.Text)
					}
				}
				for id, s := range sends {
					if s.acked && s.msg.Channel == ch {
						if _, ok := seen[id]; !ok {
							t.Errorf("%s: acknowledged %s (seq %d) is missing from channel %s", where, id, s.seq, ch)
						}
					}
				}
				if ref == nil {
					ref = v
					rep.perChannel[ch] = len(msgs)
					for id := range seen {
						if !sends[id].acked {
							rep.unacked++
						}
					}
					continue
				}
				if !slices.Equal(ref.seqs, v.seqs) || !slices.Equal(ref.ids, v.ids) {
					t.Errorf("channel %s differs: %s has %d messages, %s has %d; first difference: %s",
						ch, ref.where, len(ref.ids), v.where, len(v.ids), firstDiff(ref.seqs, ref.ids, v.seqs, v.ids))
				}
			}
		}
	}
	return rep
}

// firstDiff describes where two seq->id sequences first differ.
func firstDiff(as []uint64, ai []string, bs []uint64, bi []string) string {
	for i := 0; i < min(len(as), len(bs)); i++ {
		if as[i] != bs[i] || ai[i] != bi[i] {
			return fmt.Sprintf("position %d: #%d %s vs #%d %s", i, as[i], ai[i], bs[i], bi[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other (lengths %d and %d)", len(as), len(bs))
}

// checkByID fetches each of ids with GET /v1/messages/{id} from every node,
// local and strong, and checks its seq against the acknowledgement.
func checkByID(t *testing.T, c *harness.Cluster, ids []string, sends map[string]*sent) {
	t.Helper()
	for _, n := range c.Nodes() {
		for _, cons := range []api.Consistency{api.Local, api.Strong} {
			for _, id := range ids {
				ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
				m, err := n.Client().Message(ctx, id, cons)
				cancel()
				if err != nil {
					t.Errorf("%s/%s: get %s: %v", n.ID, cons, id, err)
					continue
				}
				if want := sends[id].seq; m.Seq != want || m.ID != id {
					t.Errorf("%s/%s: get %s: got %s at seq %d, acknowledged at seq %d", n.ID, cons, id, m.ID, m.Seq, want)
				}
			}
		}
	}
}

// sendAll sends msgs one after the other through random nodes with
// SendWithRetry (with o), each bounded by perMessage, and returns them as acked
// sends. It fails the test if one is not acknowledged.
func sendAll(t *testing.T, c *harness.Cluster, msgs []*api.Message, perMessage time.Duration, o harness.SendOptions) map[string]*sent {
	t.Helper()
	var to []string
	for _, m := range msgs {
		for _, r := range m.To {
			if !slices.Contains(to, r) {
				to = append(to, r)
			}
		}
	}
	registerNames(t, c, o.Nodes, to...)
	out := make(map[string]*sent, len(msgs))
	for _, m := range msgs {
		ctx, cancel := context.WithTimeout(context.Background(), perMessage)
		res, err := c.SendWithRetry(ctx, m, o)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if res.Resp.ID != m.ID || res.Resp.Seq == 0 {
			t.Fatalf("send %s: acknowledged as %+v", m.ID, res.Resp)
		}
		out[m.ID] = &sent{msg: m, seq: res.Resp.Seq, acked: true}
	}
	checkUniqueSeqs(t, out)
	return out
}

// registerNames registers each id (role agent) that a node of nodes (nil:
// the cluster's) does not hold yet, through the first node that takes it:
// a send may name only agents someone answers to. A node's client carries
// the admin token of a secure cluster.
func registerNames(t *testing.T, c *harness.Cluster, nodes []*harness.Node, ids ...string) {
	t.Helper()
	if nodes == nil {
		nodes = c.Nodes()
	}
	for _, id := range ids {
		var err error
		for _, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			if _, err = n.Client().Agent(ctx, id, api.Local); err == nil {
				cancel()
				break
			}
			_, err = n.Client().RegisterAgent(ctx, api.RegisterAgentCommand{ID: id, Role: api.DefaultRole})
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
	}
}

// checkUniqueSeqs fails if two acknowledged sends got the same seq.
func checkUniqueSeqs(t *testing.T, sends map[string]*sent) {
	t.Helper()
	bySeq := map[uint64]string{}
	for id, s := range sends {
		if !s.acked {
			continue
		}
		if other, dup := bySeq[s.seq]; dup {
			t.Errorf("seq %d was acknowledged for both %s and %s", s.seq, other, id)
		}
		bySeq[s.seq] = id
	}
}

// countsLine formats a map of counts sorted by key: "a=1 b=2".
func countsLine(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// checked is a client of n (a node without Security) whose every request
// and answer is held to the API's OpenAPI document (transport/openapitest):
// a misfit fails t.
func checked(t *testing.T, n *harness.Node) *client.Client {
	return client.NewClient(n.Client().Addr(), openapitest.Client(t, client.NewHTTPTransport()))
}

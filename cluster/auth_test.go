package cluster_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/transport"
)

// testAdminToken is the admin bootstrap token of the auth test clusters,
// the same on every node as maosd --admin-token-file requires.
const testAdminToken = "auth-test-admin-token-0123456789abcdef"

// withAuth turns the API's auth on (testAdminToken is the admin token,
// which the node's client carries) and has the node call its peers with
// nodeToken ("" for a node that does not know the cluster's).
func withAuth(nodeToken string) clustertest.Option {
	return func(s *clustertest.Setup) {
		s.Config.AdminToken = nodeToken
		s.Auth = &transport.AuthConfig{AdminToken: testAdminToken}
	}
}

// newAuthCluster starts n nodes with auth on, the first bootstrapping and
// the others joining it -- which itself needs the admin token between
// nodes.
func newAuthCluster(t testing.TB, n int) *clustertest.Cluster {
	t.Helper()
	return clustertest.New(t, n, withAuth(testAdminToken))
}

// agentClients creates a token for agent (role agent) through the admin
// client of the leader and returns its id with one client per node that
// carries it, once every node has applied the token.
func agentClients(t *testing.T, c *clustertest.Cluster, agent string) (string, []*client.Client) {
	t.Helper()
	tok, err := c.Leader().Client.CreateToken(clustertest.Context(t), agent, string(api.RoleAgent))
	if err != nil {
		t.Fatalf("create token for %s: %v", agent, err)
	}
	if tok.Token == "" || tok.ID == "" || tok.Agent != agent {
		t.Fatalf("created token = %+v; want an id, a secret and agent %s", tok, agent)
	}
	var out []*client.Client
	for _, n := range c.Nodes {
		cl := client.NewClient(n.Addr, nil).WithToken(tok.Token)
		clustertest.WaitFor(t, 5*time.Second, "node "+n.ID()+" to accept the new token", func() bool {
			return tokenAccepted(t, cl)
		})
		out = append(out, cl)
	}
	return tok.ID, out
}

// tokenAccepted reports whether the node of cl authenticates its token: a
// local read any valid token may make succeeds; 401 means not.
func tokenAccepted(t *testing.T, cl *client.Client) bool {
	t.Helper()
	_, err := cl.Channels(clustertest.Context(t), api.Local)
	if err != nil && apiStatus(err) != http.StatusUnauthorized {
		t.Fatalf("read channels on %s: %v", cl.Addr(), err)
	}
	return err == nil
}

func apiStatus(err error) int {
	var apiErr *api.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status
	}
	return 0
}

// A send with an agent's token reaches a follower, which forwards it to
// the leader with the admin token; it commits, and every node holds it.
// Without a token, every node answers 401.
func TestAuthFollowerForwardsAuthenticatedSend(t *testing.T) {
	c := newAuthCluster(t, 3)
	_, clients := agentClients(t, c, "codex")
	f := c.Follower()
	var fc *client.Client
	for i, n := range c.Nodes {
		if n == f {
			fc = clients[i]
		}
	}
	m := clustertest.Msg("codex", "general", "hello through a follower")
	res, err := fc.Send(clustertest.Context(t), m)
	if err != nil {
		t.Fatalf("send through follower %s: %v", f.ID(), err)
	}
	if res.ID != m.ID || res.Seq == 0 {
		t.Fatalf("send = %+v; want id %s with a seq", res, m.ID)
	}
	got, err := c.Leader().Client.Message(clustertest.Context(t), m.ID, api.Strong)
	if err != nil || got.From != "codex" {
		t.Fatalf("strong read of %s on the leader = %+v, %v; want it committed from codex", m.ID, got, err)
	}
	for _, n := range c.Nodes {
		_, err := client.NewClient(n.Addr, nil).Channels(clustertest.Context(t), api.Local)
		if apiStatus(err) != http.StatusUnauthorized {
			t.Errorf("node %s without a token: err = %v; want 401", n.ID(), err)
		}
	}
}

// A body whose from is not the token's agent is refused with 403 by a
// follower and by the leader, and nothing is committed.
func TestAuthImpersonationRefusedOnEveryNode(t *testing.T) {
	c := newAuthCluster(t, 3)
	_, clients := agentClients(t, c, "codex")
	l, f := c.Leader(), c.Follower()
	for i, n := range c.Nodes {
		if n != l && n != f {
			continue
		}
		m := clustertest.Msg("claude", "general", "I am not claude")
		_, err := clients[i].Send(clustertest.Context(t), m)
		if apiStatus(err) != http.StatusForbidden {
			t.Errorf("codex sending as claude through %s: err = %v; want 403", n.ID(), err)
		}
		if _, err := l.Client.Message(clustertest.Context(t), m.ID, api.Strong); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("refused message %s through %s: strong read err = %v; want not found", m.ID, n.ID(), err)
		}
	}
}

// Once a revoke returns (committed), every node refuses the token within
// one second: each node is polled with it until it answers 401.
func TestAuthRevokedTokenRefusedOnEveryNodeWithinOneSecond(t *testing.T) {
	c := newAuthCluster(t, 3)
	// agentClients returns once the token works on every node.
	id, clients := agentClients(t, c, "codex")
	// Revoke through a follower: the call returns once the leader has
	// committed it, and the followers learn it only through the log.
	if err := c.Follower().Client.RevokeToken(clustertest.Context(t), id); err != nil {
		t.Fatalf("revoke %s: %v", id, err)
	}
	deadline := time.Now().Add(time.Second)
	for i, cl := range clients {
		for tokenAccepted(t, cl) {
			if time.Now().After(deadline) {
				t.Fatalf("node %s still accepts token %s more than 1s after the revoke committed", c.Nodes[i].ID(), id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The revoked token stays refused, writes included.
	for i, cl := range clients {
		if _, err := cl.Send(clustertest.Context(t), clustertest.Msg("codex", "general", "after revoke")); apiStatus(err) != http.StatusUnauthorized {
			t.Errorf("send with the revoked token through %s: err = %v; want 401", c.Nodes[i].ID(), err)
		}
	}
}

// An agent token cannot run cluster operations on any node: snapshot, join
// and token management answer 403.
func TestAuthAgentTokenCannotCallAdminEndpoints(t *testing.T) {
	c := newAuthCluster(t, 3)
	_, clients := agentClients(t, c, "codex")
	for i, cl := range clients {
		id := c.Nodes[i].ID()
		if _, err := cl.Snapshot(clustertest.Context(t)); apiStatus(err) != http.StatusForbidden {
			t.Errorf("snapshot on %s with an agent token: err = %v; want 403", id, err)
		}
		err := cl.Join(clustertest.Context(t), api.JoinRequest{NodeID: "intruder", RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"})
		if apiStatus(err) != http.StatusForbidden {
			t.Errorf("join on %s with an agent token: err = %v; want 403", id, err)
		}
		if _, err := cl.CreateToken(clustertest.Context(t), "codex", string(api.RoleAdmin)); apiStatus(err) != http.StatusForbidden {
			t.Errorf("token create on %s with an agent token: err = %v; want 403", id, err)
		}
	}
	if n := c.Leader().Voters(); n != 3 {
		t.Errorf("voters after the refused joins = %d; want 3", n)
	}
}

// A node that does not hold the cluster's admin token cannot join it: the
// join is refused (401) at once, not retried until the deadline.
func TestAuthJoinWithoutAdminTokenRefused(t *testing.T) {
	c := newAuthCluster(t, 1)
	// JoinVia retries what is not final until its 30 s context ends, and
	// then wraps only the text of the last error: a 401 here means the
	// refusal was final at once.
	_, err := clustertest.StartJoin(t, "n9", filepath.Join(t.TempDir(), "n9"), "", []string{c.Nodes[0].Addr}, withAuth(""))
	if apiStatus(err) != http.StatusUnauthorized {
		t.Fatalf("join without the admin token: err = %v; want 401", err)
	}
	if n := c.Nodes[0].Voters(); n != 1 {
		t.Errorf("voters after the refused join = %d; want 1", n)
	}
}

// An admin token the peers would refuse as malformed (too short, or with
// characters a bearer header cannot carry) is refused at Open, naming it,
// before the data dir is created.
func TestAuthConfigRefusesBadAdminToken(t *testing.T) {
	for _, tok := range []string{"short", "0123456789abcdef 0123", "0123456789abcdef!<>"} {
		dir := filepath.Join(t.TempDir(), "data")
		cfg := clustertest.Config("n1", dir, "127.0.0.1:7070")
		cfg.AdminToken = tok
		n, err := cluster.Open(cfg)
		if err == nil {
			n.Close()
			t.Errorf("Open with admin token %q succeeded; want it refused", tok)
			continue
		}
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != "AdminToken" || !strings.Contains(err.Error(), "AdminToken") {
			t.Errorf("Open with admin token %q: err = %v; want it to name the admin token", tok, err)
		}
		if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
			t.Errorf("Open with admin token %q created the data dir (stat: %v)", tok, serr)
		}
	}
}

// A token created or revoked through a follower takes effect on that
// follower by the time the call returns: the follower answers only once it
// has applied what the leader committed.
func TestAuthTokenChangesHoldAtOnceOnTheNodeThatServedThem(t *testing.T) {
	c := newAuthCluster(t, 3)
	f := c.Follower()
	for i := range 5 {
		tok, err := f.Client.CreateToken(clustertest.Context(t), fmt.Sprintf("agent%d", i), string(api.RoleAgent))
		if err != nil {
			t.Fatal(err)
		}
		cl := client.NewClient(f.Addr, nil).WithToken(tok.Token)
		if !tokenAccepted(t, cl) {
			t.Fatalf("follower %s refused token %s right after creating it", f.ID(), tok.ID)
		}
		if err := f.Client.RevokeToken(clustertest.Context(t), tok.ID); err != nil {
			t.Fatal(err)
		}
		if tokenAccepted(t, cl) {
			t.Fatalf("follower %s accepted token %s right after revoking it", f.ID(), tok.ID)
		}
	}
}

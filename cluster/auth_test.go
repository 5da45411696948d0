package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// testAdminToken is the admin bootstrap token of the auth test clusters,
// the same on every node as maosd --admin-token-file requires.
const testAdminToken = "auth-test-admin-token-0123456789abcdef"

// startAuthNode is startNode with auth on: the API requires bearer tokens
// (testAdminToken is the admin one) and the node calls its peers with
// adminToken ("" to start one that does not know it). The node's client
// carries the admin token.
func startAuthNode(t testing.TB, id, dir, adminToken string, join []string) (*testNode, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	cfg := testConfig(id, dir, ln.Addr().String())
	cfg.AdminToken = adminToken
	node, err := Open(cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("open %s: %v", id, err)
	}
	tn := &testNode{Node: node, t: t, id: id, dir: dir, api: ln.Addr().String(), ln: ln,
		client: transport.NewClient(ln.Addr().String(), nil).WithToken(testAdminToken)}
	tn.srv = &http.Server{Handler: transport.NewServer(node, transport.ServerOptions{
		Logger: cfg.Logger, Auth: &transport.AuthConfig{AdminToken: testAdminToken},
	})}
	go tn.srv.Serve(ln)
	t.Cleanup(tn.stop)
	if len(join) == 0 {
		if err := node.Bootstrap(); err != nil {
			t.Fatalf("bootstrap %s: %v", id, err)
		}
		return tn, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return tn, node.JoinVia(ctx, join)
}

// newAuthCluster starts n nodes with auth on, the first bootstrapping and
// the others joining it -- which itself needs the admin token between
// nodes.
func newAuthCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	base := t.TempDir()
	for i := range n {
		var join []string
		if i > 0 {
			join = []string{c.nodes[0].api}
		}
		id := fmt.Sprintf("n%d", i+1)
		tn, err := startAuthNode(t, id, filepath.Join(base, id), testAdminToken, join)
		if err != nil {
			t.Fatalf("join %s: %v", id, err)
		}
		c.nodes = append(c.nodes, tn)
	}
	c.waitReady()
	return c
}

// agentClients creates a token for agent (role agent) through the admin
// client of the leader and returns its id with one client per node that
// carries it, once every node has applied the token.
func agentClients(t *testing.T, c *testCluster, agent string) (string, []*transport.Client) {
	t.Helper()
	tok, err := c.leader().client.CreateToken(ctxT(t), agent, string(transport.RoleAgent))
	if err != nil {
		t.Fatalf("create token for %s: %v", agent, err)
	}
	if tok.Token == "" || tok.ID == "" || tok.Agent != agent {
		t.Fatalf("created token = %+v; want an id, a secret and agent %s", tok, agent)
	}
	var out []*transport.Client
	for _, n := range c.nodes {
		cl := transport.NewClient(n.api, nil).WithToken(tok.Token)
		waitFor(t, 5*time.Second, "node "+n.id+" to accept the new token", func() bool {
			return tokenAccepted(t, cl)
		})
		out = append(out, cl)
	}
	return tok.ID, out
}

// tokenAccepted reports whether the node of cl authenticates its token: a
// local read any valid token may make succeeds; 401 means not.
func tokenAccepted(t *testing.T, cl *transport.Client) bool {
	t.Helper()
	_, err := cl.Channels(ctxT(t), transport.Local)
	if err != nil && apiStatus(err) != http.StatusUnauthorized {
		t.Fatalf("read channels on %s: %v", cl.Addr(), err)
	}
	return err == nil
}

func apiStatus(err error) int {
	var api *transport.APIError
	if errors.As(err, &api) {
		return api.Status
	}
	return 0
}

// A send with an agent's token reaches a follower, which forwards it to
// the leader with the admin token; it commits, and every node holds it.
// Without a token, every node answers 401.
func TestAuthFollowerForwardsAuthenticatedSend(t *testing.T) {
	c := newAuthCluster(t, 3)
	_, clients := agentClients(t, c, "codex")
	f := c.follower()
	var fc *transport.Client
	for i, n := range c.nodes {
		if n == f {
			fc = clients[i]
		}
	}
	m := msg("codex", "general", "hello through a follower")
	res, err := fc.Send(ctxT(t), m)
	if err != nil {
		t.Fatalf("send through follower %s: %v", f.id, err)
	}
	if res.ID != m.ID || res.Seq == 0 {
		t.Fatalf("send = %+v; want id %s with a seq", res, m.ID)
	}
	got, err := c.leader().client.Message(ctxT(t), m.ID, transport.Strong)
	if err != nil || got.From != "codex" {
		t.Fatalf("strong read of %s on the leader = %+v, %v; want it committed from codex", m.ID, got, err)
	}
	for _, n := range c.nodes {
		_, err := transport.NewClient(n.api, nil).Channels(ctxT(t), transport.Local)
		if apiStatus(err) != http.StatusUnauthorized {
			t.Errorf("node %s without a token: err = %v; want 401", n.id, err)
		}
	}
}

// A body whose from is not the token's agent is refused with 403 by a
// follower and by the leader, and nothing is committed.
func TestAuthImpersonationRefusedOnEveryNode(t *testing.T) {
	c := newAuthCluster(t, 3)
	_, clients := agentClients(t, c, "codex")
	l, f := c.leader(), c.follower()
	for i, n := range c.nodes {
		if n != l && n != f {
			continue
		}
		m := msg("claude", "general", "I am not claude")
		_, err := clients[i].Send(ctxT(t), m)
		if apiStatus(err) != http.StatusForbidden {
			t.Errorf("codex sending as claude through %s: err = %v; want 403", n.id, err)
		}
		if _, err := l.client.Message(ctxT(t), m.ID, transport.Strong); !errors.Is(err, fsm.ErrNotFound) {
			t.Errorf("refused message %s through %s: strong read err = %v; want not found", m.ID, n.id, err)
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
	if err := c.follower().client.RevokeToken(ctxT(t), id); err != nil {
		t.Fatalf("revoke %s: %v", id, err)
	}
	deadline := time.Now().Add(time.Second)
	for i, cl := range clients {
		for tokenAccepted(t, cl) {
			if time.Now().After(deadline) {
				t.Fatalf("node %s still accepts token %s more than 1s after the revoke committed", c.nodes[i].id, id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The revoked token stays refused, writes included.
	for i, cl := range clients {
		if _, err := cl.Send(ctxT(t), msg("codex", "general", "after revoke")); apiStatus(err) != http.StatusUnauthorized {
			t.Errorf("send with the revoked token through %s: err = %v; want 401", c.nodes[i].id, err)
		}
	}
}

// An agent token cannot run cluster operations on any node: snapshot, join
// and token management answer 403.
func TestAuthAgentTokenCannotCallAdminEndpoints(t *testing.T) {
	c := newAuthCluster(t, 3)
	_, clients := agentClients(t, c, "codex")
	for i, cl := range clients {
		id := c.nodes[i].id
		if _, err := cl.Snapshot(ctxT(t)); apiStatus(err) != http.StatusForbidden {
			t.Errorf("snapshot on %s with an agent token: err = %v; want 403", id, err)
		}
		err := cl.Join(ctxT(t), transport.JoinRequest{NodeID: "intruder", RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"})
		if apiStatus(err) != http.StatusForbidden {
			t.Errorf("join on %s with an agent token: err = %v; want 403", id, err)
		}
		if _, err := cl.CreateToken(ctxT(t), "codex", string(transport.RoleAdmin)); apiStatus(err) != http.StatusForbidden {
			t.Errorf("token create on %s with an agent token: err = %v; want 403", id, err)
		}
	}
	if n := c.leader().voterCount(); n != 3 {
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
	_, err := startAuthNode(t, "n9", filepath.Join(t.TempDir(), "n9"), "", []string{c.nodes[0].api})
	if apiStatus(err) != http.StatusUnauthorized {
		t.Fatalf("join without the admin token: err = %v; want 401", err)
	}
	if n := c.nodes[0].voterCount(); n != 1 {
		t.Errorf("voters after the refused join = %d; want 1", n)
	}
}

// An admin token the peers would refuse as malformed (too short, or with
// characters a bearer header cannot carry) is refused at Open, naming it,
// before the data dir is created.
func TestAuthConfigRefusesBadAdminToken(t *testing.T) {
	for _, tok := range []string{"short", "0123456789abcdef 0123", "0123456789abcdef!<>"} {
		dir := filepath.Join(t.TempDir(), "data")
		cfg := testConfig("n1", dir, "127.0.0.1:7070")
		cfg.AdminToken = tok
		n, err := Open(cfg)
		if err == nil {
			n.Close()
			t.Errorf("Open with admin token %q succeeded; want it refused", tok)
			continue
		}
		var fe *FieldError
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
	f := c.follower()
	for i := range 5 {
		tok, err := f.client.CreateToken(ctxT(t), fmt.Sprintf("agent%d", i), string(transport.RoleAgent))
		if err != nil {
			t.Fatal(err)
		}
		cl := transport.NewClient(f.api, nil).WithToken(tok.Token)
		if !tokenAccepted(t, cl) {
			t.Fatalf("follower %s refused token %s right after creating it", f.id, tok.ID)
		}
		if err := f.client.RevokeToken(ctxT(t), tok.ID); err != nil {
			t.Fatal(err)
		}
		if tokenAccepted(t, cl) {
			t.Fatalf("follower %s accepted token %s right after revoking it", f.id, tok.ID)
		}
	}
}

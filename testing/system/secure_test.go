package system

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/testing/testenv"
)

// secureCheckTimeout bounds one request of the security checks.
const secureCheckTimeout = 5 * time.Second

// agentToken is an agent and the secret of the token an admin created
// for it.
type agentToken struct {
	agent, id, secret string
}

// createAgentTokens has the admin create one agent token per name (through
// any node: the write is forwarded to the leader), then waits until every
// node accepts each of them: a node authenticates against its own state,
// so a follower knows a token once it applied the create.
func createAgentTokens(t *testing.T, c *harness.Cluster, agents ...string) []agentToken {
	t.Helper()
	out := make([]agentToken, 0, len(agents))
	for i, a := range agents {
		n := c.Nodes()[i%len(c.Nodes())]
		ctx, cancel := testenv.Context(t)
		tok, err := n.Client().CreateToken(ctx, a, "")
		cancel()
		harness.NoErr(t, err)
		if tok.Agent != a || tok.Role != api.TokenRoleAgent || tok.Token == "" || tok.ID == "" {
			t.Fatalf("create a token for %s through %s: got %+v", a, n.ID, tok)
		}
		out = append(out, agentToken{agent: a, id: tok.ID, secret: tok.Token})
	}
	for _, tok := range out {
		for _, n := range c.Nodes() {
			harness.NoErr(t, harness.WaitFor(10*time.Second, fmt.Sprintf("%s to accept %s's new token", n.ID, tok.agent), func() error {
				return probeToken(n, tok)
			}))
		}
	}
	return out
}

// probeToken lists the channels on n with tok's secret, a request any
// valid token may make.
func probeToken(n *harness.Node, tok agentToken) error {
	ctx, cancel := context.WithTimeout(context.Background(), secureCheckTimeout)
	defer cancel()
	_, err := n.Client().WithToken(tok.secret).Channels(ctx, api.Local)
	return err
}

// startAgentLoad starts workers senders like startLoad, except that
// worker w sends as tokens[w%len(tokens)] with that agent's own token, on
// channel "secure-<agent>".
func startAgentLoad(c *harness.Cluster, tokens []agentToken, workers, maxEach int, perMessage time.Duration) *loadGen {
	g := newLoadGen(c, maxEach, nil, perMessage)
	g.agents = tokens
	g.start(workers)
	return g
}

// TestSecureClusterKillLeaderUnderLoad runs TestKillLeaderUnderLoad's
// scenario on a cluster with --auth, TLS (API and Raft) and a gossip key:
// two agents send with their own tokens over https through random nodes
// while the leader is SIGKILLed and restarted from its data dir; every
// acknowledged send must be stored exactly once on every node. Then, on
// every node, the restarted one included: impersonation is 403, a request
// without a token and a revoked token are 401, plain http and a client
// that does not trust the cluster CA get nothing, and the Raft port
// refuses a peer without a certificate.
func TestSecureClusterKillLeaderUnderLoad(t *testing.T) {
	begin := time.Now()
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, Secure: true})
	sec := c.Security()
	if sec == nil {
		t.Fatal("a Secure cluster has no Security")
	}
	tokens := createAgentTokens(t, c, "alice", "bob")
	alice, bob := tokens[0], tokens[1]
	channels := []string{"secure-alice", "secure-bob"}
	registerNames(t, c, nil, "sink") // whom the load's messages are to
	g := startAgentLoad(c, tokens, loadWorkers, loadMaxEach, loadPerMessage)
	killLeaderUnderLoad(t, c, g, channels, loadStep, 30)
	for kind, n := range g.errKinds {
		if kind == api.CodeUnauthorized || kind == api.CodeForbidden {
			t.Errorf("%d send attempts with a valid agent token were refused with %s", n, kind)
		}
	}

	checkImpersonationRefused(t, c, alice, bob)
	checkNoTokenRefused(t, c)
	checkTransportSecurity(t, c, sec)
	checkRevocation(t, c, alice, bob)
	t.Logf("secure kill-leader test took %s", time.Since(begin).Round(time.Millisecond))
}

// wantAPIError fails unless err is an API error with status and code.
func wantAPIError(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var apiErr *api.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != status || apiErr.Code != code {
		t.Errorf("%s: got %v, want %d %s", what, err, status, code)
	}
}

// checkNotStored fails if any node stores a message with id.
func checkNotStored(t *testing.T, c *harness.Cluster, id string) {
	t.Helper()
	for _, n := range c.Nodes() {
		ctx, cancel := context.WithTimeout(context.Background(), secureCheckTimeout)
		m, err := n.Client().Message(ctx, id, api.Strong)
		cancel()
		if !errors.Is(err, api.ErrNotFound) {
			t.Errorf("%s: a refused send %s: get returned %+v, %v; want not found", n.ID, id, m, err)
		}
	}
}

// checkImpersonationRefused sends as a with b's token, and reads a's inbox
// with b's token, through every node: both are 403, and nothing is stored.
func checkImpersonationRefused(t *testing.T, c *harness.Cluster, a, b agentToken) {
	t.Helper()
	var refused []string
	for _, n := range c.Nodes() {
		cl := n.Client().WithToken(b.secret)
		id := "impersonation-via-" + n.ID
		ctx, cancel := context.WithTimeout(context.Background(), secureCheckTimeout)
		_, err := cl.Send(ctx, &api.Message{ID: id, Channel: "secure-" + a.agent, From: a.agent,
			To: api.Recipients{"sink"}, Content: api.Content{Text: "not really " + a.agent}})
		cancel()
		wantAPIError(t, fmt.Sprintf("%s: send as %s with %s's token", n.ID, a.agent, b.agent), err, http.StatusForbidden, api.CodeForbidden)
		ctx, cancel = context.WithTimeout(context.Background(), secureCheckTimeout)
		_, err = cl.InboxCounts(ctx, a.agent, api.Local)
		cancel()
		wantAPIError(t, fmt.Sprintf("%s: read %s's inbox with %s's token", n.ID, a.agent, b.agent), err, http.StatusForbidden, api.CodeForbidden)
		refused = append(refused, id)
	}
	for _, id := range refused {
		checkNotStored(t, c, id)
	}
}

// checkNoTokenRefused reads and sends without a token on every node: 401.
func checkNoTokenRefused(t *testing.T, c *harness.Cluster) {
	t.Helper()
	for _, n := range c.Nodes() {
		cl := n.Client().WithToken("")
		ctx, cancel := context.WithTimeout(context.Background(), secureCheckTimeout)
		_, err := cl.Channels(ctx, api.Local)
		cancel()
		wantAPIError(t, n.ID+": list channels without a token", err, http.StatusUnauthorized, api.CodeUnauthorized)
	}
}

// checkTransportSecurity checks, on every node, that the API answers
// https to a client that trusts the cluster CA and nothing to plain http
// nor to a client that trusts other roots, and that the Raft port takes a
// TLS peer with a certificate from the CA and refuses one without.
func checkTransportSecurity(t *testing.T, c *harness.Cluster, sec *harness.Security) {
	t.Helper()
	other, err := harness.NewSecurity(t.TempDir())
	harness.NoErr(t, err)
	otherTLS, err := other.ClientTLS()
	harness.NoErr(t, err)
	goodTLS, err := sec.ClientTLS()
	harness.NoErr(t, err)
	pf, err := sec.NodeFiles("probe")
	harness.NoErr(t, err)
	peer, err := tls.LoadX509KeyPair(pf.Cert, pf.Key)
	harness.NoErr(t, err)
	clients := map[string]*http.Client{
		"plain http": {Timeout: secureCheckTimeout},
		"https with the system roots": {Timeout: secureCheckTimeout,
			Transport: client.NewHTTPTransportTLS(&tls.Config{MinVersion: tls.VersionTLS12})},
		"https with another CA":     {Timeout: secureCheckTimeout, Transport: client.NewHTTPTransportTLS(otherTLS)},
		"https with the cluster CA": {Timeout: secureCheckTimeout, Transport: client.NewHTTPTransportTLS(goodTLS)},
	}
	for _, hc := range clients {
		defer hc.CloseIdleConnections()
	}
	get := func(hc *http.Client, url string) (int, string, error) {
		resp, err := hc.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resp.StatusCode, string(b), nil
	}
	for _, n := range c.Nodes() {
		// /healthz needs no token: only the transport can refuse it.
		https, plain := "https://"+n.APIAddr()+"/healthz", "http://"+n.APIAddr()+"/healthz"
		if code, body, err := get(clients["https with the cluster CA"], https); err != nil || code != http.StatusOK {
			t.Errorf("%s: GET %s trusting the cluster CA: %d %q %v; want 200", n.ID, https, code, body, err)
		}
		// Go's TLS server answers a plain-HTTP request with a canned 400.
		if code, body, err := get(clients["plain http"], plain); err == nil && code == http.StatusOK {
			t.Errorf("%s: GET %s over plain http got 200 %q; want no answer from the API", n.ID, plain, body)
		} else if err == nil && (code != http.StatusBadRequest || !strings.Contains(body, "HTTPS")) {
			t.Errorf("%s: GET %s over plain http got %d %q; want the TLS server's 400", n.ID, plain, code, body)
		}
		for _, name := range []string{"https with the system roots", "https with another CA"} {
			code, _, err := get(clients[name], https)
			var unknown x509.UnknownAuthorityError
			if !errors.As(err, &unknown) {
				t.Errorf("%s: GET %s %s: %d, %v; want an unknown-authority verification error", n.ID, https, name, code, err)
			}
		}
		checkRaftNeedsCert(t, n, goodTLS, peer)
	}
}

// checkRaftNeedsCert connects to n's Raft port over TLS trusting the CA:
// with a certificate from the CA (peer) the node keeps the connection
// open, waiting for an RPC; without one it ends it with a certificate
// alert.
func checkRaftNeedsCert(t *testing.T, n *harness.Node, cfg *tls.Config, peer tls.Certificate) {
	t.Helper()
	try := func(withCert bool) error {
		c := cfg.Clone()
		if withCert {
			c.Certificates = []tls.Certificate{peer}
		}
		d := &tls.Dialer{Config: c}
		ctx, cancel := context.WithTimeout(context.Background(), secureCheckTimeout)
		defer cancel()
		conn, err := d.DialContext(ctx, "tcp", n.RaftBindAddr())
		if err != nil {
			return err // a TLS 1.2 server refuses during the handshake
		}
		defer conn.Close()
		// A TLS 1.3 server checks the client's certificate after the
		// client's side of the handshake is done: a refusal arrives on
		// the first read; an accepted peer's read waits for data.
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		var buf [1]byte
		_, err = conn.Read(buf[:])
		return err
	}
	var ne net.Error
	if err := try(true); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%s: Raft port %s with a certificate from the CA: %v; want the connection kept open (a read timeout)", n.ID, n.RaftBindAddr(), err)
	}
	if err := try(false); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("%s: Raft port %s without a client certificate: %v; want a certificate alert", n.ID, n.RaftBindAddr(), err)
	}
}

// checkRevocation revokes a's token and waits until every node refuses
// it (401) for reads and sends; b's token keeps working everywhere.
func checkRevocation(t *testing.T, c *harness.Cluster, a, b agentToken) {
	t.Helper()
	ctx, cancel := testenv.Context(t)
	err := c.Nodes()[0].Client().RevokeToken(ctx, a.id)
	cancel()
	harness.NoErr(t, err)
	revoked := time.Now()
	var slowest time.Duration
	for _, n := range c.Nodes() {
		harness.NoErr(t, harness.WaitFor(10*time.Second, n.ID+" to refuse "+a.agent+"'s revoked token", func() error {
			err := probeToken(n, a)
			if errors.Is(err, api.ErrUnauthorized) {
				return nil
			}
			return fmt.Errorf("list channels with the revoked token: %v", err)
		}))
		slowest = max(slowest, time.Since(revoked))
	}
	for _, n := range c.Nodes() {
		id := "revoked-via-" + n.ID
		ctx, cancel := context.WithTimeout(context.Background(), secureCheckTimeout)
		_, err := n.Client().WithToken(a.secret).Send(ctx, &api.Message{ID: id, Channel: "secure-" + a.agent,
			From: a.agent, To: api.Recipients{"sink"}, Content: api.Content{Text: "after the revoke"}})
		cancel()
		wantAPIError(t, fmt.Sprintf("%s: send with %s's revoked token", n.ID, a.agent), err, http.StatusUnauthorized, api.CodeUnauthorized)
		if err := probeToken(n, b); err != nil {
			t.Errorf("%s: %s's token after %s's was revoked: %v", n.ID, b.agent, a.agent, err)
		}
		checkNotStored(t, c, id)
	}
	// How soon is a figure, not an assertion (timing lives in benchmarks
	// and docs, never in a test that a slow CI machine can fail); slowest
	// is an upper bound: the polls run in turn.
	t.Logf("every node refused the revoked token within %s of the revoke's acknowledgement", slowest.Round(time.Millisecond))
}

// TestSecureClusterPartitionHeal checks that the harness's Raft proxies
// carry mutual-TLS Raft: a secure, partitionable 3-node cluster (each
// node's certificate names its own Raft IP) elects a new leader when the
// old one is cut off, takes sends on the majority, and after the heal
// every node, the old leader included, holds the same log.
func TestSecureClusterPartitionHeal(t *testing.T) {
	begin := time.Now()
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, Secure: true, Partitionable: true})
	tokens := createAgentTokens(t, c, "carol")
	batch := func(tag string, n int) []*api.Message {
		return taggedBatch("sec", "secure-partition", "carol", "sink", tag, n)
	}
	sends := sendAll(t, c, batch("before", 10), 30*time.Second, harness.SendOptions{Token: tokens[0].secret})

	old, err := c.Leader()
	harness.NoErr(t, err)
	majority := c.Others(old)
	before := map[string]harness.ProxyStats{}
	for _, n := range c.Nodes() {
		before[n.ID] = n.Proxy().Stats()
		// The leader dials its followers: their proxies carried its TLS.
		if n != old && before[n.ID].Accepted == 0 {
			t.Errorf("follower %s's Raft proxy accepted no connection: Raft does not go through it", n.ID)
		}
	}
	harness.NoErr(t, c.Partition([]*harness.Node{old}, majority))
	next, err := c.LeaderAmong(30*time.Second, majority...)
	harness.NoErr(t, err)
	during := sendAll(t, c, batch("during", 10), 30*time.Second, harness.SendOptions{Token: tokens[0].secret, Nodes: majority})
	var cut int
	for _, n := range c.Nodes() {
		s := n.Proxy().Stats()
		cut += s.Refused + s.Cut - before[n.ID].Refused - before[n.ID].Cut
	}
	if cut == 0 {
		t.Error("the partition refused or cut no Raft connection")
	}
	harness.NoErr(t, c.Heal())
	index, err := c.WaitConverged()
	harness.NoErr(t, err)
	for id, s := range during {
		sends[id] = s
	}
	checkUniqueSeqs(t, sends)
	rep := checkStored(t, c, []string{"secure-partition"}, sends)
	if got := rep.perChannel["secure-partition"]; got != len(sends) {
		t.Errorf("stored %d messages, sent %d", got, len(sends))
	}
	t.Logf("cut %s off; %s led the majority; %d Raft connections refused or cut; healed, all applied index %d; took %s",
		old.ID, next.ID, cut, index, time.Since(begin).Round(time.Millisecond))
}

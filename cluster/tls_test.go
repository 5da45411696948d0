package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/testing/tlstest"
	"github.com/maos-project/maos/transport"
)

// nodeTLS loads a node's server and client TLS configs from its files.
func nodeTLS(t testing.TB, f tlstest.Files) (server, client *tls.Config) {
	t.Helper()
	files := transport.TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}
	server, err := files.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if client, err = files.ClientConfig(); err != nil {
		t.Fatal(err)
	}
	return server, client
}

// startTLSNode is startNode for a node with TLS: Raft and the node's calls
// to other nodes use server and client, its API serves https with server,
// and tn.client is an agent's client (the CA, no certificate). join empty
// bootstraps; joinCtx bounds JoinVia, whose error is returned.
func startTLSNode(t testing.TB, id, dir string, server, client *tls.Config, join []string, joinTimeout time.Duration) (*testNode, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	cfg := testConfig(id, dir, ln.Addr().String())
	cfg.ServerTLS, cfg.ClientTLS = server, client
	node, err := Open(cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("open %s: %v", id, err)
	}
	agent := client.Clone()
	agent.Certificates = nil
	tn := &testNode{Node: node, t: t, id: id, dir: dir, api: ln.Addr().String(), ln: ln,
		client: transport.NewClientTLS(ln.Addr().String(), &http.Client{Transport: transport.NewHTTPTransportTLS(agent)})}
	tn.srv = &http.Server{Handler: transport.NewServer(node, transport.ServerOptions{Logger: cfg.Logger}), TLSConfig: server,
		ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
	go tn.srv.ServeTLS(ln, "", "")
	t.Cleanup(tn.stop)
	if len(join) == 0 {
		if err := node.Bootstrap(); err != nil {
			t.Fatalf("bootstrap %s: %v", id, err)
		}
		return tn, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	return tn, node.JoinVia(ctx, join)
}

// newTLSCluster starts n nodes with certificates of ca: the first
// bootstraps, the rest join it over https.
func newTLSCluster(t *testing.T, ca *tlstest.CA, n int) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	base := t.TempDir()
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		server, client := nodeTLS(t, ca.Node(t, id))
		var join []string
		if i > 0 {
			join = []string{c.nodes[0].api}
		}
		tn, err := startTLSNode(t, id, filepath.Join(base, id), server, client, join, 30*time.Second)
		if err != nil {
			t.Fatalf("join %s: %v", id, err)
		}
		c.nodes = append(c.nodes, tn)
	}
	c.waitReady()
	return c
}

// A TLS cluster forms (joins over https, Raft over mutual TLS) and a send
// through a follower is forwarded to the leader and committed everywhere.
func TestTLSClusterFormsAndForwards(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	c := newTLSCluster(t, ca, 3)
	f := c.follower()
	m := msg("alice", "general", "over tls")
	res, err := f.client.Send(ctxT(t), m)
	if err != nil {
		t.Fatalf("send through follower %s: %v", f.id, err)
	}
	if res.Seq == 0 {
		t.Fatalf("send answered seq 0")
	}
	for _, n := range c.nodes {
		waitFor(t, 10*time.Second, "the message on "+n.id, func() bool {
			got, err := n.client.Message(context.Background(), m.ID, transport.Local)
			return err == nil && got.Seq == res.Seq
		})
	}
	// A strong read through a follower asks the leader for a read index
	// over https with the node's certificate.
	if _, err := f.client.Message(ctxT(t), m.ID, transport.Strong); err != nil {
		t.Errorf("strong read through follower: %v", err)
	}
	// The Raft port speaks TLS only to holders of a node certificate: a
	// client with the CA but no certificate is refused.
	agentOnly := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	agentOnly.RootCAs.AddCert(ca.Cert)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", c.leader().RaftBindAddr(), agentOnly)
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatalf("a Raft connection without a client certificate was served")
	}
	if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Raft connection without a client certificate: %v, want a certificate refusal", err)
	}
}

// A node whose certificate another CA signed can reach neither the API
// (its handshake is refused, so its join fails) nor Raft (its RPCs are
// refused before the member reads them), and is never replicated to.
func TestTLSNodeOfAnotherCACannotJoin(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	c := newTLSCluster(t, ca, 3)
	leader := c.leader()
	term := leader.raft.CurrentTerm()

	// The rogue knows the cluster's CA certificate (it is public) and
	// trusts it, but its own certificate comes from another CA.
	rogueFiles := tlstest.NewCA(t, "rogue-ca").Node(t, "rogue")
	pair, err := tls.LoadX509KeyPair(rogueFiles.Cert, rogueFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	server := &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	client := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	rogue, err := startTLSNode(t, "rogue", filepath.Join(t.TempDir(), "rogue"), server, client, []string{leader.api}, 10*time.Second)
	// Go's TLS client does not offer a certificate the server's CA did not
	// sign, so the join request arrives without one and is refused.
	if err == nil || !strings.Contains(err.Error(), "client certificate signed by the cluster CA") {
		t.Fatalf("join of a node with a certificate of another CA: %v, want a refusal asking for a certificate of the cluster CA", err)
	}
	// A client that forces its certificate on the server is refused in
	// the handshake.
	forced := client.Clone()
	forced.Certificates = nil
	forced.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	_, err = transport.NewClientTLS(leader.api, &http.Client{Transport: transport.NewHTTPTransportTLS(forced)}).Status(ctxT(t))
	if err == nil || !strings.Contains(err.Error(), "tls: ") {
		t.Errorf("API call with a forced certificate of another CA: %v, want a handshake refusal", err)
	}

	// Straight at Raft: a vote request with a far higher term would make
	// the leader step down if it were read.
	var resp raft.RequestVoteResponse
	err = rogue.trans.RequestVote(raft.ServerID(leader.id), raft.ServerAddress(leader.RaftAddr()),
		&raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("rogue"), Addr: []byte(rogue.RaftAddr())}, Term: term + 100,
			LastLogIndex: 1 << 40, LastLogTerm: term + 100}, &resp)
	if err == nil {
		t.Fatal("the leader answered a Raft RPC from a node of another CA")
	}
	// Nor with its certificate forced on the Raft port.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", leader.RaftBindAddr(), forced)
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Raft connection with a forced certificate of another CA: %v, want a certificate refusal", err)
	}
	// And the other way: the leader cannot replicate to it.
	err = leader.trans.AppendEntries(raft.ServerID("rogue"), raft.ServerAddress(rogue.RaftAddr()),
		&raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.id), Addr: []byte(leader.RaftAddr())}, Term: term}, &raft.AppendEntriesResponse{})
	if err == nil {
		t.Fatal("a node of another CA answered the leader's AppendEntries")
	}

	if got := leader.raft.CurrentTerm(); got != term {
		t.Errorf("leader's term moved from %d to %d", term, got)
	}
	if v := leader.voterCount(); v != 3 {
		t.Errorf("cluster has %d voters, want 3", v)
	}
	if st, err := leader.Status(context.Background()); err == nil {
		for _, v := range st.Voters {
			if v.ID == "rogue" {
				t.Errorf("rogue is in the configuration: %+v", v)
			}
		}
	}
	if li, ai := rogue.raft.LastIndex(), rogue.FSM().AppliedIndex(); li != 0 || ai != 0 {
		t.Errorf("rogue holds log index %d, applied %d; want nothing", li, ai)
	}
	// The cluster still commits.
	if _, err := leader.client.Send(ctxT(t), msg("alice", "general", "still here")); err != nil {
		t.Errorf("send after the rogue's attempts: %v", err)
	}
}

func TestConfigValidateTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	server, client := nodeTLS(t, ca.Node(t, "n1"))
	noCert := client.Clone()
	noCert.Certificates = nil
	noRoots := client.Clone()
	noRoots.RootCAs = nil
	noClientCAs := server.Clone()
	noClientCAs.ClientCAs = nil
	for _, tc := range []struct {
		name           string
		server, client *tls.Config
		want           string
	}{
		{"server only", server, nil, "set both"},
		{"client only", nil, client, "set both"},
		{"client without certificate", server, noCert, "client TLS config has no certificate"},
		{"client without roots", server, noRoots, "no RootCAs"},
		{"server without client CAs", noClientCAs, client, "no ClientCAs"},
	} {
		cfg := testConfig("n1", t.TempDir(), "127.0.0.1:7070")
		cfg.ServerTLS, cfg.ClientTLS = tc.server, tc.client
		_, err := Open(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Two TLS stream layers of one CA talk; the dialer keeps its loopback
// source IP; a peer whose certificate lacks the dialed IP is refused.
func TestStreamLayerTLS(t *testing.T) {
	needLoopbackIPs(t, "127.0.0.31", "127.0.0.32")
	ca := tlstest.NewCA(t, "maos-test")
	withIPs := func(ips ...string) func(*x509.Certificate) {
		return func(c *x509.Certificate) {
			c.IPAddresses = nil
			for _, ip := range ips {
				c.IPAddresses = append(c.IPAddresses, net.ParseIP(ip))
			}
		}
	}
	layer := func(bind string, f tlstest.Files) *streamLayer {
		s, err := newStreamLayer(bind, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		server, client := nodeTLS(t, f)
		s.useTLS(server, client, nil)
		return s
	}
	a := layer("127.0.0.31:0", ca.Node(t, "a", withIPs("127.0.0.31")))
	b := layer("127.0.0.32:0", ca.Node(t, "b", withIPs("127.0.0.32")))

	// A round trip through the handshake both ways, from b's own IP.
	type accepted struct {
		from net.Addr
		got  string
		err  error
	}
	done := make(chan accepted, 1)
	go func() {
		c, err := a.Accept()
		if err != nil {
			done <- accepted{err: err}
			return
		}
		defer c.Close()
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		done <- accepted{from: c.RemoteAddr(), got: string(buf), err: err}
	}()
	out, err := b.Dial(raft.ServerAddress(a.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer out.Close()
	if _, ok := out.(*tls.Conn); !ok {
		t.Errorf("dialed a %T, want a *tls.Conn", out)
	}
	if _, err := out.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.got != "ping" {
		t.Fatalf("a read %q, %v; want ping", r.got, r.err)
	}
	if ip := r.from.(*net.TCPAddr).IP.String(); ip != "127.0.0.32" {
		t.Errorf("TLS dial came from %s, want b's loopback IP 127.0.0.32", ip)
	}

	// c's certificate names 127.0.0.1 only; dialed at 127.0.0.31 it is refused.
	cl := layer("127.0.0.31:0", ca.Node(t, "c", withIPs("127.0.0.1")))
	go func() {
		if c, err := cl.Accept(); err == nil {
			_, _ = c.Read(make([]byte, 1))
			c.Close()
		}
	}()
	if _, err := b.Dial(raft.ServerAddress(cl.Addr().String()), 5*time.Second); err == nil || !strings.Contains(err.Error(), "not 127.0.0.31") {
		t.Errorf("dial of a peer whose certificate lacks the dialed IP: %v, want a name mismatch", err)
	}
}

// A peer that connects and never completes its handshake costs raft
// nothing: Accept returns at once, and the connection's first read fails
// after the handshake timeout.
func TestStreamLayerTLSHandshakeIsBounded(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	s, err := newStreamLayer("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	server, client := nodeTLS(t, ca.Node(t, "a"))
	s.handshakeTimeout = 200 * time.Millisecond
	s.useTLS(server, client, nil)

	silent, err := net.Dial("tcp", s.boundAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	in, err := s.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	start := time.Now()
	_, err = in.Read(make([]byte, 1))
	if err == nil || !strings.Contains(err.Error(), "handshake") {
		t.Fatalf("read from a silent peer: %v, want a handshake error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the handshake gave up after %v, want about 200ms", d)
	}
	// A second use of the conn reports the same failure rather than hang.
	if _, err := in.Write([]byte("x")); err == nil {
		t.Error("write after a failed handshake succeeded")
	}
}

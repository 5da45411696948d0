package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/testing/tlstest"
)

// withTLS gives each node certificates of ca for its id: Raft and the
// node's calls to others are mutual TLS, its API serves https, and its
// Client is an agent's (the CA, no certificate).
func withTLS(t testing.TB, ca *tlstest.CA) clustertest.Option {
	return func(s *clustertest.Setup) {
		s.Config.ServerTLS, s.Config.ClientTLS = cluster.NodeTLS(t, ca.Node(t, s.Config.NodeID))
	}
}

// status is n's view of the cluster (its Raft term, last log index, ...).
func status(t testing.TB, n *clustertest.Node) api.Status {
	t.Helper()
	st, err := n.Status(context.Background())
	if err != nil {
		t.Fatalf("status of %s: %v", n.ID(), err)
	}
	return st
}

// A TLS cluster forms (joins over https, Raft over mutual TLS) and a send
// through a follower is forwarded to the leader and committed everywhere.
func TestTLSClusterFormsAndForwards(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	c := clustertest.New(t, 3, withTLS(t, ca))
	f := c.Follower()
	m := clustertest.Msg("alice", "general", "over tls")
	res, err := f.Client.Send(clustertest.Context(t), m)
	if err != nil {
		t.Fatalf("send through follower %s: %v", f.ID(), err)
	}
	if res.Seq == 0 {
		t.Fatalf("send answered seq 0")
	}
	for _, n := range c.Nodes {
		clustertest.WaitFor(t, 10*time.Second, "the message on "+n.ID(), func() bool {
			got, err := n.Client.Message(context.Background(), m.ID, api.Local)
			return err == nil && got.Seq == res.Seq
		})
	}
	// A strong read through a follower asks the leader for a read index
	// over https with the node's certificate.
	if _, err := f.Client.Message(clustertest.Context(t), m.ID, api.Strong); err != nil {
		t.Errorf("strong read through follower: %v", err)
	}
	// The Raft port speaks TLS only to holders of a node certificate: a
	// client with the CA but no certificate is refused.
	agentOnly := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	agentOnly.RootCAs.AddCert(ca.Cert)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", c.Leader().RaftBindAddr(), agentOnly)
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
	c := clustertest.New(t, 3, withTLS(t, ca))
	leader := c.Leader()
	term := status(t, leader).Term

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
	clientTLS := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	rogue, err := clustertest.StartJoin(t, "rogue", filepath.Join(t.TempDir(), "rogue"), "", []string{leader.Addr}, func(s *clustertest.Setup) {
		s.Config.ServerTLS, s.Config.ClientTLS = server, clientTLS
		s.JoinTimeout = 10 * time.Second
	})
	// Go's TLS client does not offer a certificate the server's CA did not
	// sign, so the join request arrives without one and is refused.
	if err == nil || !strings.Contains(err.Error(), "client certificate signed by the cluster CA") {
		t.Fatalf("join of a node with a certificate of another CA: %v, want a refusal asking for a certificate of the cluster CA", err)
	}
	// A client that forces its certificate on the server is refused in
	// the handshake.
	forced := clientTLS.Clone()
	forced.Certificates = nil
	forced.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	_, err = client.NewClientTLS(leader.Addr, &http.Client{Transport: client.NewHTTPTransportTLS(forced)}).Status(clustertest.Context(t))
	if err == nil || !strings.Contains(err.Error(), "tls: ") {
		t.Errorf("API call with a forced certificate of another CA: %v, want a handshake refusal", err)
	}

	// Straight at Raft: a vote request with a far higher term would make
	// the leader step down if it were read.
	var resp raft.RequestVoteResponse
	err = rogue.RaftTransport().RequestVote(raft.ServerID(leader.ID()), raft.ServerAddress(leader.RaftAddr()),
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
	err = leader.RaftTransport().AppendEntries(raft.ServerID("rogue"), raft.ServerAddress(rogue.RaftAddr()),
		&raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.ID()), Addr: []byte(leader.RaftAddr())}, Term: term}, &raft.AppendEntriesResponse{})
	if err == nil {
		t.Fatal("a node of another CA answered the leader's AppendEntries")
	}

	if got := status(t, leader).Term; got != term {
		t.Errorf("leader's term moved from %d to %d", term, got)
	}
	if v := leader.Voters(); v != 3 {
		t.Errorf("cluster has %d voters, want 3", v)
	}
	if st, err := leader.Status(context.Background()); err == nil {
		for _, v := range st.Voters {
			if v.ID == "rogue" {
				t.Errorf("rogue is in the configuration: %+v", v)
			}
		}
	}
	if li, ai := status(t, rogue).LastIndex, rogue.FSM().AppliedIndex(); li != 0 || ai != 0 {
		t.Errorf("rogue holds log index %d, applied %d; want nothing", li, ai)
	}
	// The cluster still commits.
	if _, err := leader.Client.Send(clustertest.Context(t), clustertest.Msg("alice", "general", "still here")); err != nil {
		t.Errorf("send after the rogue's attempts: %v", err)
	}
}

func TestConfigValidateTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	server, client := cluster.NodeTLS(t, ca.Node(t, "n1"))
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
		cfg := clustertest.Config("n1", t.TempDir(), "127.0.0.1:7070")
		cfg.ServerTLS, cfg.ClientTLS = tc.server, tc.client
		_, err := cluster.Open(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open error %v, want %q", tc.name, err, tc.want)
		}
	}
}

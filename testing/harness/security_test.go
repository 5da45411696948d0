package harness

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/transport"
)

// mode returns the permission bits of path.
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	NoErr(t, err)
	return fi.Mode().Perm()
}

func TestNewSecurity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "security")
	s, err := NewSecurity(dir)
	NoErr(t, err)
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("security dir mode %04o, want 0700", m)
	}
	for _, f := range []string{s.CAFile, s.AdminTokenFile} {
		if m := mode(t, f); m != 0o600 {
			t.Errorf("%s mode %04o, want 0600", f, m)
		}
	}
	b, err := os.ReadFile(s.AdminTokenFile)
	NoErr(t, err)
	if string(b) != s.AdminToken+"\n" {
		t.Errorf("admin token file holds %q, want the token %q on one line", b, s.AdminToken)
	}
	if err := (&transport.AuthConfig{AdminToken: s.AdminToken}).Validate(); err != nil || len(s.AdminToken) < transport.MinAdminTokenLen {
		t.Errorf("admin token %q: %v", s.AdminToken, err)
	}
	if k, err := base64.StdEncoding.DecodeString(s.GossipKey); err != nil || len(k) != 32 {
		t.Errorf("gossip key %q decodes to %d bytes, %v; want 32", s.GossipKey, len(k), err)
	}
	other, err := NewSecurity(filepath.Join(t.TempDir(), "other"))
	NoErr(t, err)
	if other.AdminToken == s.AdminToken || other.GossipKey == s.GossipKey {
		t.Error("two Securities share a secret")
	}
}

func TestSecurityNodeFiles(t *testing.T) {
	s, err := NewSecurity(t.TempDir())
	NoErr(t, err)
	f, err := s.NodeFiles("n2", "127.0.0.12", "", "127.0.0.1")
	NoErr(t, err)
	if f.CA != s.CAFile {
		t.Errorf("CA %s, want %s", f.CA, s.CAFile)
	}
	for _, p := range []string{f.Cert, f.Key} {
		if m := mode(t, p); m != 0o600 {
			t.Errorf("%s mode %04o, want 0600", p, m)
		}
	}
	// The product's own loader accepts them, both ways.
	server, err := f.ServerConfig()
	NoErr(t, err)
	client, err := f.ClientConfig()
	NoErr(t, err)
	leaf, err := x509.ParseCertificate(server.Certificates[0].Certificate[0])
	NoErr(t, err)
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !slices.Equal(ips, []string{"127.0.0.1", "127.0.0.12"}) || leaf.Subject.CommonName != "n2" {
		t.Errorf("certificate of %s has IP SANs %v, want [127.0.0.1 127.0.0.12]", leaf.Subject.CommonName, ips)
	}
	for _, ip := range []string{"127.0.0.1", "127.0.0.12"} {
		if err := leaf.VerifyHostname(ip); err != nil {
			t.Errorf("certificate does not verify for %s: %v", ip, err)
		}
	}
	if err := leaf.VerifyHostname("127.0.0.13"); err == nil {
		t.Error("certificate verifies for 127.0.0.13, which it does not name")
	}
	if client.RootCAs == nil || len(client.Certificates) != 1 {
		t.Errorf("client config: roots %v, %d certificates", client.RootCAs != nil, len(client.Certificates))
	}
	if _, err := s.NodeFiles("n3", "not-an-ip"); err == nil || !strings.Contains(err.Error(), "not-an-ip") {
		t.Errorf("NodeFiles with a bad IP: %v", err)
	}
}

// A node's Raft port behind a harness Proxy speaks mutual TLS through it:
// the proxy forwards bytes, and the peer verifies the node by the proxy's
// IP (127.0.0.1), which every node certificate names.
func TestProxyCarriesMutualTLS(t *testing.T) {
	const ip = "127.0.0.12"
	needLoopbackIPs(t, ip)
	s, err := NewSecurity(t.TempDir())
	NoErr(t, err)
	nodeFiles, err := s.NodeFiles("n2", ip)
	NoErr(t, err)
	peerFiles, err := s.NodeFiles("n1", "127.0.0.11")
	NoErr(t, err)
	server, err := nodeFiles.ServerConfig()
	NoErr(t, err)
	server.ClientAuth = tls.RequireAndVerifyClientCert // as the Raft transport does
	ln, err := tls.Listen("tcp", ip+":0", server)
	NoErr(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					fmt.Fprint(c, "echo "+line)
				}
			}()
		}
	}()
	p, err := NewProxy("127.0.0.1:0")
	NoErr(t, err)
	t.Cleanup(func() { p.Close() })
	p.SetTarget(ln.Addr().String())

	dial := func(files client.TLSFiles) (string, error) {
		cfg, err := files.ClientConfig()
		if err != nil {
			return "", err
		}
		ctx, cancel := testenv.Context(t)
		defer cancel()
		c, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", p.Addr())
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(testenv.Deadline(t))
		if _, err := fmt.Fprintln(c, "hello"); err != nil {
			return "", err
		}
		return bufio.NewReader(c).ReadString('\n')
	}
	if got, err := dial(peerFiles); err != nil || got != "echo hello\n" {
		t.Fatalf("a peer with a certificate through the proxy: %q, %v", got, err)
	}
	// Without a client certificate the node refuses, proxy or not.
	if got, err := dial(client.TLSFiles{CA: s.CAFile}); err == nil {
		t.Errorf("a client without a certificate got %q through the proxy", got)
	}
	if st := p.Stats(); st.Accepted != 2 {
		t.Errorf("proxy stats %+v, want 2 accepted", st)
	}
}

// A node with Security gets the flags after ExtraArgs (so they win), on
// every start, and the harness's client of it speaks https.
func TestSecureNodeArgs(t *testing.T) {
	s, err := NewSecurity(t.TempDir())
	NoErr(t, err)
	sec, err := s.Node("n1")
	NoErr(t, err)
	exe, err := os.Executable()
	NoErr(t, err)
	n, err := NewNode(NodeConfig{ID: "n1", Dir: filepath.Join(t.TempDir(), "n1"), Maosd: exe,
		Env: []string{fakeEnv + "=run"}, ExtraArgs: []string{"--log-level", "debug"}, Security: sec})
	NoErr(t, err)
	t.Cleanup(func() {
		if n.Running() {
			_ = n.Kill()
		}
	})
	NoErr(t, n.Start())
	if cl := n.Client(); cl == nil || !strings.HasPrefix(cl.Addr(), "https://") {
		t.Fatalf("client of a secure node: %v", cl)
	}
	NoErr(t, n.Restart())
	want := "--log-level debug --auth --admin-token-file " + s.AdminTokenFile + " --tls-cert " + sec.TLS.Cert +
		" --tls-key " + sec.TLS.Key + " --tls-ca " + s.CAFile + " --gossip-key-file " + s.GossipKeyFile + " --node-id n1 "
	starts := strings.Split(n.LogTail(1000), "=== harness: start #")
	if len(starts) != 3 {
		t.Fatalf("want 2 starts in the log:\n%s", n.LogTail(1000))
	}
	for i, st := range starts[1:] {
		if !strings.Contains(st, want) {
			t.Errorf("start #%d: want %q in the command line:\n%s", i+1, want, st)
		}
	}
}

func TestNodeSecurityValidation(t *testing.T) {
	s, err := NewSecurity(t.TempDir())
	NoErr(t, err)
	good, err := s.Node("n1")
	NoErr(t, err)
	for _, tc := range []struct {
		name string
		edit func(*NodeSecurity)
		want string
	}{
		{"no cert", func(x *NodeSecurity) { x.TLS.Cert = "" }, "NodeSecurity.TLS"},
		{"no CA", func(x *NodeSecurity) { x.TLS.CA = "" }, "NodeSecurity.TLS"},
		{"no token file", func(x *NodeSecurity) { x.AdminTokenFile = "" }, "NodeSecurity.AdminTokenFile"},
		{"no token", func(x *NodeSecurity) { x.AdminToken = "" }, "NodeSecurity.AdminToken"},
		{"unreadable CA", func(x *NodeSecurity) { x.TLS.CA = filepath.Join(t.TempDir(), "missing.pem") }, "NodeSecurity.TLS.CA"},
	} {
		sec := *good
		tc.edit(&sec)
		_, err := NewNode(NodeConfig{ID: "n1", Dir: filepath.Join(t.TempDir(), "n1"), Maosd: "maosd", Security: &sec})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewNode: %v; want an error naming %s", tc.name, err, tc.want)
		}
	}
}

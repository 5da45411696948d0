package harness

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/tlstest"
)

// Security is the throwaway secret material of a secure cluster
// (Options.Secure), written under the cluster's directory: a CA, one
// certificate per node signed by it, the admin bootstrap token and the
// gossip key, the way an operator would make them (docs/FARM.md, TLS and Authentication).
// Every node gets the same CA, token file and gossip key.
// The certificates come from testing/tlstest: ECDSA P-256, serverAuth and
// clientAuth, valid from an hour ago for a day.
type Security struct {
	// Dir holds the files (mode 0700).
	Dir string
	// CAFile is the CA certificate (PEM): what a client verifies the
	// nodes against (maosctl --ca).
	CAFile string
	// AdminToken is the admin bootstrap secret, and AdminTokenFile the
	// file (mode 0600) every maosd reads it from (--admin-token-file).
	AdminToken     string
	AdminTokenFile string
	// GossipKey is the base64 of the 32-byte gossip key, and GossipKeyFile
	// the file (mode 0600) every maosd reads it from (--gossip-key-file).
	GossipKey     string
	GossipKeyFile string

	ca *tlstest.CA
}

// NodeSecurity starts a node with authentication and TLS (NodeConfig.Security):
// maosd gets --auth --admin-token-file, --tls-cert --tls-key --tls-ca and
// --gossip-key-file, and the harness's own client of the node speaks https,
// verifying the node against TLS.CA, and presents AdminToken.
type NodeSecurity struct {
	// TLS is the node's certificate, its key and the CA; all three are
	// required.
	TLS client.TLSFiles
	// AdminTokenFile is given to --admin-token-file; required.
	AdminTokenFile string
	// AdminToken is what the harness's client presents: the secret in
	// AdminTokenFile. Required.
	AdminToken string
	// GossipKeyFile is given to --gossip-key-file when not "".
	GossipKeyFile string
	// NoTLS starts the node with authentication only: no TLS flags (TLS
	// is then not required), and the harness's client speaks plain http
	// with AdminToken (Options.AuthOnly).
	NoTLS bool
}

// validate names the first missing field.
func (s *NodeSecurity) validate() error {
	switch {
	case !s.NoTLS && (s.TLS.Cert == "" || s.TLS.Key == "" || s.TLS.CA == ""):
		return errors.New("NodeSecurity.TLS needs Cert, Key and CA")
	case s.AdminTokenFile == "":
		return errors.New("NodeSecurity.AdminTokenFile is required")
	case s.AdminToken == "":
		return errors.New("NodeSecurity.AdminToken is required")
	}
	return nil
}

// args are the maosd flags of s.
func (s *NodeSecurity) args() []string {
	args := []string{"--auth", "--admin-token-file", s.AdminTokenFile}
	if !s.NoTLS {
		args = append(args, "--tls-cert", s.TLS.Cert, "--tls-key", s.TLS.Key, "--tls-ca", s.TLS.CA)
	}
	if s.GossipKeyFile != "" {
		args = append(args, "--gossip-key-file", s.GossipKeyFile)
	}
	return args
}

// NewSecurity makes a CA, an admin token and a gossip key in dir (created
// with mode 0700). Node certificates are issued by NodeFiles.
func NewSecurity(dir string) (*Security, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("harness: security dir: %w", err)
	}
	ca, err := tlstest.MakeCA(dir, "maos-harness")
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	s := &Security{Dir: dir, ca: ca, CAFile: ca.File}
	token, err := randomBase64(32)
	if err != nil {
		return nil, err
	}
	s.AdminToken = token
	if s.AdminTokenFile, err = writeSecret(dir, "admin.token", []byte(token+"\n")); err != nil {
		return nil, err
	}
	if s.GossipKey, err = randomBase64(32); err != nil {
		return nil, err
	}
	if s.GossipKeyFile, err = writeSecret(dir, "gossip.key", []byte(s.GossipKey+"\n")); err != nil {
		return nil, err
	}
	return s, nil
}

// NodeFiles issues a certificate for node id (its common name), valid for
// server and client authentication, with the SANs DNS localhost, IP
// 127.0.0.1 (where every node's API and Raft proxy listen) and each of
// ips (a partitionable node's own Raft IP; "" is skipped), and writes it
// and its key (mode 0600) next to the CA.
func (s *Security) NodeFiles(id string, ips ...string) (client.TLSFiles, error) {
	sans := []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, ip := range ips {
		if ip == "" {
			continue
		}
		p := net.ParseIP(ip)
		if p == nil {
			return client.TLSFiles{}, fmt.Errorf("harness: certificate of %s: %q is not an IP", id, ip)
		}
		if !p.Equal(sans[0]) {
			sans = append(sans, p)
		}
	}
	f, err := s.ca.WriteNode(id, func(c *x509.Certificate) { c.IPAddresses = sans })
	if err != nil {
		return client.TLSFiles{}, fmt.Errorf("harness: %w", err)
	}
	return client.TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}, nil
}

// Node returns the NodeSecurity of node id with a new certificate (see
// NodeFiles).
func (s *Security) Node(id string, ips ...string) (*NodeSecurity, error) {
	f, err := s.NodeFiles(id, ips...)
	if err != nil {
		return nil, err
	}
	return &NodeSecurity{TLS: f, AdminTokenFile: s.AdminTokenFile, AdminToken: s.AdminToken, GossipKeyFile: s.GossipKeyFile}, nil
}

// ClientTLS is a client TLS config that verifies the nodes against the CA
// and presents no certificate, as an agent's or an operator's client does.
func (s *Security) ClientTLS() (*tls.Config, error) {
	return client.TLSFiles{CA: s.CAFile, CAFlag: "Security.CAFile"}.ClientConfig()
}

func randomBase64(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("harness: random secret: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// writeSecret writes data to dir/name with mode 0600 and returns the path.
func writeSecret(dir, name string, data []byte) (string, error) {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return "", fmt.Errorf("harness: write %s: %w", p, err)
	}
	return p, nil
}

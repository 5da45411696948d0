package client

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// TLSFiles names the PEM files of a node's or a client's TLS material:
// Cert and Key are the certificate (chain) and its private key, CA the
// certificate(s) of the authority that signs every node certificate.
//
// One CA signs every node's certificate, and each node certificate serves
// both ways: as the server certificate of the node's API and Raft
// transport, and as the client certificate the node presents to its peers.
// It therefore needs subject alternative names for every address peers and
// clients dial (IP SANs for IP:port addresses, DNS SANs for host names)
// and, if it has an extended key usage at all, both serverAuth and
// clientAuth.
//
// The files are read once, when a config is built: a rotated certificate
// takes effect at the next start.
type TLSFiles struct {
	Cert, Key, CA string

	// CertFlag, KeyFlag and CAFlag name the three files in error messages
	// ("--tls-cert", "--tls-key", "--tls-ca" when empty, maosd's flags).
	CertFlag, KeyFlag, CAFlag string
}

// Enabled reports whether any of the three files is given.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

func (f TLSFiles) flags() (cert, key, ca string) {
	cert, key, ca = f.CertFlag, f.KeyFlag, f.CAFlag
	if cert == "" {
		cert = "--tls-cert"
	}
	if key == "" {
		key = "--tls-key"
	}
	if ca == "" {
		ca = "--tls-ca"
	}
	return cert, key, ca
}

// ServerConfig is the TLS config of a node's HTTP API: the node
// certificate, TLS 1.2 or later, and client certificates verified against
// the CA when one is presented (tls.VerifyClientCertIfGiven) -- agents
// authenticate with bearer tokens and need none, nodes present theirs and
// requireNodeCert insists on it for node-to-node requests. The Raft
// transport tightens ClientAuth to tls.RequireAndVerifyClientCert on a
// clone. All three files are required; an error names the flag and the file
// at fault and says what is wrong with it.
func (f TLSFiles) ServerConfig() (*tls.Config, error) {
	certFlag, keyFlag, caFlag := f.flags()
	switch {
	case f.Cert == "":
		return nil, fmt.Errorf("%s is required: the node's certificate (PEM), with %s and %s", certFlag, keyFlag, caFlag)
	case f.Key == "":
		return nil, fmt.Errorf("%s is required with %s: the private key of the certificate (PEM)", keyFlag, certFlag)
	case f.CA == "":
		return nil, fmt.Errorf("%s is required with %s: the CA certificate(s) that sign the node certificates (PEM)", caFlag, certFlag)
	}
	pool, err := f.caPool()
	if err != nil {
		return nil, err
	}
	pair, err := f.keyPair(pool)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		ClientCAs:    pool,
		ClientAuth:   tls.VerifyClientCertIfGiven,
	}, nil
}

// ClientConfig is the TLS config of a client of the API (or of a node
// dialing its peers): TLS 1.2 or later, the server verified against the CA
// (required), and the certificate and key presented when given (both or
// neither; nodes always give theirs). The server's name is verified
// against the address dialed, so a node dialed by IP:port needs that IP in
// its certificate's SANs. An error names the flag and the file at fault.
func (f TLSFiles) ClientConfig() (*tls.Config, error) {
	certFlag, keyFlag, caFlag := f.flags()
	switch {
	case f.CA == "":
		return nil, fmt.Errorf("%s is required to verify the server: the CA certificate(s) that sign the node certificates (PEM)", caFlag)
	case f.Cert != "" && f.Key == "":
		return nil, fmt.Errorf("%s is required with %s: the private key of the certificate (PEM)", keyFlag, certFlag)
	case f.Cert == "" && f.Key != "":
		return nil, fmt.Errorf("%s is required with %s: the certificate of the private key (PEM)", certFlag, keyFlag)
	}
	pool, err := f.caPool()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if f.Cert != "" {
		pair, err := f.keyPair(pool)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// caPool parses every certificate of the CA file; a file with none, or
// with a certificate that does not parse, is refused.
func (f TLSFiles) caPool() (*x509.CertPool, error) {
	_, _, caFlag := f.flags()
	raw, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("%s %s: cannot read it: %w", caFlag, f.CA, err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		n++
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s %s: certificate %d does not parse: %w", caFlag, f.CA, n, err)
		}
		pool.AddCert(c)
	}
	if n == 0 {
		return nil, fmt.Errorf("%s %s: no PEM certificates in the file (want -----BEGIN CERTIFICATE----- blocks)", caFlag, f.CA)
	}
	return pool, nil
}

// keyPair loads the certificate and its key and checks what would
// otherwise only show up as a handshake failure on the other side: the
// two belong together, the certificate is valid now and chains to the CA.
func (f TLSFiles) keyPair(pool *x509.CertPool) (tls.Certificate, error) {
	certFlag, keyFlag, caFlag := f.flags()
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s %s: cannot read it: %w", certFlag, f.Cert, err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s %s: cannot read it: %w", keyFlag, f.Key, err)
	}
	if !hasPEM(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return tls.Certificate{}, fmt.Errorf("%s %s: no PEM certificate in the file (want a -----BEGIN CERTIFICATE----- block)", certFlag, f.Cert)
	}
	if !hasPEM(keyPEM, func(t string) bool { return t == "PRIVATE KEY" || strings.HasSuffix(t, " PRIVATE KEY") }) {
		return tls.Certificate{}, fmt.Errorf("%s %s: no PEM private key in the file (want a -----BEGIN ... PRIVATE KEY----- block)", keyFlag, f.Key)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s %s and %s %s: not a usable certificate and key: %w", certFlag, f.Cert, keyFlag, f.Key, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s %s: %w", certFlag, f.Cert, err)
		}
	}
	now := time.Now()
	switch {
	case now.After(leaf.NotAfter):
		return tls.Certificate{}, fmt.Errorf("%s %s: the certificate expired at %s", certFlag, f.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return tls.Certificate{}, fmt.Errorf("%s %s: the certificate is not valid before %s (check this host's clock)", certFlag, f.Cert, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if _, err := leaf.Verify(opts); err != nil {
		return tls.Certificate{}, fmt.Errorf("%s %s is not signed by the CA in %s %s: %w", certFlag, f.Cert, caFlag, f.CA, err)
	}
	return pair, nil
}

// hasPEM reports whether data holds a PEM block whose type ok accepts.
func hasPEM(data []byte, ok func(string) bool) bool {
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return false
		}
		if ok(b.Type) {
			return true
		}
	}
}

// NewHTTPTransportTLS is NewHTTPTransport speaking TLS with cfg (a
// ClientConfig): the same pooling, plus a bounded handshake. It stays on
// HTTP/1.1, like the plain transport, so concurrent requests use parallel
// connections rather than one multiplexed stream.
func NewHTTPTransportTLS(cfg *tls.Config) *http.Transport {
	t := NewHTTPTransport()
	t.TLSClientConfig = cfg.Clone()
	t.TLSHandshakeTimeout = 5 * time.Second
	return t
}

// NewClientTLS is NewClient for a node that serves TLS: a bare "host:port"
// becomes "https://host:port" (an address with a scheme is kept as given).
// hc should be built on NewHTTPTransportTLS with the CA to verify the node
// against; nil verifies against the system's roots.
func NewClientTLS(addr string, hc *http.Client) *Client {
	base := strings.TrimRight(addr, "/")
	if !strings.Contains(base, "://") {
		base = "https://" + base
	}
	return NewClient(base, hc)
}

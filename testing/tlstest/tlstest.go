// Package tlstest makes throwaway TLS material for tests: a CA and node
// certificates (ECDSA P-256) signed by it, as PEM files in a test's temp
// dir, the way an operator's openssl commands would (see README.md, TLS).
// It imports only the standard library, so any package's tests can use it.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is the CA certificate, and File where it is written.
	PEM  []byte
	File string

	dir string
}

// Files are the paths of one certificate, its key and the CA that signed it.
type Files struct {
	Cert, Key, CA string
}

// NewCA makes a CA named name (its common name) and writes its
// certificate to a temp dir of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlstest: create CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: parse CA: %v", err)
	}
	ca := &CA{Cert: cert, Key: key, PEM: pemOf("CERTIFICATE", der), dir: t.TempDir()}
	ca.File = write(t, ca.dir, name+"-ca.pem", ca.PEM)
	return ca
}

// Issue signs a certificate for name (its common name) valid for both
// server and client authentication, with the SANs IP 127.0.0.1 and DNS
// localhost, valid from an hour ago for a day. tweak may change the
// template before it is signed (other SANs, validity). It returns the
// certificate's and the key's PEM.
func (ca *CA) Issue(t testing.TB, name string, tweak ...func(*x509.Certificate)) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	for _, f := range tweak {
		f(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatalf("tlstest: issue %s: %v", name, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: marshal key: %v", err)
	}
	return pemOf("CERTIFICATE", der), pemOf("EC PRIVATE KEY", kder)
}

// Node issues a certificate for name (see Issue) and writes it, its key
// and the CA certificate to files.
func (ca *CA) Node(t testing.TB, name string, tweak ...func(*x509.Certificate)) Files {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, name, tweak...)
	return Files{
		Cert: write(t, ca.dir, name+".pem", certPEM),
		Key:  write(t, ca.dir, name+"-key.pem", keyPEM),
		CA:   ca.File,
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: generate key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("tlstest: serial: %v", err)
	}
	return n
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func write(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatalf("tlstest: write %s: %v", p, err)
	}
	return p
}

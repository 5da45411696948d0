// Package tlstest makes throwaway TLS material for tests and test
// harnesses: a CA and node certificates (ECDSA P-256) signed by it, as PEM
// files, the way an operator's openssl commands would (see docs/FARM.md, TLS).
// It imports only the standard library, so any package can use it. The
// functions taking a testing.TB fail the test on error; MakeCA, IssuePEM
// and WriteNode return it, for code that has no test (the chaos runner).
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Validity of everything issued: from an hour ago (clock skew) for a day,
// far longer than any test.
const (
	notBefore = -time.Hour
	validFor  = 24 * time.Hour
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
	ca, err := MakeCA(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// MakeCA makes a CA named name (its common name) and writes its
// certificate to dir/name-ca.pem (mode 0600); certificates it issues with
// WriteNode go to dir too.
func MakeCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlstest: CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(notBefore),
		NotAfter:              time.Now().Add(validFor),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("tlstest: create CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("tlstest: parse CA: %w", err)
	}
	ca := &CA{Cert: cert, Key: key, PEM: pemOf("CERTIFICATE", der), dir: dir}
	if ca.File, err = write(dir, name+"-ca.pem", ca.PEM); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issue signs a certificate for name (see IssuePEM), failing t on error.
func (ca *CA) Issue(t testing.TB, name string, tweak ...func(*x509.Certificate)) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.IssuePEM(name, tweak...)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// IssuePEM signs a certificate for name (its common name) valid for both
// server and client authentication, with the SANs IP 127.0.0.1 and DNS
// localhost, valid from an hour ago for a day. tweak may change the
// template before it is signed (other SANs, validity). It returns the
// certificate's and the key's PEM.
func (ca *CA) IssuePEM(name string, tweak ...func(*x509.Certificate)) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tlstest: key of %s: %w", name, err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(notBefore),
		NotAfter:     time.Now().Add(validFor),
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
		return nil, nil, fmt.Errorf("tlstest: issue %s: %w", name, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("tlstest: key of %s: %w", name, err)
	}
	return pemOf("CERTIFICATE", der), pemOf("EC PRIVATE KEY", kder), nil
}

// Node issues a certificate for name and writes it (see WriteNode),
// failing t on error.
func (ca *CA) Node(t testing.TB, name string, tweak ...func(*x509.Certificate)) Files {
	t.Helper()
	f, err := ca.WriteNode(name, tweak...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// WriteNode issues a certificate for name (see IssuePEM) and writes it and
// its key (mode 0600) next to the CA certificate.
func (ca *CA) WriteNode(name string, tweak ...func(*x509.Certificate)) (Files, error) {
	certPEM, keyPEM, err := ca.IssuePEM(name, tweak...)
	if err != nil {
		return Files{}, err
	}
	f := Files{CA: ca.File}
	if f.Cert, err = write(ca.dir, name+".pem", certPEM); err != nil {
		return Files{}, err
	}
	if f.Key, err = write(ca.dir, name+"-key.pem", keyPEM); err != nil {
		return Files{}, err
	}
	return f, nil
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("tlstest: serial: %w", err)
	}
	return n, nil
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func write(dir, name string, data []byte) (string, error) {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return "", fmt.Errorf("tlstest: write %s: %w", p, err)
	}
	return p, nil
}

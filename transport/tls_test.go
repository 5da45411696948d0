package transport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/tlstest"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

func tlsFiles(f tlstest.Files) client.TLSFiles {
	return client.TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every way the TLS files can be wrong is refused with the flag, the file
// and what is wrong.
func TestTLSFilesRefusesBadMaterial(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	good := ca.Node(t, "n1")
	other := tlstest.NewCA(t, "other").Node(t, "rogue")
	expired := ca.Node(t, "old", func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
	})
	notPEM := writeFile(t, "garbage.pem", "not a certificate\n")
	badCert := writeFile(t, "bad-ca.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	missing := filepath.Join(t.TempDir(), "nope.pem")

	type build func(client.TLSFiles) (*tls.Config, error)
	server := client.TLSFiles.ServerConfig
	clientCfg := client.TLSFiles.ClientConfig
	tests := []struct {
		name  string
		build build
		files client.TLSFiles
		want  []string
	}{
		{"server without cert", server, client.TLSFiles{Key: good.Key, CA: good.CA}, []string{"--tls-cert is required"}},
		{"server without key", server, client.TLSFiles{Cert: good.Cert, CA: good.CA}, []string{"--tls-key is required"}},
		{"server without CA", server, client.TLSFiles{Cert: good.Cert, Key: good.Key}, []string{"--tls-ca is required"}},
		{"client without CA", clientCfg, client.TLSFiles{Cert: good.Cert, Key: good.Key}, []string{"--tls-ca is required to verify the server"}},
		{"client cert without key", clientCfg, client.TLSFiles{Cert: good.Cert, CA: good.CA}, []string{"--tls-key is required with --tls-cert"}},
		{"client key without cert", clientCfg, client.TLSFiles{Key: good.Key, CA: good.CA}, []string{"--tls-cert is required with --tls-key"}},
		{"unreadable CA", server, client.TLSFiles{Cert: good.Cert, Key: good.Key, CA: missing}, []string{"--tls-ca", missing, "cannot read"}},
		{"CA without PEM", clientCfg, client.TLSFiles{CA: notPEM}, []string{"--tls-ca", notPEM, "no PEM certificates"}},
		{"CA that does not parse", clientCfg, client.TLSFiles{CA: badCert}, []string{"--tls-ca", badCert, "certificate 1 does not parse"}},
		{"unreadable cert", server, client.TLSFiles{Cert: missing, Key: good.Key, CA: good.CA}, []string{"--tls-cert", missing, "cannot read"}},
		{"unreadable key", server, client.TLSFiles{Cert: good.Cert, Key: missing, CA: good.CA}, []string{"--tls-key", missing, "cannot read"}},
		{"cert without PEM", server, client.TLSFiles{Cert: notPEM, Key: good.Key, CA: good.CA}, []string{"--tls-cert", notPEM, "no PEM certificate"}},
		{"key without PEM", server, client.TLSFiles{Cert: good.Cert, Key: good.Cert, CA: good.CA}, []string{"--tls-key", good.Cert, "no PEM private key"}},
		{"key of another cert", server, client.TLSFiles{Cert: good.Cert, Key: other.Key, CA: good.CA}, []string{"--tls-cert", "--tls-key", other.Key, "not a usable certificate and key"}},
		{"expired cert", server, tlsFiles(expired), []string{"--tls-cert", expired.Cert, "expired"}},
		{"cert of another CA", clientCfg, client.TLSFiles{Cert: other.Cert, Key: other.Key, CA: good.CA}, []string{"--tls-cert", other.Cert, "not signed by the CA in --tls-ca"}},
		{"maosctl flag names", clientCfg, client.TLSFiles{Cert: good.Cert, CA: good.CA, CertFlag: "--cert", KeyFlag: "--key", CAFlag: "--ca"}, []string{"--key is required with --cert"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.build(tt.files)
			if err == nil {
				t.Fatalf("built a config (%v), want an error naming %q", cfg != nil, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestTLSFilesConfigs(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	f := tlsFiles(ca.Node(t, "n1"))
	sc, err := f.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if sc.MinVersion != tls.VersionTLS12 || sc.ClientAuth != tls.VerifyClientCertIfGiven || sc.ClientCAs == nil || len(sc.Certificates) != 1 {
		t.Errorf("server config: min %x, client auth %v, client CAs %v, %d certificates", sc.MinVersion, sc.ClientAuth, sc.ClientCAs != nil, len(sc.Certificates))
	}
	cc, err := f.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.MinVersion != tls.VersionTLS12 || cc.RootCAs == nil || len(cc.Certificates) != 1 || cc.InsecureSkipVerify {
		t.Errorf("client config: min %x, root CAs %v, %d certificates, insecure %v", cc.MinVersion, cc.RootCAs != nil, len(cc.Certificates), cc.InsecureSkipVerify)
	}
	agent, err := client.TLSFiles{CA: f.CA}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(agent.Certificates) != 0 {
		t.Errorf("a client given only the CA presents %d certificates", len(agent.Certificates))
	}
}

func TestNewClientTLSScheme(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:7070", "https://127.0.0.1:7070"},
		{"https://10.0.0.1:7070/", "https://10.0.0.1:7070"},
		{"http://10.0.0.1:7070", "http://10.0.0.1:7070"}, // an explicit scheme is kept
	} {
		if got := client.NewClientTLS(tc.addr, nil).Addr(); got != tc.want {
			t.Errorf("NewClientTLS(%q).Addr() = %q, want %q", tc.addr, got, tc.want)
		}
	}
	if got := client.NewClient("https://10.0.0.1:7070", nil).Addr(); got != "https://10.0.0.1:7070" {
		t.Errorf("NewClient kept %q, want the https URL as given", got)
	}
}

// serveTLS starts the API in front of f over TLS with the server config of
// node.
func serveTLS(t *testing.T, f *transporttest.Service, node tlstest.Files) *httptest.Server {
	t.Helper()
	sc, err := tlsFiles(node).ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(transport.NewServer(f, transport.ServerOptions{Logger: discard}))
	srv.TLS = sc
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func tlsClient(t *testing.T, files client.TLSFiles) *http.Client {
	t.Helper()
	cc, err := files.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: client.NewHTTPTransportTLS(cc), Timeout: 10 * time.Second}
}

func TestTLSAPINodeRequestsNeedAClientCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	node := ca.Node(t, "n1")
	f := transporttest.New(t)
	srv := serveTLS(t, f, node)
	base := "https://" + srv.Listener.Addr().String()
	agent := tlsClient(t, client.TLSFiles{CA: node.CA})
	peer := tlsClient(t, tlsFiles(ca.Node(t, "n2")))

	call := func(hc *http.Client, method, path, body string, h http.Header) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: read body: %v", method, path, err)
		}
		return resp.StatusCode, b
	}
	fwd := http.Header{api.HeaderForwarded: {"1"}}
	join := `{"node_id":"n9","raft_addr":"127.0.0.1:9","api_addr":"127.0.0.1:8"}`
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		h            http.Header
	}{
		{"read index", http.MethodGet, "/v1/internal/read-index", "", nil},
		{"entry", http.MethodPost, "/v1/internal/entry", "x", http.Header{"Content-Type": {api.ContentTypeEntry}}},
		{"entries", http.MethodPost, "/v1/internal/entries", "\x01x", http.Header{"Content-Type": {api.ContentTypeEntries}}},
		{"escaped internal path", http.MethodGet, "/v1/%69nternal/read-index", "", nil},
		{"join", http.MethodPost, "/v1/cluster/join", join, nil},
		{"forwarded send", http.MethodPost, "/v1/messages", `{"from":"a","to":["b"],"channel":"c","content":{"text":"x"}}`, fwd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(agent, tc.method, tc.path, tc.body, tc.h)
			if status != http.StatusForbidden {
				t.Fatalf("without a client certificate: %d %s, want 403", status, body)
			}
			code, msg := errorOf(t, body)
			if code != api.CodeForbidden || !strings.Contains(msg, "client certificate signed by the cluster CA") {
				t.Errorf("403 body: code %q message %q", code, msg)
			}
			if status, body := call(peer, tc.method, tc.path, tc.body, tc.h); status == http.StatusForbidden {
				t.Errorf("with a node certificate: 403 %s", body)
			}
		})
	}
	// Only the requests with a node certificate reached the service.
	if joins, reads := len(f.Joined()), len(f.CallsTo("ReadIndex")); joins != 1 || reads != 2 {
		t.Errorf("the service saw %d joins and %d read-index calls, want 1 and 2", joins, reads)
	}
	// Agents need no certificate for the rest of the API.
	if status, body := call(agent, http.MethodGet, "/v1/cluster/status", "", nil); status != http.StatusOK {
		t.Errorf("status without a client certificate: %d %s", status, body)
	}
	// The typed client speaks https to a bare host:port.
	if _, err := client.NewClientTLS(srv.Listener.Addr().String(), peer).ReadIndex(context.Background()); err != nil {
		t.Errorf("ReadIndex through NewClientTLS with a node certificate: %v", err)
	}
	_, err := client.NewClientTLS(srv.Listener.Addr().String(), agent).ReadIndex(context.Background())
	if !errors.Is(err, api.ErrForbidden) {
		t.Errorf("ReadIndex without a client certificate: %v, want forbidden", err)
	}
}

// Over plain HTTP there are no certificates to check: node requests pass
// as before.
func TestPlainAPIDoesNotAskForCertificates(t *testing.T) {
	f := transporttest.New(t)
	srv := serve(t, f, transport.ServerOptions{})
	if r := do(t, http.MethodGet, srv.URL+"/v1/internal/read-index", "", nil); r.status != http.StatusOK {
		t.Errorf("plain read index: %d %s", r.status, r.body)
	}
}

func TestTLSAPIRefusesClientsWithoutTheCA(t *testing.T) {
	ca := tlstest.NewCA(t, "maos-test")
	srv := serveTLS(t, transporttest.New(t), ca.Node(t, "n1"))
	addr := srv.Listener.Addr().String()
	ctx := context.Background()

	// No CA: the system roots do not know the cluster's.
	_, err := client.NewClientTLS(addr, nil).Status(ctx)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("client without the CA: %v, want an unknown-authority error", err)
	}
	// Another CA: same.
	otherCA := tlstest.NewCA(t, "other")
	_, err = client.NewClientTLS(addr, tlsClient(t, client.TLSFiles{CA: otherCA.File})).Status(ctx)
	if !errors.As(err, &unknown) {
		t.Errorf("client trusting another CA: %v, want an unknown-authority error", err)
	}
	// Plain HTTP to the TLS port gets no API answer.
	_, err = client.NewClient(addr, nil).Status(ctx)
	var apiErr *api.APIError
	if err == nil || (errors.As(err, &apiErr) && apiErr.Status != http.StatusBadRequest) {
		t.Errorf("plain HTTP to the TLS port: %v, want a refusal", err)
	}
	// A certificate from another CA is refused in the handshake, even from
	// a client that trusts the server. (Go's client would not even send it,
	// since the server asks for certificates of its CA; a hostile one
	// would.)
	rogue := otherCA.Node(t, "rogue")
	pair, err := tls.LoadX509KeyPair(rogue.Cert, rogue.Key)
	if err != nil {
		t.Fatal(err)
	}
	forced := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}
	forced.RootCAs.AddCert(ca.Cert)
	hc := &http.Client{Transport: client.NewHTTPTransportTLS(forced)}
	_, err = client.NewClientTLS(addr, hc).Status(ctx)
	if err == nil || !strings.Contains(err.Error(), "tls: ") || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client with a certificate of another CA: %v, want a TLS handshake refusal", err)
	}
}

package maosd

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/testing/tlstest"
)

// maosd refuses incomplete or bad TLS flags before touching the data dir,
// naming the flag and saying what is wrong.
func TestRefusesBadTLSFlags(t *testing.T) {
	for _, k := range []string{"MAOS_TLS_CERT", "MAOS_TLS_KEY", "MAOS_TLS_CA"} {
		t.Setenv(k, "")
	}
	ca := tlstest.NewCA(t, "maos-test")
	node := ca.Node(t, "n1")
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "nope.key")
	dir := filepath.Join(t.TempDir(), "data")
	tests := []struct {
		env  []string
		args []string
		want []string
	}{
		{nil, []string{"--tls-cert", node.Cert}, []string{"--tls-key and --tls-ca missing", "go together"}},
		{nil, []string{"--tls-cert", node.Cert, "--tls-key", node.Key}, []string{"--tls-ca missing"}},
		{nil, []string{"--tls-key", node.Key, "--tls-ca", node.CA}, []string{"--tls-cert missing"}},
		{[]string{"MAOS_TLS_CA", node.CA}, nil, []string{"--tls-cert and --tls-key missing"}},
		{nil, []string{"--tls-cert", node.Cert, "--tls-key", node.Key, "--tls-ca", garbage}, []string{"--tls-ca", garbage, "no PEM certificates"}},
		{nil, []string{"--tls-cert", node.Cert, "--tls-key", missing, "--tls-ca", node.CA}, []string{"--tls-key", missing, "cannot read"}},
		{nil, []string{"--tls-cert", garbage, "--tls-key", node.Key, "--tls-ca", node.CA}, []string{"--tls-cert", garbage, "no PEM certificate"}},
	}
	for _, tt := range tests {
		for i := 0; i+1 < len(tt.env); i += 2 {
			t.Setenv(tt.env[i], tt.env[i+1])
		}
		err := startRefused(dir, tt.args...)
		checkSays(t, fmt.Sprintf("maosd %v (env %v)", tt.args, tt.env), err, tt.want...)
		checkStatus(t, fmt.Sprintf("maosd %v (env %v)", tt.args, tt.env), err, 2)
		for i := 0; i+1 < len(tt.env); i += 2 {
			t.Setenv(tt.env[i], "")
		}
	}
	checkNoDataDir(t, dir)
}

// Two maosd nodes with TLS: the second joins the first over https, maosctl
// with --ca sees both voters, maosctl without it cannot talk to the node,
// and the log warns that gossip is not encrypted.
func TestServesTLS(t *testing.T) {
	for _, k := range []string{"MAOS_TLS_CERT", "MAOS_TLS_KEY", "MAOS_TLS_CA"} {
		t.Setenv(k, "")
	}
	clearMaosctlEnv(t)
	ca := tlstest.NewCA(t, "maos-test")
	flags := func(f tlstest.Files) []string {
		return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}
	}
	// n1's certificate names 127.0.0.1 only, not localhost.
	n1 := ca.Node(t, "n1", func(c *x509.Certificate) { c.DNSNames = nil })
	ready1, log1 := runMaosdUntilReady(t, nil, append([]string{"--node-id", "n1"}, flags(n1)...)...)
	api1, _ := ready1["api_addr"].(string)
	if api1 == "" {
		t.Fatalf("ready line without api_addr: %v", ready1)
	}
	if !strings.Contains(log1, "TLS secures the API and Raft, but gossip is not encrypted") || !strings.Contains(log1, "--gossip-key") {
		t.Errorf("no warning that gossip is unencrypted under TLS:\n%s", log1)
	}
	if !strings.Contains(log1, `"tls":true`) {
		t.Errorf("the node open line does not say TLS is on:\n%s", log1)
	}
	runMaosdUntilReady(t, nil, append([]string{"--node-id", "n2", "--join", api1}, flags(ca.Node(t, "n2"))...)...)

	var st api.Status
	deadline := testenv.Deadline(t)
	for {
		r := runMaosctl(api1, "--ca", ca.File, "--json", "cluster", "status")
		if r.err != nil {
			t.Fatalf("maosctl --ca cluster status: %v %s", r.err, r.errOut)
		}
		if err := json.Unmarshal([]byte(r.out), &st); err != nil {
			t.Fatalf("status: %v: %s", err, r.out)
		}
		if len(st.Voters) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(st.Voters) != 2 {
		t.Errorf("voters after the https join: %+v, want n1 and n2", st.Voters)
	}

	// Without --ca maosctl speaks plain http to a TLS port, gets no API,
	// and is told to give --ca.
	if r := runMaosctl(api1, "cluster", "status"); r.err == nil || !strings.Contains(r.errOut, "serves https") || !strings.Contains(r.errOut, "--ca") {
		t.Errorf("maosctl without --ca to a TLS node: err %v, stderr %q; want a hint at --ca", r.err, r.errOut)
	}
	// https without the CA cannot verify the node.
	if r := runMaosctl("https://"+api1, "cluster", "status"); r.err == nil || !strings.Contains(r.errOut, "not signed by a CA maosctl trusts") {
		t.Errorf("maosctl over https without --ca: err %v, stderr %q; want a certificate error", r.err, r.errOut)
	}
	// An address the certificate does not name fails verification.
	if r := runMaosctl(strings.Replace(api1, "127.0.0.1", "localhost", 1), "--ca", ca.File, "cluster", "status"); r.err == nil || !strings.Contains(r.errOut, "needs a SAN") {
		t.Errorf("maosctl to an address outside the certificate: err %v, stderr %q; want a SAN hint", r.err, r.errOut)
	}
}

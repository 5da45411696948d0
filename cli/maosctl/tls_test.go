package maosctl

import (
	"strings"
	"testing"

	"github.com/maos-project/maos/testing/tlstest"
)

// maosctl's TLS flags are checked before any command runs.
func TestRefusesBadTLSFlags(t *testing.T) {
	for _, k := range []string{envCA, envCert, envKey} {
		t.Setenv(k, "")
	}
	ca := tlstest.NewCA(t, "maos-test")
	node := ca.Node(t, "n1")
	for _, tc := range []struct {
		addr string
		args []string
		want []string
	}{
		{"127.0.0.1:1", []string{"--cert", node.Cert, "--key", node.Key}, []string{"--ca", "is required"}},
		{"127.0.0.1:1", []string{"--ca", node.Key}, []string{"--ca", node.Key, "no PEM certificates"}},
		{"127.0.0.1:1", []string{"--ca", node.CA, "--cert", node.Cert}, []string{"--key is required with --cert"}},
		{"http://127.0.0.1:1", []string{"--ca", node.CA}, []string{"--addr http://127.0.0.1:1", "plain http", "--ca"}},
	} {
		r := runApp(tc.addr, "", append(tc.args, "cluster", "status")...)
		for _, w := range tc.want {
			if r.err == nil || !strings.Contains(r.errOut, w) {
				t.Errorf("maosctl --addr %s %v: err %v, stderr %q; want it to say %q", tc.addr, tc.args, r.err, r.errOut, w)
			}
		}
	}
}

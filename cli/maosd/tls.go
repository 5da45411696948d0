package maosd

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api/client"
)

// tlsFlags checks --tls-cert, --tls-key and --tls-ca -- all three or none
// -- and loads them. Without any it returns nil configs (plain http and
// TCP). server is the API's config (client certificates verified when
// given; the Raft transport requires them); client verifies peers against
// the CA and presents the node's certificate. An error names the flag at
// fault and the file.
func tlsFlags(c *cli.Context) (serverTLS, clientTLS *tls.Config, err error) {
	files := client.TLSFiles{
		Cert: strings.TrimSpace(c.String("tls-cert")),
		Key:  strings.TrimSpace(c.String("tls-key")),
		CA:   strings.TrimSpace(c.String("tls-ca")),
	}
	if !files.Enabled() {
		return nil, nil, nil
	}
	var missing []string
	for _, f := range []struct{ flag, v string }{{"--tls-cert", files.Cert}, {"--tls-key", files.Key}, {"--tls-ca", files.CA}} {
		if f.v == "" {
			missing = append(missing, f.flag)
		}
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("%s missing: --tls-cert, --tls-key and --tls-ca go together (the node's certificate, its key, and the CA that signs every node's certificate), or none of them for plain http",
			strings.Join(missing, " and "))
	}
	if serverTLS, err = files.ServerConfig(); err != nil {
		return nil, nil, err
	}
	if clientTLS, err = files.ClientConfig(); err != nil {
		return nil, nil, err
	}
	return serverTLS, clientTLS, nil
}

// apiClient is a client of the API at addr: https verified with client
// when it is not nil (maosd with TLS), plain http otherwise.
func apiClient(addr string, clientTLS *tls.Config) *client.Client {
	if clientTLS == nil {
		return client.NewClient(addr, nil)
	}
	return client.NewClientTLS(addr, &http.Client{Transport: client.NewHTTPTransportTLS(clientTLS)})
}

package maosctl

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// Environment variables of maosctl's TLS flags.
const (
	envCA   = "MAOS_CA"
	envCert = "MAOS_CERT"
	envKey  = "MAOS_KEY"
)

// tlsMeta is the App.Metadata key of the client TLS config loadTLS
// built (absent without --ca).
const tlsMeta = "maosctl.tls"

// loadTLS loads --ca, --cert and --key before any command runs, so a
// bad file is reported once, naming the flag, whatever the command. With
// --ca every client speaks https to a host:port --addr; an http:// --addr
// contradicts it and is refused.
func loadTLS(c *cli.Context) error {
	files := client.TLSFiles{
		Cert: strings.TrimSpace(c.String("cert")), Key: strings.TrimSpace(c.String("key")), CA: strings.TrimSpace(c.String("ca")),
		CertFlag: "--cert", KeyFlag: "--key", CAFlag: "--ca",
	}
	if !files.Enabled() {
		return nil
	}
	if files.CA == "" {
		return fmt.Errorf("--ca (or $%s) is required with --cert/--key: the CA certificate to verify the node against", envCA)
	}
	if a := nodeAddr(c); strings.HasPrefix(strings.ToLower(a), "http://") {
		return fmt.Errorf("--addr %s is plain http but --ca asks for TLS: give https://HOST:PORT or HOST:PORT", a)
	}
	cfg, err := files.ClientConfig()
	if err != nil {
		return err
	}
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[tlsMeta] = cfg
	return nil
}

// tlsConfig is the client TLS config of --ca, nil without it.
func tlsConfig(c *cli.Context) *tls.Config {
	cfg, _ := c.App.Metadata[tlsMeta].(*tls.Config)
	return cfg
}

// httpTransport is the pooled transport of maosctl's clients, speaking
// TLS with --ca (and --cert) when given.
func httpTransport(c *cli.Context) *http.Transport {
	if cfg := tlsConfig(c); cfg != nil {
		return client.NewHTTPTransportTLS(cfg)
	}
	return client.NewHTTPTransport()
}

// newAPIClient is the one place maosctl makes an API client for addr:
// https with --ca (a bare host:port gets https://), hc's transport built
// by httpTransport (nil: a new one).
func newAPIClient(c *cli.Context, addr string, hc *http.Client) *client.Client {
	if hc == nil {
		hc = &http.Client{Transport: httpTransport(c)}
	}
	if tlsConfig(c) != nil {
		return client.NewClientTLS(addr, hc)
	}
	return client.NewClient(addr, hc)
}

// chainBefore runs each hook in turn, stopping at the first error.
func chainBefore(hooks ...cli.BeforeFunc) cli.BeforeFunc {
	return func(c *cli.Context) error {
		for _, h := range hooks {
			if err := h(c); err != nil {
				return err
			}
		}
		return nil
	}
}

// tlsHint explains the two TLS mistakes a user makes: plain http to a
// node serving https (no --ca), and https without the cluster's CA (or
// with another one). nil for any other error.
func tlsHint(c *cli.Context, err error) error {
	var (
		apiErr  *api.APIError
		unknown x509.UnknownAuthorityError
		name    x509.HostnameError
	)
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusBadRequest && strings.Contains(apiErr.Message, "HTTP request to an HTTPS server"):
		return &userError{err: err, msg: fmt.Sprintf("%s serves https (maosd --tls-cert): give --ca FILE (or $%s), the cluster's CA certificate",
			nodeAddr(c), envCA)}
	case errors.As(err, &unknown):
		return &userError{err: err, msg: fmt.Sprintf("%s: the node's certificate is not signed by a CA maosctl trusts (%v): give --ca FILE (or $%s), the CA that signs the nodes' certificates",
			nodeAddr(c), err, envCA)}
	case errors.As(err, &name):
		return &userError{err: err, msg: fmt.Sprintf("%s: %v: the node's certificate needs a SAN for the address dialed", nodeAddr(c), name.Error())}
	}
	return nil
}

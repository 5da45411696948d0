package maosctl

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/transport"
)

// Environment variables of maosctl's TLS flags.
const (
	ctlEnvCA   = "MAOS_CA"
	ctlEnvCert = "MAOS_CERT"
	ctlEnvKey  = "MAOS_KEY"
)

// ctlTLSMeta is the App.Metadata key of the client TLS config ctlLoadTLS
// built (absent without --ca).
const ctlTLSMeta = "maosctl.tls"

// ctlLoadTLS loads --ca, --cert and --key before any command runs, so a
// bad file is reported once, naming the flag, whatever the command. With
// --ca every client speaks https to a host:port --addr; an http:// --addr
// contradicts it and is refused.
func ctlLoadTLS(c *cli.Context) error {
	files := transport.TLSFiles{
		Cert: strings.TrimSpace(c.String("cert")), Key: strings.TrimSpace(c.String("key")), CA: strings.TrimSpace(c.String("ca")),
		CertFlag: "--cert", KeyFlag: "--key", CAFlag: "--ca",
	}
	if !files.Enabled() {
		return nil
	}
	if files.CA == "" {
		return fmt.Errorf("--ca (or $%s) is required with --cert/--key: the CA certificate to verify the node against", ctlEnvCA)
	}
	if a := ctlAddr(c); strings.HasPrefix(strings.ToLower(a), "http://") {
		return fmt.Errorf("--addr %s is plain http but --ca asks for TLS: give https://HOST:PORT or HOST:PORT", a)
	}
	cfg, err := files.ClientConfig()
	if err != nil {
		return err
	}
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[ctlTLSMeta] = cfg
	return nil
}

// ctlTLSConfig is the client TLS config of --ca, nil without it.
func ctlTLSConfig(c *cli.Context) *tls.Config {
	cfg, _ := c.App.Metadata[ctlTLSMeta].(*tls.Config)
	return cfg
}

// ctlHTTPTransport is the pooled transport of maosctl's clients, speaking
// TLS with --ca (and --cert) when given.
func ctlHTTPTransport(c *cli.Context) *http.Transport {
	if cfg := ctlTLSConfig(c); cfg != nil {
		return transport.NewHTTPTransportTLS(cfg)
	}
	return transport.NewHTTPTransport()
}

// ctlNewClient is the one place maosctl makes an API client for addr:
// https with --ca (a bare host:port gets https://), hc's transport built
// by ctlHTTPTransport (nil: a new one).
func ctlNewClient(c *cli.Context, addr string, hc *http.Client) *transport.Client {
	if hc == nil {
		hc = &http.Client{Transport: ctlHTTPTransport(c)}
	}
	if ctlTLSConfig(c) != nil {
		return transport.NewClientTLS(addr, hc)
	}
	return transport.NewClient(addr, hc)
}

// ctlBefore runs each hook in turn, stopping at the first error.
func ctlBefore(hooks ...cli.BeforeFunc) cli.BeforeFunc {
	return func(c *cli.Context) error {
		for _, h := range hooks {
			if err := h(c); err != nil {
				return err
			}
		}
		return nil
	}
}

// ctlTLSHint explains the two TLS mistakes a user makes: plain http to a
// node serving https (no --ca), and https without the cluster's CA (or
// with another one). nil for any other error.
func ctlTLSHint(c *cli.Context, err error) error {
	var (
		api     *transport.APIError
		unknown x509.UnknownAuthorityError
		name    x509.HostnameError
	)
	switch {
	case errors.As(err, &api) && api.Status == http.StatusBadRequest && strings.Contains(api.Message, "HTTP request to an HTTPS server"):
		return &ctlError{err: err, msg: fmt.Sprintf("%s serves https (maosd --tls-cert): give --ca FILE (or $%s), the cluster's CA certificate",
			ctlAddr(c), ctlEnvCA)}
	case errors.As(err, &unknown):
		return &ctlError{err: err, msg: fmt.Sprintf("%s: the node's certificate is not signed by a CA maosctl trusts (%v): give --ca FILE (or $%s), the CA that signs the nodes' certificates",
			ctlAddr(c), err, ctlEnvCA)}
	case errors.As(err, &name):
		return &ctlError{err: err, msg: fmt.Sprintf("%s: %v: the node's certificate needs a SAN for the address dialed", ctlAddr(c), name.Error())}
	}
	return nil
}

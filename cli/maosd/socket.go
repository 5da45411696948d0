package maosd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/maos-project/maos/api/client"
)

// apiSocketName is the Unix socket in the data dir on which the node
// serves its API to its own clients (socket.go).
const apiSocketName = "api.sock"

// maxSocketPath is the longest path a Unix socket can have on Linux
// (sun_path is 108 bytes, one of them the terminating NUL).
const maxSocketPath = 107

// localAPIHost is the host of the in-process clients' base URL: any
// name does, since they dial the socket whatever the URL says.
const localAPIHost = "maosd.local"

// listenAPISocket listens on <data dir>/api.sock, mode 0600, removing a
// socket a killed process left there (the data dir is locked, so no live
// node owns it). It returns nil, after one warning, when the path is too
// long or listening fails: the in-process clients then use TCP.
func (d *daemon) listenAPISocket() net.Listener {
	path := filepath.Join(d.cfg.node.DataDir, apiSocketName)
	ln, err := listenUnix(path)
	if err != nil {
		d.logger.Warn("the node's own watchers, relays and push deliverer use the TCP API, counted in --max-conns-per-client: "+
			"cannot serve the API on the data dir's socket", "path", path, "error", err)
		return nil
	}
	return ln
}

// listenUnix listens on path, mode 0600; its Close removes the file.
func listenUnix(path string) (net.Listener, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if len(abs) > maxSocketPath {
		return nil, fmt.Errorf("path is %d bytes, a Unix socket's at most %d", len(abs), maxSocketPath)
	}
	if fi, err := os.Lstat(abs); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket; remove it", abs)
		}
		if err := os.Remove(abs); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", abs)
	if err != nil {
		return nil, err
	}
	// The data dir is 0700 already; the socket is the node's own too.
	if err := os.Chmod(abs, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// localClient is the client of the node's own API for its in-process
// clients (watchers of --agents, A2A relays, push deliverer), with the
// admin token when auth is on: over <data dir>/api.sock, which
// --max-conns-per-client does not bound, else over TCP as any client.
func (d *daemon) localClient() *client.Client {
	var cl *client.Client
	if d.sockLn == nil {
		cl = apiClient(d.cfg.node.APIAddr, d.cfg.node.ClientTLS)
	} else {
		cl = unixClient(d.sockLn.Addr().String())
	}
	if d.cfg.node.AdminToken != "" {
		cl = cl.WithToken(d.cfg.node.AdminToken)
	}
	return cl
}

// unixClient is an API client that dials the Unix socket at path for
// every request (plain HTTP) and follows no redirect off its own host.
func unixClient(path string) *client.Client {
	tr := client.NewHTTPTransport()
	var dialer net.Dialer
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, "unix", path)
	}
	hc := &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Host != localAPIHost {
			return fmt.Errorf("redirect to %s off the node's own socket", req.URL.Host)
		}
		return nil
	}}
	return client.NewClient("http://"+localAPIHost, hc)
}

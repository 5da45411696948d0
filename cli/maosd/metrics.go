package maosd

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/maos-project/maos/hostport"
	"github.com/maos-project/maos/metrics"
)

// checkMetricsAddr refuses a --metrics-addr that is not a listen address.
// Any IP is taken (a scraper may be on another host); nothing there asks
// for a token, which the flag's help and docs/OPERATIONS.md say.
func checkMetricsAddr(addr string) error {
	if err := hostport.Check(addr, hostport.Listen); err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	return nil
}

// listenMetrics binds --metrics-addr; serveMetrics serves on it once the
// node (and so its metrics) exists.
func listenMetrics(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	return ln, nil
}

// serveMetrics serves m on ln: GET /metrics without auth, 404 elsewhere.
// It returns the server, which close shuts.
func (d *daemon) serveMetrics(ln net.Listener, m *metrics.Metrics) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler(d.logger))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	loopback := false
	if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		loopback = net.ParseIP(host).IsLoopback()
	}
	d.logger.Info("serving metrics without auth", "metrics_addr", ln.Addr().String(), "loopback", loopback,
		"see", "http://"+ln.Addr().String()+"/metrics")
	return srv
}

package maosd

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/maos-project/maos/hostport"
)

// Sampling rates while --debug-addr is set: one blocking event per 100 µs
// blocked, one mutex contention event in 100. Off otherwise, as they cost.
const (
	debugBlockRate     = 100_000 // ns
	debugMutexFraction = 100
)

// checkDebugAddr refuses a --debug-addr that is not a loopback IP:port:
// profiles show the process's memory.
func checkDebugAddr(addr string) error {
	if err := hostport.Check(addr, hostport.Listen|hostport.IP); err != nil {
		return fmt.Errorf("--debug-addr: %w", err)
	}
	host, _, _ := net.SplitHostPort(addr)
	if !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("--debug-addr %q: want a loopback IP (127.0.0.1): profiles show the process's memory", addr)
	}
	return nil
}

// serveDebug serves Go's pprof endpoints (/debug/pprof/) on addr (checked
// by checkDebugAddr), a listener of its own so the API never exposes them.
// It returns the listener (closed by the caller) or why it could not
// listen.
func serveDebug(addr string, logger *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	runtime.SetBlockProfileRate(debugBlockRate)
	runtime.SetMutexProfileFraction(debugMutexFraction)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	logger.Info("serving pprof", "debug_addr", ln.Addr().String(), "see", "go tool pprof http://"+ln.Addr().String()+"/debug/pprof/profile")
	return ln, nil
}

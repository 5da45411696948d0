package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// UnreachableError is a request that never reached a node: the
// connection was refused, the name did not resolve, or the dial failed.
// Its words are what every client shows (maosctl, its hooks, the MCP
// tools): "cannot reach a maos node at ADDR (WHY): is maosd running
// there?". Unwrap gives the request's error, so errors.Is(err,
// syscall.ECONNREFUSED) and errors.As(err, **url.Error) still work.
type UnreachableError struct {
	Addr string // the node's base URL, as the Client has it
	Why  error  // why the dial failed: syscall.ECONNREFUSED, a *net.DNSError, ...
	Err  error  // the request's error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach a maos node at %s (%v): is maosd running there?", e.Addr, e.Why)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// requestError wraps err, the failure of request method u before any
// answer came: an *UnreachableError when the dial failed, otherwise err
// with the method and URL (a timeout, a TLS handshake, a connection lost
// mid-request).
func (c *Client) requestError(method, u string, err error) error {
	err = fmt.Errorf("transport: %s %s: %w", method, u, err)
	if why := dialFailure(err); why != nil {
		return &UnreachableError{Addr: c.base, Why: why, Err: err}
	}
	return err
}

// dialFailure is why err, an http.Client error, could not connect, or nil
// when it is not a failed dial. A deadline or a cancel is not one: the
// caller gave up, the node may be there.
func dialFailure(err error) error {
	var (
		dns *net.DNSError
		op  *net.OpError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return syscall.ECONNREFUSED
	case errors.As(err, &dns):
		return dns
	case errors.As(err, &op) && op.Op == "dial":
		return op.Err
	}
	return nil
}

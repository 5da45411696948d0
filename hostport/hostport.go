// Package hostport is the one check of the host:port addresses maos
// listens on and hands to peers: cluster.Config.Validate (and through it
// maosd's address flags), maosd's --debug-addr and the API's join
// endpoint all call Check. It imports only the standard library, so every
// layer may use it.
package hostport

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Rule says what an address must be beyond host:port; rules combine with |.
type Rule uint8

const (
	// Listen is an address to listen on: any host, empty or a wildcard
	// (0.0.0.0, ::) for every interface, and a port 0..65535 (0: a free one).
	Listen Rule = 0
	// Specific wants a host that names one interface or machine: not
	// empty, not a wildcard. A listener bound there can advertise its
	// own address once the port is known.
	Specific Rule = 1 << 0
	// Port wants a port 1..65535: not 0, which only a listener resolves.
	Port Rule = 1 << 1
	// IP wants the host as an IP address, not a name (memberlist binds
	// and advertises IPs).
	IP Rule = 1 << 2

	// Dial is an address a peer can dial: a specific host and a port.
	Dial = Specific | Port
)

// Why Check refused an address; errors.Is(err, ErrWildcard) and so on
// match an *Error.
var (
	ErrSyntax   = errors.New("not host:port")
	ErrPort     = errors.New("port out of range")
	ErrWildcard = errors.New("wildcard host")
	ErrHostName = errors.New("host name where an IP is wanted")
	ErrHost     = errors.New("host with blanks or control characters")
)

// Error is an address Check refused: Addr as given, Kind one of the Err
// values above; Error() names the address and says what is wanted, e.g.
// `"0.0.0.0:7070": want a host peers can reach, not a wildcard`.
type Error struct {
	Addr string
	Kind error
	msg  string
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.Kind }

// Check returns nil when addr is host:port (IP:port under IP) and
// follows rule, or an *Error saying why not. A host may never hold
// blanks or control characters.
func Check(addr string, rule Rule) error {
	fail := func(kind error, format string, args ...any) error {
		return &Error{Addr: addr, Kind: kind, msg: fmt.Sprintf("%q", addr) + fmt.Sprintf(format, args...)}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if rule&IP != 0 {
			return fail(ErrSyntax, " is not IP:port")
		}
		return fail(ErrSyntax, " is not host:port")
	}
	lowest := uint64(0)
	if rule&Port != 0 {
		lowest = 1
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p < lowest {
		return fail(ErrPort, ": port must be %d..65535", lowest)
	}
	if strings.IndexFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return fail(ErrHost, ": the host has spaces or control characters")
	}
	ip := net.ParseIP(host)
	if rule&IP != 0 && ip == nil {
		return fail(ErrHostName, ": want an IP address, not a host name")
	}
	if rule&Specific != 0 && Wildcard(addr) {
		return fail(ErrWildcard, ": want a host peers can reach, not a wildcard")
	}
	return nil
}

// Wildcard reports whether addr (host:port) listens on every interface:
// its host is empty or an unspecified IP (0.0.0.0, ::). An address that
// is not host:port is not a wildcard.
func Wildcard(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

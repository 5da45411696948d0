package hostport

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		addr string
		rule Rule
		kind error  // nil: accepted
		says string // what the error says
	}{
		{"127.0.0.1:7070", Dial, nil, ""},
		{"node-1.example:7070", Dial, nil, ""},
		{"[::1]:7070", Dial | IP, nil, ""},
		{"0.0.0.0:0", Listen, nil, ""},
		{":7070", Listen, nil, ""},
		{"127.0.0.1:0", Specific, nil, ""},
		{"10.0.0.5:65535", Dial | IP, nil, ""},

		{"127.0.0.1", Dial, ErrSyntax, `"127.0.0.1" is not host:port`},
		{"127.0.0.1", Listen | IP, ErrSyntax, `"127.0.0.1" is not IP:port`},
		{"nonsense", Listen, ErrSyntax, "is not host:port"},
		{"127.0.0.1:0", Dial, ErrPort, `"127.0.0.1:0": port must be 1..65535`},
		{"127.0.0.1:", Dial, ErrPort, "port must be 1..65535"},
		{"127.0.0.1:65536", Listen, ErrPort, "port must be 0..65535"},
		{"127.0.0.1:http", Listen, ErrPort, "port must be 0..65535"},
		{"0.0.0.0:7070", Dial, ErrWildcard, `"0.0.0.0:7070": want a host peers can reach, not a wildcard`},
		{"[::]:7070", Specific, ErrWildcard, "not a wildcard"},
		{":7070", Dial, ErrWildcard, "not a wildcard"},
		{"localhost:7072", Listen | IP, ErrHostName, "want an IP address, not a host name"},
		{":7072", Listen | IP, ErrHostName, "want an IP address"},
		{"a b:7070", Listen, ErrHost, "spaces or control characters"},
		{"a\x7fb:7070", Dial, ErrHost, "spaces or control characters"},
	} {
		err := Check(tc.addr, tc.rule)
		if tc.kind == nil {
			if err != nil {
				t.Errorf("Check(%q, %b) = %v, want nil", tc.addr, tc.rule, err)
			}
			continue
		}
		var e *Error
		if !errors.Is(err, tc.kind) || !errors.As(err, &e) || e.Addr != tc.addr || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Check(%q, %b) = %v, want %v saying %q", tc.addr, tc.rule, err, tc.kind, tc.says)
		}
	}
}

func TestWildcard(t *testing.T) {
	for addr, want := range map[string]bool{
		"0.0.0.0:7070": true, "[::]:7070": true, ":7070": true,
		"127.0.0.1:7070": false, "host:7070": false, "nonsense": false,
	} {
		if got := Wildcard(addr); got != want {
			t.Errorf("Wildcard(%q) = %v, want %v", addr, got, want)
		}
	}
}

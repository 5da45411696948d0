package client

import (
	"strconv"
	"strings"
	"time"
)

// parseRetryAfter reads a Retry-After header in seconds (the only form
// maos sends); anything else is 0.
func parseRetryAfter(h string) time.Duration {
	n, err := strconv.ParseUint(strings.TrimSpace(h), 10, 32)
	if err != nil {
		return 0
	}
	return time.Duration(n) * time.Second
}

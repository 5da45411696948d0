package fsm

// isAlnum reports whether c is in [a-z0-9].
func isAlnum(c byte) bool { return ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') }

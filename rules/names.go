package rules

// NamePattern is the rule for agent ids and role names (and, in fsm, for
// channels, types and tags): what ValidName accepts.
const NamePattern = `^[a-z0-9][a-z0-9._-]{0,63}$`

// MaxNameLen is the longest name ValidName accepts, in bytes.
const MaxNameLen = 64

// ValidName reports whether s matches NamePattern. By hand rather than by
// regexp: it runs several times per send on every node.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isAlnum reports whether c is in [a-z0-9].
func isAlnum(c byte) bool { return ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') }

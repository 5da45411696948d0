package rules

import (
	"regexp"
	"strings"
	"testing"
)

var nameRE = regexp.MustCompile(NamePattern)

var nameSeeds = []string{"", "a", "A", "0", "-a", "a-", "a.b_c-d", "a b", "é", "a\n", "aB", "role:x", "a*",
	strings.Repeat("a", MaxNameLen), strings.Repeat("a", MaxNameLen+1)}

func TestValidNameMatchesPattern(t *testing.T) {
	for _, s := range nameSeeds {
		if got, want := ValidName(s), nameRE.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzValidName(f *testing.F) {
	for _, s := range nameSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidName(s), nameRE.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	})
}

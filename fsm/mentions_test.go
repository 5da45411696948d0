package fsm

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// mentionRef is the definition mentions implements by hand: "@name" not
// preceded by a name character, trailing punctuation cut, checked with the
// name rule.
var mentionRef = regexp.MustCompile(`(?:^|[^A-Za-z0-9._-])@([A-Za-z0-9][A-Za-z0-9._-]*)`)

func mentionsRef(text string, max int) []string {
	var out []string
	seen := map[string]bool{}
	for _, sm := range mentionRef.FindAllStringSubmatch(text, -1) {
		name := strings.TrimRight(sm[1], ".-_")
		if !nameRE.MatchString(name) || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, name)
		if len(out) == max {
			break
		}
	}
	return out
}

func TestMentionsMatchesDefinition(t *testing.T) {
	for _, text := range mentionSeeds {
		if got, want := mentions(text, api.MaxRecipients), mentionsRef(text, api.MaxRecipients); !slices.Equal(got, want) {
			t.Errorf("mentions(%q) = %q, want %q", text, got, want)
		}
	}
	if got := mentions("@a @b @c", 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("max 2: got %q", got)
	}
}

func TestValidNameMatchesRule(t *testing.T) {
	for _, s := range []string{"", "a", "A", "0", "-a", "a-", "a.b_c-d", "a b", "é", strings.Repeat("a", 64), strings.Repeat("a", 65), "a\n", "aB"} {
		if got, want := api.ValidName(s), nameRE.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}

var mentionSeeds = []string{
	"", "@", "@@", "@a", "hi @claude.", "mail bob@example.com", "@Claude", "a@@b", "x @@a",
	"(@codex-1) and @codex-1 again", "@a@b", "@-a @_b @.c", "tab\t@w2\n@w3", "ünï@w4 é@w5",
	"@" + strings.Repeat("a", 70), "end @w6-", "\xff@w7", "@w8...", "@a.b.c_ d",
}

func FuzzMentions(f *testing.F) {
	for _, s := range mentionSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := mentions(text, 8), mentionsRef(text, 8); !slices.Equal(got, want) {
			t.Errorf("mentions(%q) = %q, want %q", text, got, want)
		}
		if got, want := api.ValidName(text), nameRE.MatchString(text); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", text, got, want)
		}
	})
}

// nameRE is the name rule as its pattern says it, the reference ValidName
// is held to.
var nameRE = regexp.MustCompile(api.NamePattern)

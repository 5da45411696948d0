package rules

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzDecode: any input either decodes to a valid document, which prints
// as YAML that reads back to the same document, or is refused with one of
// the two documented error kinds; it never panics.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{seedRulesJSON, seedRulesYAML(f), precedenceDoc, `{}`, `[]`, "",
		`{"interrupt": ["role:lead", "ops-*"], "preset": "hierarchical"}`, "interrupt: []\n",
		"agents:\n  - {agent: x, can_send_to: '*'}\n", "reroute_blocked_to: hub\n", "a: &x [1]\nb: *x\n", "1: x\n"} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, asYAML bool) {
		format := JSON
		if asYAML {
			format = YAML
		}
		d, err := Decode(data, format)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode(%q): %v wraps neither ErrMalformed nor ErrInvalid", data, err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("Decode(%q) returned a document Validate refuses: %v", data, err)
		}
		out, err := EncodeYAML(d)
		if err != nil {
			t.Fatalf("EncodeYAML: %v", err)
		}
		back, err := Decode(out, YAML)
		if err != nil {
			t.Fatalf("Decode(%q) printed\n%s\nwhich reads back as %v", data, out, err)
		}
		if !reflect.DeepEqual(back, d) {
			t.Fatalf("Decode(%q) printed\n%s\nwhich reads back as %+v, want %+v", data, out, back, d)
		}
	})
}

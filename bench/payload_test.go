package bench

import (
	"testing"

	"github.com/maos-project/maos/secrets"
)

// The benchmarks' messages pass the default secret_guard (refuse), at
// every size up to the default message limit.
func TestPayloadHoldsNoSecret(t *testing.T) {
	for _, n := range []int{1, 64, 1024, 4096, 100 << 10} {
		text := Payload(n)
		found, err := secrets.Scan(secrets.Field{Name: "content.text", Text: &text})
		if err != nil {
			t.Fatal(err)
		}
		if len(found) > 0 {
			t.Errorf("Payload(%d) is taken for a secret (rule %s)", n, found[0].Rule)
		}
	}
}

package chaos

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/maos-project/maos/secrets"
)

// The workload's messages pass the default secret_guard (refuse): were a
// random text taken for a secret, a send would be refused and the run's
// history would count a failure that is not the cluster's.
func TestWorkloadTextHoldsNoSecret(t *testing.T) {
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 1))
		text := fmt.Sprintf("jepsen-c%d-%d %s", seed%8, seed, randomText(r, DefaultTextBytes*4))
		found, err := secrets.Scan(secrets.Field{Name: "content.text", Text: &text})
		if err != nil {
			t.Fatal(err)
		}
		if len(found) > 0 {
			t.Fatalf("seed %d: %q is taken for a secret (rule %s)", seed, text, found[0].Rule)
		}
	}
}

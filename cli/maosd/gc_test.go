package maosd

import (
	"runtime/debug"
	"testing"
)

// Without GOGC in the environment maosd sets its own default; with it,
// the runtime's reading of it stands.
func TestGCDefaultYieldsToGOGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOGC" {
				return v
			}
			return ""
		}
	}
	if got := setGCDefault(env("")); got != defaultGOGC {
		t.Errorf("GOGC unset: target %d, want %d", got, defaultGOGC)
	}
	if cur := debug.SetGCPercent(100); cur != defaultGOGC {
		t.Errorf("GOGC unset: the runtime's target is %d, want %d", cur, defaultGOGC)
	}
	// As if the runtime had read GOGC=50 at start.
	debug.SetGCPercent(50)
	if got := setGCDefault(env("50")); got != 50 {
		t.Errorf("GOGC=50: target %d, want 50", got)
	}
	if cur := debug.SetGCPercent(100); cur != 50 {
		t.Errorf("GOGC=50: the runtime's target is %d, want the operator's 50", cur)
	}
}

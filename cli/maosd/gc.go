package maosd

import (
	"os"
	"runtime/debug"
)

// defaultGOGC is the garbage collector's target (GOGC, percent of the live
// heap) maosd runs with when its environment sets no GOGC. A send makes
// short-lived garbage on every node (request and entry buffers, decoded
// messages); at Go's 100 the collector was 8-11% of a node's CPU under
// load. 200 lets the heap grow to three times its live size between
// cycles instead of two: the live heap of a node is tens of MiB (the
// state lives in the memory-mapped state file, not the heap), so that
// costs tens of MiB. docs/PERFORMANCE.md, "Issue 19: CPU per send".
const defaultGOGC = 200

// setGCDefault sets the collector's target to defaultGOGC unless the
// environment sets GOGC (which the Go runtime has read and applied at
// start, "off" included): the operator's word wins. It returns the
// target in effect, or -1 for GOGC=off.
func setGCDefault(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		cur := debug.SetGCPercent(-1)
		debug.SetGCPercent(cur)
		return cur
	}
	debug.SetGCPercent(defaultGOGC)
	return defaultGOGC
}

// gcDefault is setGCDefault on the process's environment.
func gcDefault() int { return setGCDefault(os.Getenv) }

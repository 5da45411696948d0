// Package system holds the multi-process system tests of maos: they build
// maosd and maosctl once (TestMain) and run them as an operator would,
// through the harness in testing/harness -- several maosd processes on
// loopback, killed, paused and restarted from their data dirs -- and check
// what clients were told against what every node stores.
package system

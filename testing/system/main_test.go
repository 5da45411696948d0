package system

import (
	"fmt"
	"os"
	"testing"

	"github.com/maos-project/maos/testing/harness"
)

// The binaries under test, built once by TestMain; stubmodelBin is the
// stub model CLI the watcher tests give their agents as command.
var maosdBin, maosctlBin, stubmodelBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "maos-system-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "system tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	maosdBin, maosctlBin, err = harness.BuildBinaries(dir)
	if err == nil {
		stubmodelBin, err = harness.BuildStubModel(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "system tests:", err)
		return 1
	}
	return m.Run()
}

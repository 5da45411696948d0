package system

import (
	"fmt"
	"os"
	"testing"

	"github.com/maos-project/maos/testing/harness"
)

// The binaries under test, built once by TestMain.
var maosdBin, maosctlBin string

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
	if err != nil {
		fmt.Fprintln(os.Stderr, "system tests:", err)
		return 1
	}
	return m.Run()
}

package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// buildTimeout bounds one `go build` of the binaries (a cold cache on a
// slow CI machine takes a while; a warm one about a second).
const buildTimeout = 5 * time.Minute

// ModuleRoot returns the directory of the go.mod that governs the current
// working directory, found by walking up from it. `go test` runs a test
// binary in its package's directory, so from a test this is the repository
// root.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("harness: module root: %w", err)
	}
	for {
		if fi, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !fi.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("harness: module root: no go.mod in the working directory or any parent")
		}
		dir = parent
	}
}

// BuildBinaries runs `go build` of ./cmd/maosd and ./cmd/maosctl of the
// module that holds the working directory, writing both into dir (created
// if needed), and returns their paths. The binaries are normal builds (no
// -race), whatever flags the calling test was built with. Call it once per
// test binary, from TestMain, into a temporary directory.
func BuildBinaries(dir string) (maosd, maosctl string, err error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("harness: build: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", fmt.Errorf("harness: build: %w", err)
	}
	gobin, err := goTool()
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", abs+string(filepath.Separator), "./cmd/maosd", "./cmd/maosctl")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("harness: go build ./cmd/maosd ./cmd/maosctl in %s: %w\n%s", root, err, out.String())
	}
	maosd, maosctl = filepath.Join(abs, "maosd"), filepath.Join(abs, "maosctl")
	for _, p := range []string{maosd, maosctl} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("harness: go build did not write %s: %w", p, err)
		}
	}
	return maosd, maosctl, nil
}

// goTool finds the go command: $GOROOT/bin/go when `go test` exported
// GOROOT, else the first go on $PATH.
func goTool() (string, error) {
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("harness: the go command is needed to build the binaries: %w", err)
	}
	return p, nil
}

// BuildStubModel runs `go build` of ./testing/stubmodel (the deterministic
// stand-in for a model CLI that watcher tests configure as an agent's
// command) into dir and returns the binary's path. Like BuildBinaries it is
// a normal build; call it once, from TestMain.
func BuildStubModel(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("harness: build stubmodel: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("harness: build stubmodel: %w", err)
	}
	gobin, err := goTool()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	bin := filepath.Join(abs, "stubmodel")
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", bin, "./testing/stubmodel")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("harness: go build ./testing/stubmodel in %s: %w\n%s", root, err, out.String())
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("harness: go build did not write %s: %w", bin, err)
	}
	return bin, nil
}

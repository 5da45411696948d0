package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// BuildMaosdOf builds the maosd of another commit of this repository --
// the previous release, for a rolling upgrade from it -- into dir
// (created if needed) and returns the binary's path. The commit's tree is
// taken from the git history of the module that holds the working
// directory (`git archive`, extracted into dir/src), so it needs git and a
// clone that holds the commit; either missing is an error that says so.
// Like BuildBinaries it is a normal build (-trimpath, so the packages the
// two trees share come from the build cache).
func BuildMaosdOf(commit, dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return "", fmt.Errorf("harness: building maosd of %s needs git: %w", commit, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("harness: build %s: %w", commit, err)
	}
	src := filepath.Join(abs, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", fmt.Errorf("harness: build %s: %w", commit, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	var errb bytes.Buffer
	if err := exec.CommandContext(ctx, git, "-C", root, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		return "", fmt.Errorf("harness: commit %s is not in the git history of %s (%v): a test that builds it needs a clone with that history, not an export", commit, root, err)
	}
	archive := exec.CommandContext(ctx, git, "-C", root, "archive", "--format=tar", commit)
	archive.Stderr = &errb
	out, err := archive.StdoutPipe()
	if err != nil {
		return "", fmt.Errorf("harness: git archive %s: %w", commit, err)
	}
	if err := archive.Start(); err != nil {
		return "", fmt.Errorf("harness: git archive %s: %w", commit, err)
	}
	xerr := untar(out, src)
	if err := archive.Wait(); err != nil || xerr != nil {
		return "", fmt.Errorf("harness: git archive %s into %s: %v %v\n%s", commit, src, err, xerr, errb.String())
	}
	return goBuildMaosd(ctx, src, abs, commit)
}

// goBuildMaosd builds ./cmd/maosd of the module in src into dir as
// maosd-<commit's first 12 hex digits>.
func goBuildMaosd(ctx context.Context, src, dir, commit string) (string, error) {
	gobin, err := goTool()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "maosd-"+commit[:min(12, len(commit))])
	cmd := exec.CommandContext(ctx, gobin, "build", "-trimpath", "-o", bin, "./cmd/maosd")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("harness: go build ./cmd/maosd of %s in %s: %w\n%s", commit, src, err, out.String())
	}
	return bin, nil
}

// untar extracts a tar stream of directories and regular files (what git
// archive writes; its global header is skipped) into dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, dir+string(filepath.Separator)) && name != dir {
			return fmt.Errorf("tar entry %q leaves %s", h.Name, dir)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			err = writeEntry(name, tr, os.FileMode(h.Mode).Perm())
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, name)
		}
		if err != nil {
			return err
		}
	}
}

func writeEntry(name string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode|0o200)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}

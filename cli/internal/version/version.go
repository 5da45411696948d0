// Package version says which build of maosd and maosctl is running: the
// module version and the VCS commit Go stamps into every build from a git
// checkout (runtime/debug.ReadBuildInfo), which a release build may
// override with -ldflags -X (make build passes git describe's answer).
// Both programs print it for --version; it lives beside them, as
// secretfile does, because nothing outside cli/ needs it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version and Commit, when set at link time, win over the build info:
//
//	go build -ldflags "-X github.com/maos-project/maos/cli/internal/version.Version=v1.2.0 \
//	  -X github.com/maos-project/maos/cli/internal/version.Commit=$(git rev-parse HEAD)" ./cmd/maosd
//
// make build sets Version to `git describe --always --dirty`.
var (
	Version string
	Commit  string
)

// Info is what a binary knows about its build. Its Version is the one
// every place that names the build reports: --version of both programs,
// a node's gossip metadata (so maosctl members) and status, the MCP
// server's implementation info.
type Info struct {
	// Version is the -X Version, else the main module's version
	// ("v1.2.0", or "(devel)" for a build from a checkout), else "devel".
	Version string
	// Commit is the -X Commit, else the vcs.revision Go stamped (shortened
	// to 12 characters), else "unknown" (a build outside a checkout, or
	// with -buildvcs=false).
	Commit string
	// Modified is true when the checkout had uncommitted changes
	// (vcs.modified), or when the -X Version ends in "-dirty".
	Modified bool
	// Go is the toolchain and platform, "go1.26.8 linux/amd64".
	Go string
}

// Get reads the build info and the link-time overrides.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(bi, Version, Commit)
}

func get(bi *debug.BuildInfo, version, commit string) Info {
	in := Info{Version: "devel", Commit: "unknown", Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			in.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = short(s.Value)
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if version = strings.TrimSpace(version); version != "" {
		in.Version = version
		if strings.HasSuffix(version, "-dirty") {
			in.Modified = true
		}
	}
	if commit = strings.TrimSpace(commit); commit != "" {
		in.Commit = short(commit)
	}
	return in
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// String is what --version prints after "NAME version ":
// "v1.2.0 (commit 0dc7490c1a2b, go1.26.8 linux/amd64)", with ", modified"
// after the commit for a build from a checkout with uncommitted changes.
func (in Info) String() string {
	mod := ""
	if in.Modified {
		mod = ", modified"
	}
	return fmt.Sprintf("%s (commit %s%s, %s)", in.Version, in.Commit, mod, in.Go)
}

// String is Get().String().
func String() string { return Get().String() }

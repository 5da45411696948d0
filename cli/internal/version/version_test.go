package version

import (
	"regexp"
	"runtime/debug"
	"testing"
)

// Line is the format of a --version line; the system tests check the
// binaries' output against the same pattern.
var line = regexp.MustCompile(`^\S+ \(commit (?:[0-9a-f]{4,40}|unknown)(, modified)?, go\S+ \S+/\S+\)$`)

func TestGet(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0dc7490c1a2b3c4d5e6f708192a3b4c5d6e7f809"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name            string
		bi              *debug.BuildInfo
		version, commit string
		want            Info
	}{
		{"no build info", nil, "", "", Info{Version: "devel", Commit: "unknown"}},
		{"stamped checkout", stamped, "", "", Info{Version: "devel", Commit: "0dc7490c1a2b", Modified: true}},
		{"module version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, "", "", Info{Version: "v1.2.0", Commit: "unknown"}},
		{"-X version wins", stamped, "v1.3.0-4-gabcdef0", "", Info{Version: "v1.3.0-4-gabcdef0", Commit: "0dc7490c1a2b", Modified: true}},
		{"-X dirty describe", &debug.BuildInfo{}, "abcdef0-dirty", "", Info{Version: "abcdef0-dirty", Commit: "unknown", Modified: true}},
		{"-X commit wins", stamped, "v2", "1234567", Info{Version: "v2", Commit: "1234567", Modified: true}},
	} {
		got := get(tc.bi, tc.version, tc.commit)
		if got.Go == "" {
			t.Errorf("%s: Go is empty", tc.name)
		}
		got.Go = ""
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestString(t *testing.T) {
	in := Info{Version: "v1.2.0", Commit: "0dc7490c1a2b", Go: "go1.26.8 linux/amd64"}
	if got, want := in.String(), "v1.2.0 (commit 0dc7490c1a2b, go1.26.8 linux/amd64)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	in.Modified = true
	if got, want := in.String(), "v1.2.0 (commit 0dc7490c1a2b, modified, go1.26.8 linux/amd64)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if s := String(); !line.MatchString(s) {
		t.Errorf("String() = %q, not of the form %s", s, line)
	}
}

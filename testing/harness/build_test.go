package harness

import (
	"strings"
	"testing"

	"github.com/maos-project/maos/testing/testenv"
)

// A commit the history does not hold is an error that says so (a test
// that needs a previous build then fails, naming it, rather than skip).
func TestBuildMaosdOfAMissingCommitSaysSo(t *testing.T) {
	testenv.Tool(t, "git", "BuildMaosdOf reads the repository's history")
	const commit = "0123456789abcdef0123456789abcdef01234567"
	_, err := BuildMaosdOf(commit, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "commit "+commit+" is not in the git history") {
		t.Fatalf("BuildMaosdOf(a commit no one made): %v, want an error naming the missing commit", err)
	}
}

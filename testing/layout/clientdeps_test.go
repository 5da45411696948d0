package layout

import (
	"os/exec"
	"strings"
	"testing"
)

// storageModules are the modules a client of the API must not link: the
// state's storage, Raft, and the secret scanner the server runs.
var storageModules = []string{"go.etcd.io/bbolt", "github.com/hashicorp/raft", "github.com/zricethezav/gitleaks"}

// clientPrograms are the clients of the public API (DESIGN.md: "Clients of
// the public API"): they import api and api/client, never fsm or
// transport, so `go list -deps` of each shows none of storageModules.
var clientPrograms = []string{"cmd/maosctl", "api", "api/client", "watcher", "mcpserver", "bench", "bridge", "console", "a2ahost", "a2arelay", "artifacts", "dialect"}

func TestClientsLinkNoStorage(t *testing.T) {
	dir, mod := moduleRoot(t)
	for _, p := range clientPrograms {
		out, err := exec.Command("go", "list", "-C", dir, "-deps", mod+"/"+p).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", p, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, m := range storageModules {
				if dep == m || strings.HasPrefix(dep, m+"/") {
					t.Errorf("%s links %s: a client imports the vocabulary (api) and the client (api/client), never fsm or transport", p, dep)
				}
			}
		}
	}
}

package maosctl

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// An agent whose watchers take its lease on two nodes: who adds SERVED
// BY (the holder's node) and STANDBY (the other's), and --json has them.
func TestWhoShowsLeases(t *testing.T) {
	e := newTestEnv(t)
	now := time.Now().UTC()
	e.svc.SetPresence(api.Presence{AgentID: "claude", Node: "n1", State: "AWAKE", Substate: "IDLE", Source: "watcher",
		Timestamp: now.Add(-time.Second), Version: 1, Origin: "n1"})
	e.svc.SetPresence(api.Presence{AgentID: "codex", Node: "n2", State: "AWAKE", Substate: "IDLE", Source: "hook",
		Timestamp: now.Add(-time.Second), Version: 1, Origin: "n2"})
	cl := client.NewClient("http://"+e.addr, nil)
	ctx := context.Background()
	for _, node := range []string{"n1", "n2"} {
		if _, err := cl.AcquireAgentLease(ctx, api.AgentLeaseAcquireCommand{Agent: "claude", LeaseHolder: api.LeaseHolder{Node: node, Instance: "w-" + node},
			TTL: api.LockTTL(10 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimRight(e.ok("who"), "\n"), "\n")
	for i, re := range []string{
		`^AGENT\s+STATE\s+SUBSTATE\s+SOURCE\s+NODE\s+CHANNEL\s+LAST SEEN\s+TASK\s+SERVED BY\s+STANDBY$`,
		`^claude\s+AWAKE\s+IDLE\s+watcher\s+n1\s+-\s+\d+s ago\s+-\s+n1\s+n2$`,
		`^codex\s+AWAKE\s+IDLE\s+hook\s+n2\s+-\s+\d+s ago\s+-\s+-\s+-$`,
	} {
		if i >= len(lines) || !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("who line %d = %q, want it to match %s", i, strings.Join(lines, "\n"), re)
		}
	}
	var one api.Presence
	if err := json.Unmarshal([]byte(e.ok("--json", "who", "claude")), &one); err != nil || one.ServedBy != "n1" || one.Standby != "n2" {
		t.Errorf("who --json claude = %+v, %v; want served_by n1, standby [n2]", one, err)
	}
}

package cluster_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
)

// The leader deletes, on every node, an artifact no stored message
// references once it is older than artifact_retention_seconds; one a
// message references stays, until retention trims that message.
func TestLeaderDeletesUnreferencedArtifacts(t *testing.T) {
	cluster.SetTrimInterval(t, 50*time.Millisecond)
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	cl := c.Follower().Client
	if _, err := cl.SetConfig(ctx, "artifact_retention_seconds", 1); err != nil {
		t.Fatal(err)
	}
	put := func(b string) api.Artifact {
		t.Helper()
		a, err := cl.PutArtifact(ctx, bytes.NewReader([]byte(b)), int64(len(b)), api.ArtifactUpload{Name: "f.txt", From: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	loose, kept := put("nobody references me"), put("a message references me")
	m := clustertest.Msg("alice", "ops", "see attached")
	m.Content.Artifacts = []api.ArtifactRef{{Ref: kept.ID, Name: "f.txt"}}
	if _, err := cl.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	gone := func(id string) func() bool {
		return func() bool {
			for _, n := range c.Nodes {
				if _, err := n.FSM().Artifact(id); !errors.Is(err, api.ErrNotFound) {
					return false
				}
			}
			return true
		}
	}
	clustertest.WaitFor(t, 20*time.Second, "every node deleted the unreferenced artifact", gone(loose.ID))
	for _, n := range c.Nodes {
		if a, err := n.FSM().Artifact(kept.ID); err != nil || a.Refs != 1 {
			t.Fatalf("%s: the referenced artifact = %+v, %v; want kept with 1 ref", n.ID(), a, err)
		}
	}
	// Once retention trims the message, nothing references the other one
	// and it goes too.
	if _, err := cl.SetRetention(ctx, "ops", "", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Send(ctx, clustertest.Msg("alice", "ops", "a later one, with nothing attached")); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 20*time.Second, "every node deleted the artifact its trimmed message referenced", gone(kept.ID))
}

package transport_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// A request carrying another cluster's id (a node of another cluster) is
// refused with 409 naming both ids; the same id, or none (a client), is
// served; before the node knows its own id nothing is checked.
func TestClusterHeaderOfAnotherClusterRefused(t *testing.T) {
	fake := transporttest.New(t)
	srv := serve(t, fake, transport.ServerOptions{})
	ctx := context.Background()
	other := client.NewClient(srv.URL, nil).WithCluster("cother")
	if _, err := other.Status(ctx); err != nil {
		t.Fatalf("before the node has a cluster id: %v", err)
	}
	const mine = "c0123456789abcdef0123456789abcdef"
	if _, err := fake.ApplyCommand(api.OpClusterID, api.ClusterIDCommand{ClusterID: mine}); err != nil {
		t.Fatal(err)
	}
	_, err := other.Status(ctx)
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "cluster cother") || !strings.Contains(err.Error(), "belongs to cluster "+mine) {
		t.Fatalf("a node of another cluster: %v; want 409 naming both ids", err)
	}
	for _, c := range []*client.Client{client.NewClient(srv.URL, nil), client.NewClient(srv.URL, nil).WithCluster(mine)} {
		if _, err := c.Status(ctx); err != nil {
			t.Fatalf("a client, or a node of this cluster: %v", err)
		}
	}
}

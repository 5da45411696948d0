package a2ahost_test

import (
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacyclient "github.com/a2aproject/a2a-go/a2aclient"
	legacycard "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/maos-project/maos/a2ahost"
)

// A client of A2A 0.3, the SDK's own 0.3 release (a2a-go v0.3, not the v2
// code the endpoint is built with), given the agent's 0.3 base URL, reads
// its card, sends it a message, which becomes a maos task for bob from
// alice, reads the task back and cancels it.
func TestV03ClientDrivesTheV03Endpoint(t *testing.T) {
	n := start(t)
	ctx := t.Context()
	base := n.url + a2ahost.V03Path("bob")
	card, err := legacycard.NewResolver(bearer(n.alice)).Resolve(ctx, base,
		legacycard.WithRequestHeader("Authorization", "Bearer "+n.alice))
	if err != nil {
		t.Fatal(err)
	}
	if card.URL != base || card.Name != "bob" || card.PreferredTransport != legacy.TransportProtocolJSONRPC {
		t.Fatalf("0.3 card url %q name %q transport %q, want %q, bob, JSONRPC", card.URL, card.Name, card.PreferredTransport, base)
	}
	c, err := legacyclient.NewFromCard(ctx, card, legacyclient.WithJSONRPCTransport(bearer(n.alice)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.SendMessage(ctx, &legacy.MessageSendParams{
		Message: legacy.NewMessage(legacy.MessageRoleUser, legacy.TextPart{Text: "Port the parser\nto Go 1.26"}),
		Config:  &legacy.MessageSendConfig{Blocking: new(false)},
	})
	if err != nil {
		t.Fatal(err)
	}
	sent, ok := res.(*legacy.Task)
	if !ok {
		t.Fatalf("SendMessage answered %T, want a task", res)
	}
	task, err := n.admin.Task(ctx, string(sent.ID))
	if err != nil {
		t.Fatalf("the maos task of %s: %v", sent.ID, err)
	}
	if task.To != "bob" || task.From != "alice" || task.Title != "Port the parser" {
		t.Fatalf("maos task to %q from %q title %q, want bob, alice, the first line", task.To, task.From, task.Title)
	}
	got, err := c.GetTask(ctx, &legacy.TaskQueryParams{ID: sent.ID})
	if err != nil || got.Status.State != legacy.TaskStateSubmitted {
		t.Fatalf("GetTask: %+v (%v), want submitted", got, err)
	}
	if got, err = c.CancelTask(ctx, &legacy.TaskIDParams{ID: sent.ID}); err != nil || got.Status.State != legacy.TaskStateCanceled {
		t.Fatalf("CancelTask: %+v (%v), want canceled", got, err)
	}
}

package a2ahost_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/api"
)

// An agent without a description is described by its role; its role and
// capabilities are skills; the interface is the URL given.
func TestCardOfAgentWithoutDescription(t *testing.T) {
	c := a2ahost.Card(api.Agent{ID: "rev", Role: "reviewer", Capabilities: []string{"go"}}, "https://n1:7070/a2a/agents/rev", "v1")
	if c.Name != "rev" || !strings.Contains(c.Description, "reviewer") || c.Version != "v1" {
		t.Errorf("card %q %q %q", c.Name, c.Description, c.Version)
	}
	if len(c.Skills) != 2 || c.Skills[0].ID != "role:reviewer" || c.Skills[1].ID != "capability:go" {
		t.Errorf("skills %+v", c.Skills)
	}
	in := c.SupportedInterfaces
	if len(in) != 2 || in[0].URL != "https://n1:7070/a2a/agents/rev" || in[0].ProtocolBinding != a2a.TransportProtocolJSONRPC ||
		in[0].ProtocolVersion != a2a.Version {
		t.Fatalf("interfaces %+v, want 1.0 JSON-RPC first, then 0.3", in)
	}
	if in[1].URL != "https://n1:7070/a2a/agents/rev/v0.3" || in[1].ProtocolBinding != a2a.TransportProtocolJSONRPC || in[1].ProtocolVersion != "0.3" {
		t.Errorf("the 0.3 interface %+v", *in[1])
	}
	if !c.Capabilities.Streaming || c.Capabilities.PushNotifications {
		t.Errorf("card capabilities %+v, want streaming and no push", c.Capabilities)
	}
}

// Text parts are the description, the first line the title (cut to
// api.MaxTitleLen); a message without text is refused.
func TestTaskFromMessage(t *testing.T) {
	long := strings.Repeat("é", api.MaxTitleLen) // 2 bytes each
	cmd, err := a2ahost.TaskFromMessage(a2a.NewMessage(a2a.MessageRoleUser,
		a2a.NewTextPart("  "+long+"\nsecond line"), a2a.NewTextPart("more")))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmd.Title) != api.MaxTitleLen || !strings.HasPrefix(long, cmd.Title) {
		t.Errorf("title %d bytes, want %d, a prefix of the first line", len(cmd.Title), api.MaxTitleLen)
	}
	if cmd.Description != long+"\nsecond line\n\nmore" {
		t.Errorf("description %q", cmd.Description)
	}
	_, err = a2ahost.TaskFromMessage(a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"k": 1})))
	if !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("data only: %v, want ErrInvalidParams", err)
	}
}

package maosd

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// maosd serves every agent as an A2A agent behind --auth: the card needs
// a token, and a message sent with an agent's token is a maos task.
func TestServesA2AAgentsBehindAuth(t *testing.T) {
	clearAuthEnv(t)
	adminFile := writeTokenFile(t, strings.Repeat("k", 44)+"\n", 0o600)
	ready, _ := runMaosdUntilReady(t, nil, "--auth", "--admin-token-file", adminFile)
	addr, _ := ready["api_addr"].(string)
	base := "http://" + addr
	ctx := t.Context()
	admin := client.NewClient(addr, nil).WithToken(strings.Repeat("k", 44))
	if _, err := admin.RegisterAgent(ctx, api.RegisterAgentCommand{ID: "worker", Role: "coder"}); err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CreateToken(ctx, "lead", "")
	if err != nil {
		t.Fatal(err)
	}
	var st *agentcard.ErrStatusNotOK
	if _, err := agentcard.NewResolver(nil).Resolve(ctx, base+a2ahost.AgentPath("worker")); !errors.As(err, &st) || st.StatusCode != http.StatusUnauthorized {
		t.Fatalf("card without a token: %v, want 401", err)
	}
	card, err := agentcard.NewResolver(nil).Resolve(ctx, base+a2ahost.AgentPath("worker"),
		agentcard.WithRequestHeader("Authorization", "Bearer "+tok.Token))
	if err != nil || card.Name != "worker" {
		t.Fatalf("card: %v, %v", card, err)
	}
	hc := &http.Client{Transport: authHeader{tok.Token}}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	// returnImmediately: no watcher works the task here, and a send
	// without it waits for the outcome (docs/A2A.md, "Blocking sends").
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ship it")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	sent, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage answered %T", res)
	}
	mt, err := admin.Task(ctx, string(sent.ID))
	if err != nil || mt.To != "worker" || mt.From != "lead" || mt.Title != "ship it" {
		t.Fatalf("maos task: %+v, %v", mt, err)
	}
}

// authHeader sends a bearer token on every request.
type authHeader struct{ secret string }

func (a authHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.secret)
	return http.DefaultTransport.RoundTrip(r)
}

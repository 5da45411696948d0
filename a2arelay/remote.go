// Package a2arelay makes a remote A2A agent a maos agent (docs/A2A.md,
// "Outbound"): an agent registered with an A2A remote
// (api.RegisterAgentCommand.A2A) is served by a watcher whose Runner
// (Relay) relays each of its tasks and messages to the remote agent with
// the official A2A SDK's client, so the agent lease, the task claim and
// fence, renewals, retries and artifact uploads are the watcher's. A
// Supervisor runs one such watcher per A2A agent of the registry inside
// every maosd; the agent's lease makes exactly one of them relay.
package a2arelay

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/maos-project/maos/api"
)

// remote is a connected remote agent: its card and a client of it.
type remote struct {
	card   *a2a.AgentCard
	client *a2aclient.Client
}

// bearer adds "Authorization: Bearer token" to every request of next.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect resolves r's Agent Card (at URL/.well-known/agent-card.json, or
// at URL itself when it ends in .json) and makes a client of the
// interface it names, every request with the credential. An unreachable
// remote, a card that is not one, or a card naming no interface the SDK
// speaks is the error (a failed attempt of the relay).
func connect(ctx context.Context, r api.A2ARemote) (*remote, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, fmt.Errorf("a2a url %q: %w", r.URL, err)
	}
	var tr http.RoundTripper = http.DefaultTransport
	if r.Credential != "" {
		tr = bearer{token: r.Credential, next: tr}
	}
	hc := &http.Client{Transport: tr} // no timeout: a stream lasts as long as the remote works
	base, opts := r.URL, []agentcard.ResolveOption(nil)
	if strings.HasSuffix(u.Path, ".json") {
		base = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
		opts = append(opts, agentcard.WithPath(u.Path))
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	card, err := agentcard.NewResolver(&http.Client{Transport: tr, Timeout: 30 * time.Second}).Resolve(cctx, base, opts...)
	if err != nil {
		return nil, fmt.Errorf("remote A2A agent %s: its card: %w", r.URL, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return nil, fmt.Errorf("remote A2A agent %s: a client of its card: %w", r.URL, err)
	}
	return &remote{card: card, client: c}, nil
}

// streams reports whether the remote streams (its card's capability).
func (r *remote) streams() bool { return r.card.Capabilities.Streaming }

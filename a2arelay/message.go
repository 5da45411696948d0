package a2arelay

import (
	"context"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/maos-project/maos/api"
)

// message relays maos message id as an A2A message (its title and text,
// messageId derived from it, contextId its thread) and prints the
// remote's answer as the reply's text: a Message's text, or the text of
// the task it started once that ends (a task that asks for input: its
// question, and the sender's next message starts anew). A task that
// fails is the error (a failed attempt, then the watcher's incident).
func (r *Relay) message(ctx context.Context, id string, o *out) error {
	m, err := r.Client.Message(ctx, id, api.Strong)
	if err != nil {
		return fmt.Errorf("maos message %s: %w", id, err)
	}
	rem, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = rem.client.Destroy() }()
	text := m.Content.Text
	if m.Title != "" {
		text = m.Title + "\n\n" + text
	}
	am := &a2a.Message{ID: api.DerivedID(r.Agent, m.Timestamp, "a2a-message\x00"+m.ID), ContextID: api.ThreadOf(m),
		Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart(text)},
		Metadata: map[string]any{"maos_message": m.ID, "maos_from": m.From, "maos_agent": r.Agent}}
	quiet := &out{} // a reply carries no progress lines
	at, err := r.send(ctx, rem, am, &follower{o: quiet})
	if err != nil {
		return err
	}
	answer := messageText(at.Status.Message)
	switch at.Status.State {
	case a2a.TaskStateCompleted:
		var parts []string
		if answer != "" {
			parts = append(parts, answer)
		}
		if _, err := writeArtifacts(textOnly(at.Artifacts), "", &parts); err != nil {
			return err
		}
		answer = strings.Join(parts, "\n\n")
	case a2a.TaskStateInputRequired:
	default:
		return finish(at, "", o)
	}
	if answer == "" {
		answer = "(the remote A2A agent answered with no text)"
	}
	o.print(answer)
	return nil
}

// textOnly is arts without their raw file parts (a reply keeps text).
func textOnly(arts []*a2a.Artifact) []*a2a.Artifact {
	var out []*a2a.Artifact
	for _, a := range arts {
		cp := *a
		cp.Parts = nil
		for _, p := range a.Parts {
			if _, raw := p.Content.(a2a.Raw); !raw {
				cp.Parts = append(cp.Parts, p)
			}
		}
		out = append(out, &cp)
	}
	return out
}

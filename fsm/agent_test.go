package fsm

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

func agentIDs(p api.AgentPage) []string {
	out := []string{}
	for _, a := range p.Agents {
		out = append(out, a.ID)
	}
	return out
}

func TestAgentRegistry(t *testing.T) {
	b := newMbox(t)
	a := b.register("alice", "reviewer", "go", "review", "go")
	if a.ID != "alice" || a.Role != "reviewer" || !slices.Equal(a.Capabilities, []string{"go", "review"}) || a.Auto || a.Index != 1 {
		t.Errorf("register result = %+v", a)
	}
	b.register("bob", "reviewer", "review")
	b.register("carol", "engineer", "go")
	got, err := b.ok(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "dave", Description: "no role given", Node: "n2"}).(*api.Agent), error(nil)
	if err != nil || got.Role != api.DefaultRole || got.Node != "n2" || got.Description != "no role given" {
		t.Errorf("register without role = %+v", got)
	}

	query := func(q api.AgentQuery) api.AgentPage {
		t.Helper()
		p, err := b.f.Agents(q)
		if err != nil {
			t.Fatalf("Agents(%+v): %v", q, err)
		}
		return p
	}
	for _, tt := range []struct {
		q    api.AgentQuery
		want []string
		more bool
	}{
		{api.AgentQuery{}, []string{"alice", "bob", "carol", "dave"}, false},
		{api.AgentQuery{Role: "reviewer"}, []string{"alice", "bob"}, false},
		{api.AgentQuery{Capability: "go"}, []string{"alice", "carol"}, false},
		{api.AgentQuery{Role: "reviewer", Capability: "go"}, []string{"alice"}, false},
		{api.AgentQuery{Role: "nobody"}, []string{}, false},
		{api.AgentQuery{Limit: 2}, []string{"alice", "bob"}, true},
		{api.AgentQuery{After: "bob", Limit: 1}, []string{"carol"}, true},
		{api.AgentQuery{Role: "reviewer", After: "alice"}, []string{"bob"}, false},
	} {
		p := query(tt.q)
		if got := agentIDs(p); !slices.Equal(got, tt.want) || p.HasMore != tt.more {
			t.Errorf("Agents(%+v) = %v more %t, want %v %t", tt.q, got, p.HasMore, tt.want, tt.more)
		}
	}
	roles, err := b.f.Roles()
	if err != nil || !maps.Equal(roles, map[string]uint64{"reviewer": 2, "engineer": 1, "agent": 1}) {
		t.Errorf("Roles = %v, %v", roles, err)
	}

	// Re-register bob as an engineer: every index follows.
	first, _ := b.f.Agent("bob")
	b.register("bob", "engineer", "go")
	bob, _ := b.f.Agent("bob")
	if bob.Role != "engineer" || !bob.RegisteredAt.Equal(first.RegisteredAt) || !bob.UpdatedAt.After(first.UpdatedAt) || bob.Index != 5 {
		t.Errorf("re-registered bob = %+v (first %+v)", bob, first)
	}
	if got := agentIDs(query(api.AgentQuery{Role: "reviewer"})); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("reviewers after the move = %v", got)
	}
	if got := agentIDs(query(api.AgentQuery{Capability: "review"})); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("capability review after the move = %v", got)
	}
	if roles, _ := b.f.Roles(); !maps.Equal(roles, map[string]uint64{"reviewer": 1, "engineer": 2, "agent": 1}) {
		t.Errorf("Roles after the move = %v", roles)
	}

	// Unregister: gone from every index; the inbox stays.
	b.send(b.msg("codex", "kept", "carol"))
	res := b.ok(api.OpUnregisterAgent, api.UnregisterAgentCommand{ID: "carol"}).(*api.Agent)
	if res.ID != "carol" || res.Role != "engineer" {
		t.Errorf("unregister result = %+v", res)
	}
	if _, err := b.f.Agent("carol"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Agent(carol) after unregister = %v", err)
	}
	if got := agentIDs(query(api.AgentQuery{Capability: "go"})); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("capability go after unregister = %v", got)
	}
	if roles, _ := b.f.Roles(); !maps.Equal(roles, map[string]uint64{"reviewer": 1, "engineer": 1, "agent": 2}) {
		t.Errorf("Roles after unregister = %v (codex registered by its send)", roles)
	}
	if c := b.counts("carol"); c.Total != 1 {
		t.Errorf("carol's inbox after unregister = %+v, want it kept", c)
	}
	before := dataDump(t, b.f)
	if err := mustError(t, b.apply(api.OpUnregisterAgent, api.UnregisterAgentCommand{ID: "carol"})); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unregister twice = %v, want ErrNotFound", err)
	}
	if dataDump(t, b.f) != before {
		t.Errorf("a refused unregister changed the state")
	}

	var labels []string
	for _, l := range b.auditLines() {
		labels = append(labels, l[strings.Index(l, "] ")+2:])
	}
	for _, want := range []string{"[alice] REGISTER: role reviewer, capabilities go,review", "[dave] REGISTER: role agent, node n2",
		"[bob] REGISTER: role engineer, capabilities go", "[carol] UNREGISTER: role engineer"} {
		if !slices.Contains(labels, want) {
			t.Errorf("audit lacks %q: %q", want, labels)
		}
	}
}

func TestRegisterAgentRefusals(t *testing.T) {
	tests := []struct {
		name  string
		cmd   api.RegisterAgentCommand
		field string
	}{
		{"no id", api.RegisterAgentCommand{Role: "x"}, "id"},
		{"bad id", api.RegisterAgentCommand{ID: "Alice"}, "id"},
		{"bad role", api.RegisterAgentCommand{ID: "alice", Role: "role:x"}, "role"},
		{"bad capability", api.RegisterAgentCommand{ID: "alice", Capabilities: []string{"go", "C++"}}, "capabilities[1]"},
		{"too many capabilities", api.RegisterAgentCommand{ID: "alice", Capabilities: func() []string {
			var c []string
			for i := range api.MaxCapabilities + 1 {
				c = append(c, "c"+strings.Repeat("x", i))
			}
			return c
		}()}, "capabilities"},
		{"long description", api.RegisterAgentCommand{ID: "alice", Description: strings.Repeat("d", api.MaxDescriptionLen+1)}, "description"},
		{"control characters", api.RegisterAgentCommand{ID: "alice", Description: "bell\a"}, "description"},
		{"bad node", api.RegisterAgentCommand{ID: "alice", Node: "Node 1"}, "node"},
		{"the reserved sender", api.RegisterAgentCommand{ID: api.SystemSender, Role: "orchestrator"}, "id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newMbox(t)
			before := dataDump(t, b.f)
			err := mustError(t, b.apply(api.OpRegisterAgent, tt.cmd))
			var fe *api.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("error = %v, want a FieldError on %s", err, tt.field)
			}
			if dataDump(t, b.f) != before {
				t.Errorf("a refused register changed the state")
			}
		})
	}
	b := newMbox(t)
	if _, err := b.f.Agents(api.AgentQuery{Role: "Bad"}); err == nil {
		t.Errorf("Agents with a bad role: no error")
	}
	if err := mustError(t, b.apply(api.OpUnregisterAgent, api.UnregisterAgentCommand{ID: "Bad Id"})); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("unregister bad id = %v", err)
	}
	// Description with newlines and tabs is fine.
	if a := b.register("ok", "agent"); a == nil {
		t.Fatal("register failed")
	}
	b.ok(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "ok", Description: "line one\n\tline two"})
}

package fsm

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// TestAgentA2AIsStoredApartAndNeverRead registers a remote A2A agent: its
// record and every read of the registry show the URL and that a
// credential is stored, never the credential; AgentA2A (the admin read)
// gives it; registering again without a2a, or unregistering, drops it.
func TestAgentA2AIsStoredApartAndNeverRead(t *testing.T) {
	b := newMbox(t)
	const secret = "tok-0123456789abcdef"
	a := b.ok(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "ext", A2A: &api.A2ARemote{URL: "http://127.0.0.1:9/a2a", Credential: secret}}).(*api.Agent)
	if a.A2A == nil || a.A2A.URL != "http://127.0.0.1:9/a2a" || !a.A2A.Credential {
		t.Fatalf("register result a2a = %+v, want the URL and credential true", a.A2A)
	}
	got, err := b.f.Agent("ext")
	if err != nil || got.A2A == nil || !got.A2A.Credential {
		t.Fatalf("Agent(ext) = %+v, %v", got, err)
	}
	page, err := b.f.Agents(api.AgentQuery{})
	if err != nil {
		t.Fatal(err)
	}
	audit, err := b.f.Audit(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]any{"register result": a, "read": got, "list": page, "audit": audit} {
		data, _ := json.Marshal(v)
		if strings.Contains(string(data), secret) {
			t.Errorf("the %s carries the credential: %s", what, data)
		}
	}
	r, err := b.f.AgentA2A("ext")
	if err != nil || r.Credential != secret || r.URL != "http://127.0.0.1:9/a2a" {
		t.Fatalf("AgentA2A(ext) = %+v, %v, want the URL and the credential", r, err)
	}
	b.ok(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "plain"})
	if _, err := b.f.AgentA2A("plain"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("AgentA2A(plain) = %v, want not found", err)
	}
	b.ok(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "ext"})
	if got, _ := b.f.Agent("ext"); got.A2A != nil {
		t.Errorf("registered again without a2a, the agent still shows %+v", got.A2A)
	}
	if _, err := b.f.AgentA2A("ext"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("AgentA2A after a plain registration = %v, want not found", err)
	}
	b.ok(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "ext", A2A: &api.A2ARemote{URL: "https://remote.example/agent"}})
	if r, err := b.f.AgentA2A("ext"); err != nil || r.Credential != "" {
		t.Errorf("AgentA2A without a credential = %+v, %v", r, err)
	}
	b.ok(api.OpUnregisterAgent, api.UnregisterAgentCommand{ID: "ext"})
	if _, err := b.f.AgentA2A("ext"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("AgentA2A after unregister = %v, want not found", err)
	}
}

// TestRegisterWithA2ANeedsVersion3 is the rolling-upgrade gate: a build of
// version 2 would drop a2a when it applies register_agent, so a cluster at
// 2 refuses such a registration before it is proposed, while a plain one
// passes; at 3 both pass.
func TestRegisterWithA2ANeedsVersion3(t *testing.T) {
	f, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyOne(f, versionEntry(t, 1, 2))
	remote := &api.RegisterAgentCommand{ID: "ext", A2A: &api.A2ARemote{URL: "http://127.0.0.1:9/"}}
	var cve *api.ClusterVersionError
	if err := f.CheckVersion(api.OpRegisterAgent, remote); !errors.As(err, &cve) || cve.Needs != 3 || cve.Runs != 2 {
		t.Fatalf("CheckVersion(register_agent with a2a) at version 2 = %v, want a *ClusterVersionError needing 3", err)
	}
	if err := f.CheckVersion(api.OpRegisterAgent, *remote); !errors.As(err, &cve) {
		t.Fatalf("CheckVersion(register_agent with a2a, by value) at version 2 = %v, want refused", err)
	}
	if err := f.CheckVersion(api.OpRegisterAgent, &api.RegisterAgentCommand{ID: "plain"}); err != nil {
		t.Errorf("CheckVersion(plain register_agent) at version 2 = %v, want nil", err)
	}
	applyOne(f, versionEntry(t, 2, 3))
	if err := f.CheckVersion(api.OpRegisterAgent, remote); err != nil {
		t.Errorf("CheckVersion(register_agent with a2a) at version 3 = %v, want nil", err)
	}
}

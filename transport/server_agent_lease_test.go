package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// Two watchers of alice (her token): the first is granted, the second
// stands by and is listed; the holder's fenced reply and cursor move are
// accepted, a stale fence is 409 fenced naming the current fence and
// holder, and after a release the standby takes over with a new fence.
func TestAgentLeaseRoutes(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	ctx := context.Background()
	alice := e.client(aliceSecret)
	a := api.LeaseHolder{Node: "n1", Instance: "i1"}
	b := api.LeaseHolder{Node: "n2", Instance: "i2"}
	ttl := api.LockTTL(10 * time.Second)
	got, err := alice.AcquireAgentLease(ctx, api.AgentLeaseAcquireCommand{Agent: "alice", LeaseHolder: a, TTL: ttl})
	if err != nil || got.Outcome != api.AgentLeaseGranted || got.Lease.Holder != a {
		t.Fatalf("acquire = %+v, %v; want granted to n1", got, err)
	}
	fence := got.Lease.Fence
	sb, err := alice.AcquireAgentLease(ctx, api.AgentLeaseAcquireCommand{Agent: "alice", LeaseHolder: b, TTL: ttl})
	if err != nil || sb.Outcome != api.AgentLeaseStandby || sb.Lease.Fence != fence {
		t.Fatalf("second acquire = %+v, %v; want standby", sb, err)
	}
	page, err := alice.AgentLeases(ctx, api.Strong)
	if err != nil || len(page.Leases) != 1 || len(page.Leases[0].Standbys) != 1 || page.Leases[0].Standbys[0].LeaseHolder != b {
		t.Fatalf("leases = %+v, %v; want alice's with standby n2", page, err)
	}
	m := &api.Message{ID: "msg-20261128-090000-alice-00000001", From: "alice", To: api.Recipients{"bob"}, Channel: "general", Content: api.Content{Text: "hi"}}
	if _, err := alice.SendFenced(ctx, m, fence); err != nil {
		t.Fatalf("send under the current fence: %v", err)
	}
	if _, err := alice.SetCursorFenced(ctx, "alice", 1, fence); err != nil {
		t.Fatalf("cursor under the current fence: %v", err)
	}
	if _, err := alice.ReleaseAgentLease(ctx, api.AgentLeaseReleaseCommand{Agent: "alice", LeaseHolder: a, Fence: fence}); err != nil {
		t.Fatal(err)
	}
	took, err := alice.AcquireAgentLease(ctx, api.AgentLeaseAcquireCommand{Agent: "alice", LeaseHolder: b, TTL: ttl})
	if err != nil || took.Outcome != api.AgentLeaseGranted || took.Lease.Fence <= fence || took.Lease.Reason != api.LeaseReasonReleased {
		t.Fatalf("standby's acquire after the release = %+v, %v", took, err)
	}
	late := &api.Message{ID: "msg-20261128-090000-alice-00000002", From: "alice", To: api.Recipients{"bob"}, Channel: "general", Content: api.Content{Text: "late"}}
	_, err = alice.SendFenced(ctx, late, fence)
	var apiErr *api.APIError
	if !errors.Is(err, api.ErrFenced) || !errors.Is(err, api.ErrConflict) || !errors.As(err, &apiErr) || apiErr.Code != api.CodeFenced ||
		!strings.Contains(apiErr.Message, "is not the current lease's (fence") || !strings.Contains(apiErr.Message, "held by n2/i2") {
		t.Fatalf("late send = %v; want 409 fenced naming the current fence and n2", err)
	}
	if _, err := alice.RenewAgentLease(ctx, api.AgentLeaseRenewCommand{Agent: "alice", LeaseHolder: a, Fence: fence, TTL: ttl}); !errors.Is(err, api.ErrFenced) {
		t.Fatalf("old holder's renewal = %v, want fenced", err)
	}
	if l, err := alice.AgentLease(ctx, "alice", api.Strong); err != nil || l.Holder != b {
		t.Fatalf("lease = %+v, %v; want held by n2", l, err)
	}
	// A task claim carries the fence too.
	task, err := e.client(bobSecret).CreateTask(ctx, api.TaskCreateCommand{ID: "t-fenced", From: "bob", To: "alice", Title: "fenced"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ClaimTaskFenced(ctx, task.ID, "alice", fence); !errors.Is(err, api.ErrFenced) {
		t.Fatalf("claim under the old fence = %v, want fenced", err)
	}
	if cl, err := alice.ClaimTaskFenced(ctx, task.ID, "alice", took.Lease.Fence); err != nil || cl.State != api.TaskRunning {
		t.Fatalf("claim under the current fence = %+v, %v", cl, err)
	}
}

// Bad input names the field; another agent's token may not take alice's
// lease; a bad ?agent_fence= is refused before anything is proposed.
func TestAgentLeaseRoutesRefuse(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	wantError(t, e.as(bobSecret, "POST", "/v1/agents/alice/lease", `{"node":"n1","instance":"i1","ttl":"10s"}`), http.StatusForbidden, api.CodeForbidden)
	msg := wantError(t, e.as(aliceSecret, "POST", "/v1/agents/alice/lease", `{"node":"n1","instance":"i1","ttl":"1h"}`), http.StatusBadRequest, api.CodeInvalid)
	if !strings.Contains(msg, "ttl: 1h0m0s is outside the limits 1s to 10m0s") {
		t.Errorf("400 %q does not name the ttl's limits", msg)
	}
	msg = wantError(t, e.as(aliceSecret, "POST", "/v1/agents/alice/lease", `{"agent":"bob","node":"n1","instance":"i1","ttl":"10s"}`), http.StatusBadRequest, api.CodeInvalid)
	if !strings.Contains(msg, "agent: differs from the agent in the path") {
		t.Errorf("400 %q", msg)
	}
	msg = wantError(t, e.as(aliceSecret, "POST", "/v1/messages?agent_fence=x",
		`{"id":"msg-20261128-090000-alice-00000003","from":"alice","to":["bob"],"channel":"general","content":{"text":"hi"}}`), http.StatusBadRequest, api.CodeInvalid)
	if !strings.Contains(msg, "agent_fence: want the positive fence") {
		t.Errorf("400 %q", msg)
	}
	if writes, sends := e.writes(); writes != 0 || sends != 0 {
		t.Errorf("refused requests reached the log: %d writes, %d sends", writes, sends)
	}
	wantError(t, e.as(aliceSecret, "GET", "/v1/agents/alice/lease", ""), http.StatusNotFound, api.CodeNotFound)
}

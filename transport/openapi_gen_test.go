package transport_test

// The generator of the OpenAPI document (openapi.json, embedded and served
// at GET /v1/openapi.json, and its copy docs/openapi.json). The schemas
// are reflected from the Go types the handlers decode and encode; the
// table below says, for each route, which types, which parameters and
// which answers. TestOpenAPIDocument fails when either file differs from
// what this generates; rewrite them with
//
//	go test ./transport -run TestOpenAPIDocument -update

import (
	"bytes"
	"encoding"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

var update = flag.Bool("update", false, "rewrite transport/openapi.json and docs/openapi.json from the generator")

// openAPIFiles are the document's two copies, relative to transport/.
var openAPIFiles = []string{"openapi.json", "../docs/openapi.json"}

func TestOpenAPIDocument(t *testing.T) {
	want, err := generateOpenAPI(newServer(t).Routes())
	if err != nil {
		t.Fatalf("generate the OpenAPI document: %v", err)
	}
	for _, f := range openAPIFiles {
		if *update {
			if err := os.WriteFile(f, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the generator writes (openapi_gen_test.go); run: go test ./transport -run TestOpenAPIDocument -update", f)
		}
	}
	if !*update && !bytes.Equal(transport.OpenAPI(), want) {
		t.Errorf("the embedded document is stale; run: go test ./transport -run TestOpenAPIDocument -update")
	}
}

type obj = map[string]any

// param is a query (or header) parameter.
type param struct {
	name, typ, desc string
	required        bool
}

// body is an operation's request body: a Go value whose type is reflected
// (the fields in required must be sent), or a raw schema and its media
// types.
type body struct {
	v        any
	required []string
	schema   obj
	media    []string
	desc     string
}

// op is one operation of the document.
type op struct {
	pattern string // as in the route table
	summary string
	query   []param
	headers []param
	body    *body
	status  int    // the success status (200 when 0)
	resp    any    // a value of the answer's type; nil with respSchema or no body
	schema  obj    // the answer's schema when resp is nil
	media   string // the answer's media type (application/json)
	extra   obj    // more responses by status
	errs    []int  // error statuses beyond the ones every operation of its kind has
	noBody  bool   // the success answer has no body (204)
}

var (
	pCons  = param{"consistency", "string", "`strong`: answered only once the leader confirmed it leads and the node applied every entry committed before the read began; `local` (the default) answers from the node's own state", false}
	pAfter = param{"after", "integer", "return what comes after this seq (the last of the previous page)", false}
	pLimit = param{"limit", "integer", "page size, 1..1000 (default 100)", false}
	pPage  = []param{pAfter, pLimit, pCons}
)

func q(name, desc string) param { return param{name, "string", desc, false} }

// ops is the API, in the order of the route table.
func ops() []op {
	return []op{
		{pattern: "GET /healthz", summary: "200 while the process is up", schema: statusSchema("ok")},
		{pattern: "GET /readyz", summary: "200 when a leader is known and the node applied what it knows is committed; 503 with the reason otherwise", schema: statusSchema("ready")},
		{pattern: "GET /v1/openapi.json", summary: "this document (public: no token needed)", schema: obj{"type": "object"}},
		{pattern: "GET /metrics", summary: "the node's metrics in Prometheus's text exposition format (an admin token with --auth; docs/OPERATIONS.md lists them)",
			media: "text/plain; version=0.0.4", schema: obj{"type": "string"}},

		{pattern: "POST /v1/messages", summary: "send a message (or one in a seed's format, or seed 004's task_delegation, task_completion and hitl_approval_request)",
			query: []param{{"agent_fence", "integer", "the fence of the sender's agent lease (a watcher's reply): refused with 409 `fenced` unless it is the current grant's; absent, no check", false}},
			body:  &body{schema: obj{"anyOf": []any{ref("MessageInput"), obj{"type": "object", "description": "a message in one of the seeds' formats (dialect.Map), a task_delegation or task_completion (answered with TaskMessageResponse) or an hitl_approval_request (ApprovalMessageResponse)"}}}},
			errs:  []int{404, 409, 422, 429}}, // 404: a name no one answers to (unknown_recipients)
		{pattern: "GET /v1/messages/{id}", summary: "one message", query: []param{pCons}, resp: api.Message{}},
		{pattern: "GET /v1/messages/{id}/receipts", summary: "a message's delivery receipts", query: []param{pCons}, resp: api.Receipts{}},
		{pattern: "GET /v1/channels", summary: "the channels with their counts", query: []param{pCons}, resp: api.ChannelsResponse{}},
		{pattern: "GET /v1/channels/{channel}/messages", summary: "a page of a channel's messages in seq order", query: pPage, resp: api.Page{}},
		{pattern: "GET /v1/threads/{id}", summary: "a thread (id: any message of it) in seq order", query: pPage, resp: api.ThreadPage{}},
		{pattern: "GET /v1/stream", summary: "Server-Sent Events from the node's state: `message`, `task`, `approval`, then `ready` at the end of the backlog; resumes from Last-Event-ID",
			query: []param{q("agent", "that agent's inbox, the tasks and approvals it is party to"), q("channel", "that channel's messages, tasks and approvals"),
				q("after", "start after this seq (as Last-Event-ID)"), q("events", "comma-separated kinds: message, task, approval (all by default)"),
				q("tasks", "the older filter: only, none or all (no approval events); not with events")},
			headers: []param{{"Last-Event-ID", "string", "resume after this event id (N, N:task or N:approval)", false}},
			media:   "text/event-stream", schema: obj{"type": "string", "description": "event: message|task|approval|ready; id: the entry's index; data: the message, {event,task} (api.TaskUpdate) or {event,approval} (api.ApprovalUpdate)"},
			errs: []int{429}},

		{pattern: "POST /v1/tasks", summary: "create a task", body: &body{v: api.TaskCreateCommand{}, required: []string{"from", "to", "title"}}, resp: api.TaskResult{}, errs: []int{404, 409, 422, 429}},
		{pattern: "GET /v1/tasks", summary: "a page of tasks in creation order, without history",
			query: []param{q("state", "the tasks in this state"), q("to", "assigned to"), q("from", "created by"), q("claimed_by", "held by"), pAfter, pLimit, pCons}, resp: api.TaskPage{}},
		{pattern: "GET /v1/tasks/{id}", summary: "one task with its history", query: []param{pCons}, resp: api.Task{}},
		{pattern: "POST /v1/tasks/{id}/claim", summary: "claim a task (one winner)", body: &body{v: api.TaskClaimCommand{}, required: []string{"agent"}}, resp: api.TaskResult{}, errs: []int{409}},
		{pattern: "POST /v1/tasks/{id}/progress", summary: "report progress and renew the lease", body: &body{v: api.TaskProgressCommand{}, required: []string{"agent", "fence"}}, resp: api.TaskResult{}, errs: []int{409}},
		{pattern: "POST /v1/tasks/{id}/complete", summary: "complete a claimed task", body: &body{v: api.TaskCompleteCommand{}, required: []string{"agent", "fence", "completion"}}, resp: api.TaskResult{}, errs: []int{409, 422, 429}},
		{pattern: "POST /v1/tasks/{id}/handoff", summary: "hand a claimed task to another assignee", body: &body{v: api.TaskHandoffCommand{}, required: []string{"agent", "fence", "to"}}, resp: api.TaskResult{}, errs: []int{409, 422, 429}},
		{pattern: "POST /v1/tasks/{id}/cancel", summary: "cancel a task (its creator)", body: &body{v: api.TaskCancelCommand{}, required: []string{"from"}}, resp: api.TaskResult{}, errs: []int{409, 422}},
		{pattern: "POST /v1/tasks/{id}/push", summary: "set an A2A push notification config of a task (its creator; the URL's host on the node's --a2a-push-allow; needs cluster version 3)",
			body: &body{v: api.PushConfigSetCommand{}, required: []string{"from", "config"}}, resp: api.PushConfig{}, errs: []int{409, 422}},
		{pattern: "GET /v1/tasks/{id}/push", summary: "a task's push notification configs, without credentials (its creator or a moderator)", query: []param{pCons}, resp: api.PushConfigPage{}},
		{pattern: "DELETE /v1/tasks/{id}/push/{config}", summary: "delete a task's push notification config (its creator)",
			query: []param{{"from", "string", "the task's creator, as whom the token acts", true}}, resp: api.PushConfig{}, errs: []int{409}},
		{pattern: "GET /v1/push/tasks/{id}", summary: "a task's push notification configs with credentials (admin only: the deliverer's read)", query: []param{pCons}, resp: api.PushConfigPage{}},
		{pattern: "GET /v1/push/cursor", summary: "the push deliverer's replicated cursor (admin only)", query: []param{pCons}, resp: api.PushCursor{}},
		{pattern: "PUT /v1/push/cursor", summary: "move the push deliverer's cursor forward (admin only; needs cluster version 3)", body: &body{v: api.PushCursorCommand{}, required: []string{"index"}}, resp: api.PushCursor{}, errs: []int{409}},

		{pattern: "POST /v1/approvals", summary: "request an approval", body: &body{v: api.ApprovalRequestCommand{}, required: []string{"from", "approvers", "title"}}, resp: api.ApprovalResult{}, errs: []int{404, 409, 422, 429}},
		{pattern: "GET /v1/approvals", summary: "a page of approvals in creation order, without decisions",
			query: []param{q("state", "in this state"), q("approver", "that this agent may decide (by id or role)"), q("from", "requested by"), pAfter, pLimit, pCons}, resp: api.ApprovalPage{}},
		{pattern: "GET /v1/approvals/{id}", summary: "one approval with its decisions", query: []param{pCons}, resp: api.Approval{}},
		{pattern: "POST /v1/approvals/{id}/decide", summary: "approve, reject or modify", body: &body{v: api.ApprovalDecideCommand{}, required: []string{"approver", "decision", "action_hash"}}, resp: api.Approval{}, errs: []int{409, 422, 429}},
		{pattern: "POST /v1/approvals/{id}/cancel", summary: "cancel an approval (its requester)", body: &body{v: api.ApprovalCancelCommand{}, required: []string{"from"}}, resp: api.ApprovalResult{}, errs: []int{409, 422}},

		{pattern: "PUT /v1/artifacts", summary: "upload an artifact: the body is its bytes, Content-Type its type; 201 once a majority holds them (200 with existed when stored already)",
			query:  []param{q("name", "the file name"), q("from", "the uploading agent (default: the token's)")},
			body:   &body{media: []string{"application/octet-stream", "*/*"}, schema: obj{"type": "string", "format": "binary"}},
			status: 201, resp: api.Artifact{}, extra: obj{"200": jsonResponse("the same bytes were stored already (existed: true)", ref("Artifact"))}, errs: []int{409, 503}},
		{pattern: "GET /v1/artifacts", summary: "a page of artifact records in index order", query: []param{q("from", "uploaded by"), q("name", "with this name"), pAfter, pLimit, pCons}, resp: api.ArtifactPage{}},
		{pattern: "GET /v1/artifacts/{id}", summary: "an artifact's bytes (also HEAD): Range, If-None-Match on the ETag \"<id>\"",
			headers: []param{{"Range", "string", "bytes=START-END (RFC 9110)", false}, {"If-None-Match", "string", "the ETag \"<id>\"", false}},
			media:   "*/*", schema: obj{"type": "string", "format": "binary", "description": "the bytes, as the artifact's content type"},
			extra: obj{"206": obj{"description": "the range asked for", "content": obj{"*/*": obj{"schema": obj{"type": "string", "format": "binary"}}}},
				"304": obj{"description": "not modified (If-None-Match)"}, "416": obj{"description": "the range is not satisfiable"}}, errs: []int{503}},
		{pattern: "GET /v1/artifacts/{id}/info", summary: "an artifact's record", query: []param{pCons}, resp: api.Artifact{}},
		{pattern: "DELETE /v1/artifacts/{id}", summary: "delete an artifact's record (its bytes go at the next sweep)", resp: api.Artifact{}},

		{pattern: "POST /v1/agents", summary: "register an agent (with `a2a`, a remote A2A agent: admin only, needs cluster version 3)", errs: []int{409}, body: &body{v: api.RegisterAgentCommand{}, required: []string{"id"}}, resp: api.Agent{}},
		{pattern: "GET /v1/agents", summary: "a page of agents by id", query: []param{q("role", "with this role"), q("capability", "with this capability"), q("after", "after this agent id"), pLimit, pCons}, resp: api.AgentPage{}},
		{pattern: "GET /v1/roles", summary: "the roles and how many agents have each", query: []param{pCons}, resp: api.RolesResponse{}},
		{pattern: "GET /v1/agents/{id}", summary: "one agent", query: []param{pCons}, resp: api.Agent{}},
		{pattern: "GET /v1/agents/{id}/a2a", summary: "a remote A2A agent's URL and credential (admin only: the relay's read)", query: []param{pCons}, resp: api.A2ARemote{}},
		{pattern: "DELETE /v1/agents/{id}", summary: "unregister an agent (its inbox stays)", resp: api.Agent{}},
		{pattern: "GET /v1/agents/{id}/inbox", summary: "a page of an agent's inbox",
			query: []param{q("unread", "true: unread only"), q("priority", "of this priority"), q("type", "of this type"), q("from", "from this sender"),
				pAfter, {"before", "integer", "with order=newest: before this seq", false}, q("order", "oldest (default) or newest"), pLimit, pCons}, resp: api.InboxPage{}},
		{pattern: "GET /v1/agents/{id}/inbox/counts", summary: "an inbox's counts", query: []param{pCons}, resp: api.InboxCounts{}},
		{pattern: "GET /v1/agents/{id}/summary", summary: "what a status line shows, in one request", query: []param{pCons}, resp: api.AgentSummary{}},
		{pattern: "POST /v1/agents/{id}/read", summary: "mark one message, or all up to a seq, read", body: &body{v: api.MarkReadRequest{}}, resp: api.MarkReadResult{}},
		{pattern: "PUT /v1/agents/{id}/receipts/{msg}", summary: "what the agent's watcher did with a message", body: &body{v: api.ReceiptStateRequest{}, required: []string{"state"}}, resp: api.Receipt{}},
		{pattern: "GET /v1/agents/{id}/cursor", summary: "the seq of the last message the agent's watcher handled", query: []param{pCons}, resp: api.Cursor{}},
		{pattern: "PUT /v1/agents/{id}/cursor", summary: "move the cursor (never back)", body: &body{v: api.SetCursorCommand{}, required: []string{"seq"}}, resp: api.Cursor{}},
		{pattern: "POST /v1/agents/{id}/lease", summary: "acquire the agent's lease for a watcher (node, instance): granted with a new fence, extended for its holder, or standby while another holds it",
			body: &body{v: api.AgentLeaseAcquireCommand{}, required: []string{"node", "instance", "ttl"}}, resp: api.AgentLeaseResult{}},
		{pattern: "POST /v1/agents/{id}/lease/renew", summary: "renew the agent's lease by its holder and fence (409 `fenced` when lost)",
			body: &body{v: api.AgentLeaseRenewCommand{}, required: []string{"node", "instance", "fence", "ttl"}}, resp: api.AgentLeaseResult{}},
		{pattern: "POST /v1/agents/{id}/lease/release", summary: "release the agent's lease by its holder and fence, so a standby takes over at once",
			body: &body{v: api.AgentLeaseReleaseCommand{}, required: []string{"node", "instance", "fence"}}, resp: api.AgentLeaseResult{}},
		{pattern: "GET /v1/agents/{id}/lease", summary: "the agent's lease: the watcher serving it, its fence, the standbys", query: []param{pCons}, resp: api.AgentLease{}},
		{pattern: "GET /v1/leases", summary: "every agent's lease", query: []param{pCons}, resp: api.AgentLeasePage{}},
		{pattern: "POST /v1/leases/renew", summary: "renew several agents' leases in one entry, each judged alone (a refused one is its result's `error`); needs cluster version 2",
			body: &body{v: api.AgentLeaseRenewManyCommand{}, required: []string{"renewals"}}, resp: api.AgentLeaseRenewManyResult{}, errs: []int{409}},
		{pattern: "POST /v1/agents/{id}/interrupt", summary: "store an urgent [INTERRUPT] alert, then press ESC in the agent's pane", body: &body{v: api.InterruptRequest{}, required: []string{"from", "reason"}}, resp: api.InterruptResponse{}, errs: []int{429}},
		{pattern: "GET /v1/agents/{id}/policy", summary: "the agent's run-time delivery policies in force", query: []param{pCons}, resp: api.PolicySet{}},
		{pattern: "PUT /v1/agents/{id}/policy", summary: "set the agent's run-time delivery policy (or one sender's override)", body: &body{v: api.PolicyRequest{}, required: []string{"mode"}}, resp: api.Policy{}},
		{pattern: "DELETE /v1/agents/{id}/policy", summary: "clear the agent's policy (?from= for an override)", query: []param{q("from", "clear this sender's override"), q("set_by", "who clears it (a token without an agent only)")}, resp: api.Policy{}},

		{pattern: "PUT /v1/presence/{agent}", summary: "a presence heartbeat (gossip, not the log)", body: &body{v: api.PresenceUpdate{}, required: []string{"state"}}, resp: api.Presence{}},
		{pattern: "GET /v1/presence", summary: "every agent's presence", resp: api.PresenceResponse{}},
		{pattern: "GET /v1/presence/{agent}", summary: "one agent's presence", resp: api.Presence{}},
		{pattern: "GET /v1/agents/{id}/health", summary: "an agent's presence and its watcher's task counts", resp: api.HealthReport{}},
		{pattern: "GET /v1/cluster/members", summary: "the gossip members", resp: api.MembersResponse{}},

		{pattern: "GET /v1/bulletin", summary: "the shared bulletin", query: []param{pCons}, resp: api.Bulletin{}},
		{pattern: "PUT /v1/bulletin", summary: "replace the bulletin (compare-and-set with if_version or If-Match)", query: []param{q("by", "the agent who writes")},
			headers: []param{{"If-Match", "string", "the version the write is based on", false}}, body: &body{schema: obj{"type": "object"}}, resp: api.BulletinResult{}, errs: []int{409}},
		{pattern: "PATCH /v1/bulletin", summary: "merge into the bulletin (RFC 7396: null deletes)", query: []param{q("by", "the agent who writes")},
			headers: []param{{"If-Match", "string", "the version the write is based on", false}}, body: &body{schema: obj{"type": "object"}, media: []string{"application/json", "application/merge-patch+json"}}, resp: api.BulletinResult{}, errs: []int{409}},
		{pattern: "POST /v1/locks", summary: "acquire a lock (409 with its holder when held)", body: &body{v: api.LockAcquireCommand{}, required: []string{"path", "holder"}}, resp: api.LockResult{}, extra: obj{"409": jsonResponse("the lock is held: its holder, token and expiry", ref("LockConflictBody"))}},
		{pattern: "POST /v1/locks/renew", summary: "renew a lock by its holder and token", body: &body{v: api.LockRenewCommand{}, required: []string{"path", "holder", "token"}}, resp: api.LockResult{}, extra: obj{"409": jsonResponse("not the holder, or a stale token", ref("LockConflictBody"))}},
		{pattern: "POST /v1/locks/release", summary: "release a lock (force: break it)", body: &body{v: api.LockReleaseCommand{}, required: []string{"path"}}, resp: api.LockResult{}, extra: obj{"409": jsonResponse("not the holder, or a stale token", ref("LockConflictBody"))}},
		{pattern: "GET /v1/locks", summary: "a page of locks", query: []param{q("prefix", "paths with this prefix"), q("holder", "held by"), q("after", "after this path"), pLimit, pCons}, resp: api.LockPage{}},
		{pattern: "POST /v1/locks/check", summary: "whether a lock token is still current", query: []param{pCons}, body: &body{v: api.LockCheckCommand{}, required: []string{"path", "token"}}, resp: api.LockCheck{}},

		{pattern: "GET /v1/rules", summary: "the communication rules", query: []param{pCons}, resp: api.RulesState{}},
		{pattern: "PUT /v1/rules", summary: "replace the rules document (JSON, or YAML with its Content-Type)", body: &body{schema: obj{"type": "object"}, media: []string{"application/json", "application/yaml", "text/yaml"}}, resp: api.RulesState{}},
		{pattern: "DELETE /v1/rules", summary: "remove the rules: everyone may message everyone", resp: api.RulesState{}},
		{pattern: "POST /v1/rules/check", summary: "may from message to (or interrupt)?", query: []param{pCons}, body: &body{v: api.RulesCheckRequest{}, required: []string{"from"}}, resp: api.RulesCheck{}},
		{pattern: "GET /v1/audit", summary: "the audit trail, oldest first", query: pPage, resp: api.AuditResponse{}},
		{pattern: "GET /v1/overview", summary: "message headers in seq order, no content", query: []param{q("channel", "this channel only"), pAfter, pLimit, pCons}, resp: api.OverviewPage{}},

		{pattern: "GET /v1/channels/{channel}/retention", summary: "a channel's retention policy", query: []param{pCons}, resp: api.Retention{}},
		{pattern: "PUT /v1/channels/{channel}/retention", summary: "set a channel's retention policy and trim at once", body: &body{v: api.SetRetentionCommand{}}, resp: api.TrimResult{}},
		{pattern: "POST /v1/channels/{channel}/trim", summary: "apply a channel's retention policy now", resp: api.TrimResult{}},
		{pattern: "GET /v1/cluster/config", summary: "the replicated cluster settings", query: []param{pCons}, resp: api.ClusterConfig{}},
		{pattern: "PUT /v1/cluster/config", summary: "set one cluster setting", body: &body{v: api.SetConfigCommand{}, required: []string{"key", "value"}}, resp: api.ClusterConfig{}},

		{pattern: "GET /v1/whoami", summary: "who the request's token speaks for ({auth:false} without --auth)", resp: api.WhoAmI{}},
		{pattern: "POST /v1/tokens", summary: "create a token: the secret is in this answer only", body: &body{v: api.TokenRequest{}, required: []string{"agent"}}, resp: api.TokenCreated{}},
		{pattern: "GET /v1/tokens", summary: "the tokens (never a secret or hash)", resp: api.TokensResponse{}},
		{pattern: "DELETE /v1/tokens/{id}", summary: "revoke a token", resp: api.Token{}},

		{pattern: "GET /v1/cluster/status", summary: "this node's view of the cluster", resp: api.Status{}},
		{pattern: "POST /v1/cluster/join", summary: "add a voter (forwarded to the leader)", body: &body{v: api.JoinRequest{}, required: []string{"node_id", "raft_addr"}}, schema: obj{"type": "object", "required": []string{"joined"}, "properties": obj{"joined": obj{"type": "string"}}}},
		{pattern: "DELETE /v1/cluster/nodes/{id}", summary: "remove a server", schema: obj{"type": "object", "required": []string{"removed"}, "properties": obj{"removed": obj{"type": "string"}}}},
		{pattern: "POST /v1/cluster/snapshot", summary: "take a snapshot on this node", resp: api.SnapshotResponse{}},
		{pattern: "POST /v1/cluster/transfer-leadership", summary: "transfer leadership (to node_id, or the most up-to-date follower)", body: &body{v: api.TransferRequest{}}, resp: api.TransferResponse{}},
		{pattern: "GET /v1/internal/read-index", summary: "between nodes: a read index for a strong read", resp: api.ReadIndexResponse{}},
		{pattern: "POST /v1/internal/entry", summary: "between nodes: a follower's encoded log entry; the answer is the state machine's result",
			body: &body{media: []string{api.ContentTypeEntry}, schema: obj{"type": "string", "format": "binary"}}, schema: obj{"description": "the result of the entry's op"}},
		{pattern: "POST /v1/internal/entries", summary: "between nodes: a follower's batch of encoded log entries (each a uvarint length, then its bytes); one result or error per entry, in order",
			body: &body{media: []string{api.ContentTypeEntries}, schema: obj{"type": "string", "format": "binary"}}, resp: api.EntriesResponse{}},
		{pattern: "PUT /v1/internal/blobs/{id}", summary: "between nodes: a peer pushes an artifact's bytes", body: &body{media: []string{"application/octet-stream"}, schema: obj{"type": "string", "format": "binary"}}, status: 204, noBody: true},
		{pattern: "GET /v1/internal/blobs/{id}", summary: "between nodes: this node's own checked copy of an artifact's bytes", media: "application/octet-stream", schema: obj{"type": "string", "format": "binary"}},
	}
}

func statusSchema(v string) obj {
	return obj{"type": "object", "required": []string{"status"}, "properties": obj{"status": obj{"type": "string", "const": v}}}
}

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func jsonResponse(desc string, schema obj) obj {
	return obj{"description": desc, "content": obj{"application/json": obj{"schema": schema}}}
}

// errorStatuses are the codes of the error body by status (errors.go).
var errorStatuses = map[int]string{
	400: "bad_request, unknown_field (a field the API does not know, named) or invalid (a field breaks a rule: the message starts with its name)",
	401: "unauthorized: with --auth, no bearer token, or a malformed, unknown or revoked one (WWW-Authenticate: Bearer)",
	403: "forbidden: the token may not do this (the route's access, or a body's from/agent is not the token's agent), or the rules refuse",
	404: "not_found: no such object (a message a reader may not see reads the same), node or endpoint",
	409: "conflict: the id is stored with other content, or the command does not fit the object's state",
	413: "too_large: the body is over the route's ceiling (or an artifact over its uploader's quota)",
	422: "secret_found: text holds a secret and secret_guard is refuse; the message names the field and rule, never the secret",
	429: "rate_limited: over --send-rate or --max-streams-per-agent; Retry-After says when to retry",
	503: "no_leader, not_leader, outcome_unknown (retrying with the same id is safe) or not_ready",
}

// generateOpenAPI builds the document, deterministic (maps are written
// with sorted keys).
// The access of each operation is the route table's (routes: a server's
// Routes), so the document says what the table says.
func generateOpenAPI(routes []transport.Route) ([]byte, error) {
	g := &reflector{defs: obj{}, seen: map[string]reflect.Type{}, access: map[string]transport.Route{}}
	for _, rt := range routes {
		g.access[rt.Pattern] = rt
	}
	// The schemas POST /v1/messages names rather than reflects.
	g.ref(reflect.TypeFor[api.Message](), true)
	for _, t := range []reflect.Type{reflect.TypeFor[api.SendResponse](), reflect.TypeFor[transport.TaskMessageResponse](),
		reflect.TypeFor[transport.ApprovalMessageResponse](), reflect.TypeFor[api.LockConflictBody]()} {
		g.ref(t, false)
	}

	paths := obj{}
	for _, o := range ops() {
		method, path, ok := strings.Cut(o.pattern, " ")
		if !ok {
			return nil, fmt.Errorf("pattern %q has no method", o.pattern)
		}
		item, _ := paths[path].(obj)
		if item == nil {
			item = obj{}
			paths[path] = item
		}
		operation, err := g.operation(o, method, path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.pattern, err)
		}
		item[strings.ToLower(method)] = operation
		if o.pattern == "GET /v1/artifacts/{id}" {
			head, _ := g.operation(o, "HEAD", path)
			head["operationId"] = "headArtifact"
			head["summary"] = "an artifact's headers (Content-Length, ETag, Content-Disposition), no bytes"
			item["head"] = head
		}
	}
	codes := []string{api.CodeBadRequest, api.CodeInvalid, api.CodeUnknownField, api.CodeTooLarge, api.CodeNotFound,
		api.CodeConflict, api.CodeFenced, api.CodeForbidden, api.CodeNoLeader, api.CodeNotLeader, api.CodeOutcomeUnknown,
		api.CodeNotReady, api.CodeUnauthorized, api.CodeRateLimited, api.CodeSecretFound, api.CodeClusterVersion, api.CodeInternal}
	slices.Sort(codes)
	g.defs["Error"] = obj{
		"type": "object", "required": []string{"error"},
		"description": "every error answer: {\"error\":{\"code\",\"message\"}}; the message says what to fix. Nothing is applied when a request fails.",
		"properties": obj{"error": obj{"type": "object", "required": []string{"code", "message"}, "properties": obj{
			"code":    obj{"type": "string", "enum": codes},
			"message": obj{"type": "string"},
		}}},
	}
	responses := obj{}
	for status, desc := range errorStatuses {
		responses[strconv.Itoa(status)] = jsonResponse(desc, ref("Error"))
	}
	doc := obj{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
		"info": obj{
			"title":   "maos HTTP API",
			"version": "v1",
			"summary": "a Raft-replicated mailbox cluster for AI agent farms",
			"description": "JSON in and out; docs/API.md describes the conventions every route follows. " +
				"With --auth every route but the public ones (the probes and this document) needs `Authorization: Bearer <token>`; " +
				"each operation's x-maos-access says which tokens may call it: any (any valid token; a body's from/agent/holder must be the token's agent, or any for an admin), " +
				"admin, actor (the agent that x-maos-access-param names, a path or ?query parameter, must be the token's own; admins act as anyone) or reader (that agent's own token or a moderator's). " +
				"Without --auth no token is needed. Reads take ?consistency=strong. Errors are {\"error\":{\"code\",\"message\"}}.",
			"license": obj{"name": "see the repository"},
		},
		"servers":  []any{obj{"url": "http://127.0.0.1:7070", "description": "maosd's default --http-addr"}},
		"security": []any{obj{"bearerAuth": []string{}}},
		"paths":    paths,
		"components": obj{
			"securitySchemes": obj{"bearerAuth": obj{"type": "http", "scheme": "bearer", "description": "a maos token (maos_…) from POST /v1/tokens or the node's admin bootstrap token"}},
			"schemas":         g.defs,
			"responses":       responses,
		},
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// operation is o's operation object for method on path.
func (g *reflector) operation(o op, method, path string) (obj, error) {
	acc, ok := g.access[method+" "+path]
	if method == "HEAD" {
		acc, ok = g.access["GET "+path]
	}
	if !ok {
		return nil, fmt.Errorf("not in the route table")
	}
	operation := obj{
		"summary":       o.summary,
		"operationId":   operationID(method, path),
		"tags":          []string{tag(path)},
		"x-maos-access": acc.Access,
	}
	if acc.AccessParam != "" {
		operation["x-maos-access-param"] = acc.AccessParam
	}
	if acc.Access == "public" {
		operation["security"] = []any{}
	}
	var params []any
	for _, name := range pathParams(path) {
		params = append(params, obj{"name": name, "in": "path", "required": true, "schema": obj{"type": "string"}})
	}
	for _, p := range o.query {
		params = append(params, paramObj(p, "query"))
	}
	for _, p := range o.headers {
		params = append(params, paramObj(p, "header"))
	}
	if params != nil {
		operation["parameters"] = params
	}
	if b := o.body; b != nil && method != "HEAD" {
		schema := b.schema
		if b.v != nil {
			t := reflect.TypeOf(b.v)
			schema = g.ref(t, true)
			name := g.name(t, true)
			def := g.defs[name].(obj)
			if len(b.required) > 0 {
				props, _ := def["properties"].(obj)
				for _, f := range b.required {
					if _, ok := props[f]; !ok {
						return nil, fmt.Errorf("required field %q is not a field of %s", f, name)
					}
				}
				def["required"] = b.required
			}
		}
		media := b.media
		if media == nil {
			media = []string{"application/json"}
		}
		content := obj{}
		for _, m := range media {
			content[m] = obj{"schema": schema}
		}
		operation["requestBody"] = obj{"required": true, "content": content}
	}
	responses := obj{}
	status := cmpOr(o.status, 200)
	ok200 := obj{"description": "success"}
	if !o.noBody && method != "HEAD" {
		schema := o.schema
		if o.resp != nil {
			schema = g.ref(reflect.TypeOf(o.resp), false)
		}
		if o.status == 0 && o.media == "" && o.pattern == "POST /v1/messages" {
			schema = obj{"anyOf": []any{ref("SendResponse"), ref("TaskMessageResponse"), ref("ApprovalMessageResponse")}}
		}
		if schema == nil {
			return nil, fmt.Errorf("no answer schema")
		}
		ok200["content"] = obj{cmpOr(o.media, "application/json"): obj{"schema": schema}}
	}
	responses[strconv.Itoa(status)] = ok200
	for k, v := range o.extra {
		if method == "HEAD" {
			if m, ok := v.(obj); ok {
				v = obj{"description": m["description"]}
			}
		}
		responses[k] = v
	}
	errs := slices.Clone(o.errs)
	if acc.Access != "public" {
		errs = append(errs, 401, 403)
	}
	if len(pathParams(path)) > 0 {
		errs = append(errs, 404)
	}
	if o.body != nil || len(o.query) > 0 || len(pathParams(path)) > 0 {
		errs = append(errs, 400)
	}
	if o.body != nil {
		errs = append(errs, 413)
	}
	if path == "/readyz" || strings.HasPrefix(path, "/v1/") && path != "/v1/openapi.json" {
		errs = append(errs, 503)
	}
	for _, s := range errs {
		if _, ok := responses[strconv.Itoa(s)]; !ok {
			responses[strconv.Itoa(s)] = obj{"$ref": "#/components/responses/" + strconv.Itoa(s)}
		}
	}
	if method != "HEAD" {
		responses["default"] = jsonResponse("any other error (500 internal)", ref("Error"))
	}
	operation["responses"] = responses
	return operation, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func paramObj(p param, in string) obj {
	return obj{"name": p.name, "in": in, "required": p.required, "description": p.desc, "schema": obj{"type": p.typ}}
}

func pathParams(path string) []string {
	var out []string
	for _, seg := range strings.Split(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, strings.Trim(seg, "{}"))
		}
	}
	return out
}

func tag(path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if parts[0] != "v1" || len(parts) < 2 {
		return "probes"
	}
	switch parts[1] {
	case "messages", "channels", "threads", "stream", "overview", "audit":
		return "messages"
	case "internal":
		return "internal"
	}
	return parts[1]
}

// operationID is method and path in lowerCamelCase: getV1AgentsIdInbox.
func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, seg := range strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '{' || r == '}' || r == '-' || r == '.' || r == '_' }) {
		b.WriteString(strings.ToUpper(seg[:1]) + seg[1:])
	}
	return b.String()
}

// reflector turns Go types into JSON Schemas under components/schemas.
// In request mode (in) nothing is required (the operation's table says
// what is) and the fields a decoder accepts in several forms take them
// all; in answer mode every field encoding/json always writes is
// required.
type reflector struct {
	defs   obj
	seen   map[string]reflect.Type
	access map[string]transport.Route // the route table by pattern
}

func (g *reflector) name(t reflect.Type, in bool) string {
	n := t.Name()
	if in && !strings.HasSuffix(n, "Request") && !strings.HasSuffix(n, "Command") && !strings.HasSuffix(n, "Update") {
		n += "Input"
	}
	return n
}

var (
	timeType    = reflect.TypeFor[time.Time]()
	rawType     = reflect.TypeFor[json.RawMessage]()
	marshaler   = reflect.TypeFor[json.Marshaler]()
	textMarshal = reflect.TypeFor[encoding.TextMarshaler]()
)

// special are the types with their own JSON forms (answer, request).
var special = map[reflect.Type][2]obj{
	reflect.TypeFor[api.ApprovalTimeout](): {{"type": "string", "description": "a Go duration: 10m0s"}, {"type": []string{"string", "number"}, "description": "\"10m\" or seconds"}},
	reflect.TypeFor[api.LockTTL]():         {{"type": "string", "description": "a Go duration: 5m0s"}, {"type": []string{"string", "number"}, "description": "\"30s\" or seconds"}},
	reflect.TypeFor[api.ArtifactRef](): {
		{"anyOf": []any{obj{"type": "string"}, obj{"type": "object", "required": []string{"id", "name"}, "properties": obj{"id": obj{"type": "string"}, "name": obj{"type": "string"}}}}},
		{"anyOf": []any{obj{"type": "string"}, obj{"type": "object", "required": []string{"id"}, "properties": obj{"id": obj{"type": "string"}, "name": obj{"type": "string"}}}}},
	},
	reflect.TypeFor[api.NodeIDs]():    {{"type": "array", "items": obj{"type": "string"}, "description": "node ids in id order"}, {"type": []string{"array", "null"}, "items": obj{"type": "string"}}},
	reflect.TypeFor[api.Recipients](): {{"type": []string{"array", "null"}, "items": obj{"type": "string"}}, {"anyOf": []any{obj{"type": "string"}, obj{"type": []string{"array", "null"}, "items": obj{"type": "string"}}}}},
}

// ref is the schema of a value of type t: a $ref for a named struct,
// inline otherwise.
func (g *reflector) ref(t reflect.Type, in bool) obj {
	if s, ok := special[t]; ok {
		if in {
			return s[1]
		}
		return s[0]
	}
	switch {
	case t == timeType:
		return obj{"type": "string", "format": "date-time"}
	case t == rawType:
		return obj{}
	}
	if t.Kind() == reflect.Pointer {
		return nullable(g.ref(t.Elem(), in))
	}
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		panic(fmt.Sprintf("%s has its own JSON form: add it to special", t))
	}
	if t.Implements(textMarshal) {
		return obj{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.Name() == "" {
			return g.schema(t, in)
		}
		name := g.name(t, in)
		if prev, ok := g.seen[name]; ok {
			if prev != t {
				panic(fmt.Sprintf("two types named %s: %s and %s", name, prev, t))
			}
		} else {
			g.seen[name] = t
			g.defs[name] = obj{} // a placeholder while a recursive type is built
			g.defs[name] = g.schema(t, in)
		}
		return ref(name)
	case reflect.String:
		return obj{"type": "string"}
	case reflect.Bool:
		return obj{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return obj{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return obj{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return obj{"type": "number"}
	case reflect.Interface:
		return obj{}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return obj{"type": []string{"string", "null"}, "contentEncoding": "base64"}
		}
		return obj{"type": []string{"array", "null"}, "items": g.ref(t.Elem(), in)}
	case reflect.Array:
		return obj{"type": "array", "items": g.ref(t.Elem(), in)}
	case reflect.Map:
		return obj{"type": []string{"object", "null"}, "additionalProperties": g.ref(t.Elem(), in)}
	}
	panic(fmt.Sprintf("no schema for %s", t))
}

// nullable lets s also be null.
func nullable(s obj) obj {
	if len(s) == 0 {
		return s
	}
	if typ, ok := s["type"].(string); ok && len(s) <= 3 {
		out := maps(s)
		out["type"] = []string{typ, "null"}
		return out
	}
	if typ, ok := s["type"].([]string); ok {
		if slices.Contains(typ, "null") {
			return s
		}
		out := maps(s)
		out["type"] = append(slices.Clone(typ), "null")
		return out
	}
	return obj{"anyOf": []any{s, obj{"type": "null"}}}
}

func maps(s obj) obj {
	out := obj{}
	for k, v := range s {
		out[k] = v
	}
	return out
}

// schema is the object schema of struct type t, as encoding/json writes it.
func (g *reflector) schema(t reflect.Type, in bool) obj {
	props, required := obj{}, []string{}
	g.fields(t, in, props, &required, false)
	s := obj{"type": "object", "properties": props}
	if !in && len(required) > 0 {
		slices.Sort(required)
		s["required"] = required
	}
	return s
}

func (g *reflector) fields(t reflect.Type, in bool, props obj, required *[]string, optional bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || f.Tag.Get("openapi") == "-" {
			// openapi:"-": a field the node sets, whatever a client sends.
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			opt := optional
			if ft.Kind() == reflect.Pointer {
				ft, opt = ft.Elem(), true
			}
			if ft.Kind() == reflect.Struct {
				g.fields(ft, in, props, required, opt)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.ref(f.Type, in)
		if strings.Contains(opts, "string") {
			s = obj{"type": "string"}
		}
		props[name] = s
		omit := strings.Contains(opts, "omitzero") || strings.Contains(opts, "omitempty") && omittable(f.Type)
		if !omit && !optional && !slices.Contains(*required, name) {
			*required = append(*required, name)
		}
	}
}

// omittable reports whether omitempty can leave a field of type t out.
func omittable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		return false
	case reflect.Array:
		return t.Len() == 0
	}
	return true
}

// newServer is a server on a one-node fake with artifacts, for its route
// table and the validation tests.
func newServer(t testing.TB) *transport.Server {
	svc := transporttest.New(t)
	return transport.NewServer(svc, transport.ServerOptions{Blobs: svc})
}

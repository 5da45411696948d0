package fsm

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// opBodies is every op's body type. The registry is the list of ops; this
// map must name each, with a type that declares its free text (a
// FreeTexter, checked by the compiler), so a new command cannot reach the
// log without saying what text it stores.
var opBodies = map[api.Op]api.FreeTexter{
	api.OpSend: &api.SendCommand{}, api.OpRegisterNode: &api.RegisterNodeCommand{}, api.OpSetConfig: &api.SetConfigCommand{},
	api.OpNodeEvent: &api.NodeEventCommand{}, api.OpSetRules: &api.SetRulesCommand{}, api.OpClusterID: &api.ClusterIDCommand{},
	api.OpClusterVersion: &api.ClusterVersionCommand{},
	api.OpRegisterAgent:  &api.RegisterAgentCommand{}, api.OpUnregisterAgent: &api.UnregisterAgentCommand{},
	api.OpMarkRead: &api.MarkReadCommand{}, api.OpReceiptState: &api.ReceiptStateCommand{},
	api.OpSetBulletin: &api.BulletinCommand{}, api.OpLockAcquire: &api.LockAcquireCommand{}, api.OpLockRenew: &api.LockRenewCommand{},
	api.OpLockRelease: &api.LockReleaseCommand{}, api.OpReleaseHolderLocks: &api.ReleaseHolderLocksCommand{},
	api.OpSetRetention: &api.SetRetentionCommand{}, api.OpTrim: &api.TrimCommand{},
	api.OpSetCursor: &api.SetCursorCommand{}, api.OpSetPolicy: &api.SetPolicyCommand{},
	api.OpAgentLeaseAcquire: &api.AgentLeaseAcquireCommand{}, api.OpAgentLeaseRenew: &api.AgentLeaseRenewCommand{},
	api.OpAgentLeaseRenewMany: &api.AgentLeaseRenewManyCommand{},
	api.OpAgentLeaseRelease:   &api.AgentLeaseReleaseCommand{},
	api.OpArtifactPut:         &api.ArtifactPutCommand{}, api.OpArtifactDelete: &api.ArtifactDeleteCommand{},
	api.OpCreateToken: &api.CreateTokenCommand{}, api.OpRevokeToken: &api.RevokeTokenCommand{}, api.OpAuditDenial: &api.AuditDenialCommand{},
	api.OpTaskCreate: &api.TaskCreateCommand{}, api.OpTaskClaim: &api.TaskClaimCommand{}, api.OpTaskProgress: &api.TaskProgressCommand{},
	api.OpTaskComplete: &api.TaskCompleteCommand{}, api.OpTaskHandoff: &api.TaskHandoffCommand{}, api.OpTaskCancel: &api.TaskCancelCommand{},
	api.OpApprovalRequest: &api.ApprovalRequestCommand{}, api.OpApprovalDecide: &api.ApprovalDecideCommand{},
	api.OpApprovalCancel: &api.ApprovalCancelCommand{},
	api.OpPushConfigSet:  &api.PushConfigSetCommand{}, api.OpPushConfigDelete: &api.PushConfigDeleteCommand{}, api.OpPushCursor: &api.PushCursorCommand{},
	api.OpTick: &api.TickCommand{}, opTaskTick: &api.TickCommand{},
}

func TestEveryOpDeclaresItsFreeText(t *testing.T) {
	f, _ := openTemp(t)
	for op := range f.registry() {
		if _, ok := opBodies[op]; !ok {
			t.Errorf("op %q is in the registry but not in opBodies: add its body type there, and its FreeText to freetext.go", op)
		}
	}
	for op, b := range opBodies {
		if _, ok := b.(api.Actor); len(b.FreeText()) > 0 && !ok {
			t.Errorf("op %q stores free text but its body %T names no Actor (whom a refusal is audited as)", op, b)
		}
		if _, ok := f.registry()[op]; !ok {
			t.Errorf("opBodies names %q, which the registry does not apply", op)
		}
	}
}

// The table names every field of seed 004's task_completion that holds
// text, and the message's, as the API names them.
func TestFreeTextNamesTheFieldsTheIssueLists(t *testing.T) {
	tc := api.TaskCompleteCommand{Completion: api.TaskCompletion{
		ActionsTaken: []json.RawMessage{[]byte(`{"a":1}`)}, Outputs: []string{"o"}, NextSteps: []string{"n"},
		Error: &api.TaskError{ErrorType: "x", ErrorMessage: "m"}}}
	m := api.SendCommand{Message: api.Message{Tags: []string{"t"}, Content: api.Content{Artifacts: []api.ArtifactRef{{Ref: "sha256:ab", Name: "n.txt"}}}}}
	for _, c := range []struct {
		body api.FreeTexter
		want []string
	}{
		{&tc, []string{"completion.result", "completion.rationale", "completion.actions_taken[0]", "completion.outputs[0]",
			"completion.next_steps[0]", "completion.error.error_message", "completion.flags", "completion.metrics"}},
		{&m, []string{"id", "title", "content.text", "content.code", "metadata", "tags[0]", "correlation_id",
			"content.artifacts[0].name"}},
		{&api.TaskHandoffCommand{}, []string{"reason"}},
		{&api.TaskProgressCommand{}, []string{"message"}},
		{&api.TaskCreateCommand{}, []string{"context", "description"}},
		{&api.BulletinCommand{}, []string{"bulletin"}},
		{&api.LockAcquireCommand{}, []string{"path"}},
		{&api.RegisterAgentCommand{}, []string{"description"}},
		{&api.ArtifactPutCommand{}, []string{"name"}},
	} {
		var names []string
		for _, f := range c.body.FreeText() {
			names = append(names, f.Name)
			if (f.Text == nil) == (f.JSON == nil) {
				t.Errorf("%T field %s: want exactly one of Text and JSON", c.body, f.Name)
			}
		}
		for _, w := range c.want {
			if !slices.Contains(names, w) {
				t.Errorf("%T: free text %v lacks %s", c.body, names, w)
			}
		}
	}
}

func TestCheckText(t *testing.T) {
	deep := func(n int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n))
	}
	line, body := "a\tb\nc", "colour \x1b[31mred\x1b[0m"
	ok := []api.TextField{
		{Name: "title", Kind: api.TextLine, Text: &line},
		{Name: "text", Kind: api.TextBody, Text: &body},
		{Name: "metadata", Kind: api.TextJSON, JSON: rawPtr(deep(api.MaxJSONDepth))},
	}
	if err := api.CheckText(ok); err != nil {
		t.Fatalf("CheckText(ok) = %v", err)
	}
	esc, cr, bad := "a\x1b[2Jb", "a\rb", "a\xffb"
	for _, c := range []struct {
		f    api.TextField
		want string
	}{
		{api.TextField{Name: "title", Kind: api.TextLine, Text: &esc}, "title: control character U+001B at byte 1"},
		{api.TextField{Name: "id", Kind: api.TextLine, Text: &cr}, "id: control character U+000D"},
		{api.TextField{Name: "content.text", Kind: api.TextBody, Text: &bad}, "content.text: not valid UTF-8"},
		{api.TextField{Name: "metadata", Kind: api.TextJSON, JSON: rawPtr(deep(api.MaxJSONDepth + 1))}, "metadata: JSON nested 65 deep, at most 64"},
		{api.TextField{Name: "metadata", Kind: api.TextJSON, JSON: rawPtr(json.RawMessage("{\"a\":\"\xff\"}"))}, "metadata: not valid UTF-8"},
		{api.TextField{Name: "context", Kind: api.TextJSON, JSON: rawPtr(json.RawMessage(`{"a":`))}, "context: not valid JSON"},
	} {
		err := api.CheckText([]api.TextField{c.f})
		if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckText(%s) = %v, want ErrInvalid with %q", c.f.Name, err, c.want)
		}
	}
}

// Encode is the last step before a proposal: a body apply could not
// decode (Go's decoder stops at 10,000 levels) never reaches the log.
func TestEncodeRefusesWhatApplyCouldNotDecode(t *testing.T) {
	deep := json.RawMessage(strings.Repeat("[", 9998) + strings.Repeat("]", 9998))
	_, err := Encode(api.OpSend, 1, api.SendCommand{Message: api.Message{ID: "m", Metadata: deep}})
	if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "send command: JSON nested 10000 deep, at most 72") {
		t.Fatalf("Encode(9998 deep) = %v", err)
	}
	_, err = Encode(api.OpSend, 1, api.SendCommand{Message: api.Message{ID: "m", Metadata: json.RawMessage("\"\xff\"")}})
	if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("Encode(invalid UTF-8) = %v", err)
	}
	// At the bound it encodes and applies.
	f, _ := openTemp(t)
	m := api.Message{ID: msgID(1), From: "a", Channel: "c", To: api.Recipients{"b"}, Content: api.Content{Text: "x"},
		Metadata: json.RawMessage(strings.Repeat("[", api.MaxJSONDepth) + strings.Repeat("]", api.MaxJSONDepth))}
	m.Normalize(time.Unix(1, 0))
	mustSendResult(t, applyOne(f, sendEntry(t, 1, 1, m)))
}

func rawPtr(v json.RawMessage) *json.RawMessage { return &v }

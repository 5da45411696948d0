package transport_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// Every write that addresses agents by name goes through the one commit
// path, which flags it, so the state machine refuses names no one answers
// to: a 404 whose words name each unknown name, the closest known ones and
// what to do; nothing is stored. Under unknown_recipients accept the same
// requests are stored.
func TestUnknownNamesAnswer404(t *testing.T) {
	e := newTaskEnv(t) // lead (lead), rita (reviewer, go), rex (reviewer), tess (tester)
	if _, err := e.svc.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "boss", Role: "orchestrator"}); err != nil {
		t.Fatal(err) // who may interrupt
	}
	claim := func() uint64 {
		e.create(api.TaskCreateCommand{ID: "t-h", From: "lead", To: "rita", Title: "review"})
		return e.claim("t-h", "rita").Fence
	}()
	remedy := "maosctl cluster config set unknown_recipients accept"
	for _, tt := range []struct {
		name, path, body string
		want             []string
	}{
		{"send", "/v1/messages", `{"from":"lead","channel":"c","to":["rtia","role:reviwer","rex"],"content":{"text":"x"}}`,
			[]string{`to: agent "rtia" (not registered, never sent; did you mean rita?) and role "reviwer" (no agent has it; did you mean role:reviewer?): not found; register`, remedy}},
		{"interrupt", "/v1/agents/rtia/interrupt", `{"from":"boss","reason":"stop","channel":"c"}`,
			[]string{`to: agent "rtia" (not registered, never sent; did you mean rita?): not found`, remedy}},
		{"task create", "/v1/tasks", `{"from":"lead","to":"role:testr","title":"t"}`,
			[]string{`to: role "testr" (no agent has it; did you mean role:tester?): not found`, remedy}},
		{"task create capability", "/v1/tasks", `{"from":"lead","to":"capability:gp","title":"t"}`,
			[]string{`to: capability "gp" (no agent has it; did you mean capability:go?): not found`}},
		{"handoff", "/v1/tasks/t-h/handoff", `{"agent":"rita","fence":` + strconv.FormatUint(claim, 10) + `,"to":"tes"}`,
			[]string{`to: agent "tes" (not registered, never sent; did you mean tess or rex?): not found`}},
		{"approval", "/v1/approvals", `{"from":"lead","approvers":["ritaa","role:lead"],"title":"deploy","action":{"x":1}}`,
			[]string{`approvers: agent "ritaa" (not registered, never sent; did you mean rita?): not found`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := e.svc.NumStored()
			msg := wantError(t, do(t, "POST", e.url+tt.path, tt.body, nil), http.StatusNotFound, api.CodeNotFound)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("404 says %q, want it to say %q", msg, w)
				}
			}
			if n := e.svc.NumStored(); n != before {
				t.Errorf("the refusal stored something: %d messages, %d before", n, before)
			}
		})
	}

	if _, err := e.c.SetConfig(t.Context(), "unknown_recipients", "accept"); err != nil {
		t.Fatal(err)
	}
	res, err := e.c.Send(t.Context(), &api.Message{From: "lead", To: api.Recipients{"rtia"}, Channel: "c", Content: api.Content{Text: "x"}})
	if err != nil {
		t.Fatalf("send under accept: %v", err)
	}
	rc, err := e.c.Receipts(t.Context(), res.ID, api.Local)
	if err != nil || len(rc.Receipts) != 1 || rc.Receipts[0].State != api.ReceiptNoSuchAgent {
		t.Errorf("receipts under accept: %+v, %v; want rtia %s", rc, err, api.ReceiptNoSuchAgent)
	}
	cfg, err := e.c.Config(t.Context(), api.Local)
	if err != nil || cfg.UnknownRecipients != api.UnknownRecipientsAccept {
		t.Errorf("config %+v, %v; want unknown_recipients accept", cfg, err)
	}
}

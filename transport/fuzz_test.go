package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/transport"
)

// FuzzSendBody posts arbitrary bytes to POST /v1/messages. The handler must
// never panic and must answer 200 with {"id","seq","timestamp"}, or an error
// status of the send endpoint (400, 409, 413) with the error envelope; only a
// 200 or a 409 may have reached the service.
func FuzzSendBody(f *testing.F) {
	const maxBytes = 2048
	for _, seed := range []string{
		validBody,
		`{"from":"alice","channel":"general","to":"bob","content":{"text":"hi"}}`,
		`{"id":"dup","from":"alice","channel":"general","to":["bob"],"content":{"text":"same"}}`,
		`{"id":"dup","from":"alice","channel":"general","to":["bob"],"content":{"text":"other"}}`,
		`{"id":"msg-20261121-103000-codex-9f3a61c2","seq":0,"timestamp":"2026-11-21T10:30:00.123Z","channel":"agent-os-paper",
		  "from":"codex","to":["claude"],"type":"request","title":"Review","priority":"high",
		  "content":{"text":"@claude please review","code":"x := 1","artifacts":["plan.md"]},"tags":["review"],
		  "in_reply_to":"msg-1","thread_id":"msg-0","correlation_id":"task_123","requires_response":true,
		  "visibility":"private","metadata":{"a":[1,{"b":null}]}}`,
		``,
		`null`,
		`{}`,
		`[]`,
		`{"from":`,
		validBody + `}`,
		validBody + ` {}`,
		`{"bogus":1}`,
		`{"to":7}`,
		`{"timestamp":"yesterday"}`,
		`{"metadata":{"a":` + strings.Repeat("[", 100) + `}}`,
		bodyOfSize(maxBytes + 1),
		"\xff\xfe{}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		svc := newFake()
		// "dup" is stored, so a send reusing it with other content is a 409.
		if _, err := svc.Send(context.Background(), msg("dup", "alice", "general", "same", "bob")); err != nil {
			t.Fatal(err)
		}
		before := svc.count()
		h := transport.NewServer(svc, transport.ServerOptions{MaxMessageBytes: maxBytes, Logger: discard})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body)))

		out := rec.Body.Bytes()
		if !json.Valid(out) {
			t.Fatalf("status %d with a body that is not JSON: %q", rec.Code, out)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		reached := svc.count() - before
		switch rec.Code {
		case http.StatusOK:
			var res transport.SendResponse
			if err := json.Unmarshal(out, &res); err != nil || res.ID == "" || res.Seq == 0 {
				t.Fatalf("200 with %s (%v)", out, err)
			}
			if reached != 1 {
				t.Fatalf("200 after %d service calls", reached)
			}
			if len(body) > maxBytes {
				t.Fatalf("accepted %d bytes, over the limit of %d", len(body), maxBytes)
			}
			// What the service got passes the state machine's own validation.
			m := svc.stored(res.Seq)
			if m == nil || m.ID != res.ID {
				t.Fatalf("answer %+v but stored %+v", res, m)
			}
			m.Seq = 0
			if err := m.Validate(); err != nil {
				t.Fatalf("the service got an invalid message: %v", err)
			}
		case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge:
			code, _ := errorOf(t, out)
			want := map[int][]string{
				400: {transport.CodeBadRequest, transport.CodeUnknownField, transport.CodeInvalid},
				409: {transport.CodeConflict},
				413: {transport.CodeTooLarge},
			}[rec.Code]
			if !slices.Contains(want, code) {
				t.Fatalf("status %d with code %q", rec.Code, code)
			}
			if wantReached := btoi(rec.Code == http.StatusConflict); reached != wantReached {
				t.Fatalf("status %d after %d service calls, want %d", rec.Code, reached, wantReached)
			}
			if rec.Code == http.StatusRequestEntityTooLarge && len(body) <= maxBytes {
				t.Fatalf("413 for %d bytes, limit %d", len(body), maxBytes)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, out)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

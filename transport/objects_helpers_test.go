package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport/transporttest"
)

// What the task and approval route tests check alike, one copy.

// badRequest is a request a route refuses with 400: the error's code,
// and words its message holds.
type badRequest struct{ method, path, body, code, words string }

// wantBadRequests sends each request to the server at url: each must be
// refused with 400, its code and a message holding its words.
func wantBadRequests(t *testing.T, url string, cases []badRequest) {
	t.Helper()
	for _, tc := range cases {
		r := do(t, tc.method, url+tc.path, tc.body, nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s %s %.80s: %d %s, want 400", tc.method, tc.path, tc.body, r.status, r.body)
			continue
		}
		if msg := wantError(t, r, http.StatusBadRequest, tc.code); !strings.Contains(msg, tc.words) {
			t.Errorf("%s %s %.80s: message %q lacks %q", tc.method, tc.path, tc.body, msg, tc.words)
		}
	}
}

// forbidden is a request alice's token may not make: it acts as field.
type forbidden struct{ method, path, body, field string }

// wantForbidden sends each request with alice's token: each must be
// refused with 403 naming its field and the token, and none may reach
// the log (a write or a send).
func (e *authEnv) wantForbidden(t *testing.T, cases []forbidden) {
	t.Helper()
	for _, tt := range cases {
		msg := wantError(t, e.as(aliceSecret, tt.method, tt.path, tt.body), http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(msg, tt.field) || !strings.Contains(msg, "tok-alice") {
			t.Errorf("%s %s: 403 message %q does not name %s and the token", tt.method, tt.path, msg, tt.field)
		}
	}
	if writes, sends := e.writes(); writes != 0 || sends != 0 {
		t.Errorf("refused requests reached the log: %d writes, %d sends", writes, sends)
	}
}

// createTasks applies n task creates, t-0 … t-(n-1) from lead to rita,
// to svc directly (not through the API), calling each with i and the
// result.
func createTasks(t *testing.T, svc *transporttest.Service, n int, each func(i int, res *api.TaskResult)) {
	t.Helper()
	for i := range n {
		res, err := svc.ApplyCommand(api.OpTaskCreate, api.TaskCreateCommand{ID: "t-" + strconv.Itoa(i), From: "lead", To: "rita",
			Title: "t", Priority: api.DefaultPriority, TimeoutSeconds: 60, MaxAttempts: 1, Channel: api.DefaultChannel})
		if err != nil {
			t.Fatal(err)
		}
		if each != nil {
			each(i, res.(*api.TaskResult))
		}
	}
}

// streamUntilReady reads the stream q with c, within 20s, until its ready
// event, giving fn every event before it; a stream that ends otherwise
// fails t.
func streamUntilReady(t *testing.T, c *client.Client, q api.StreamQuery, fn func(api.StreamEvent)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errDone := errors.New("done")
	n := 0
	err := c.Stream(ctx, q, func(ev api.StreamEvent) error {
		if ev.Ready {
			return errDone
		}
		n++
		fn(ev)
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("stream %+v ended with %v after %d events", q, err, n)
	}
}

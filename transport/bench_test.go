package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/secrets"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// sendStub is a node whose proposer answers every command with one fixed
// send result, so that the benchmark measures the API and not the state
// machine.
type sendStub struct {
	*transporttest.Service
	result json.RawMessage
}

func (s sendStub) Apply(context.Context, api.Op, any) (json.RawMessage, error) { return s.result, nil }

// BenchmarkServeSend is the API's share of a send on the node a client
// reached, without the network or Raft: decode the 1 KiB body, normalize,
// validate, authorize, scan it for secrets (secret_guard refuse, the
// default), propose it (to a stub answering a fixed result), and write
// the answer. Run with -benchmem; figures in docs/PERFORMANCE.md.
func BenchmarkServeSend(b *testing.B) {
	// As maosd does at start: the rules compile once per process, which is
	// not a send's cost.
	if err := secrets.Warm(); err != nil {
		b.Fatal(err)
	}
	for _, auth := range []bool{false, true} {
		b.Run(fmt.Sprintf("auth=%v", auth), func(b *testing.B) {
			svc := sendStub{Service: transporttest.New(b), result: json.RawMessage(`{"id":"msg-bench-1","seq":7,"timestamp":"2026-11-21T10:30:00Z"}`)}
			opts := transport.ServerOptions{Logger: discard}
			token := ""
			if auth {
				token = strings.Repeat("k", 44)
				opts.Auth = &transport.AuthConfig{AdminToken: token}
			}
			h := transport.NewServer(svc, opts)
			// The id is the only part that changes: the fixture costs a
			// concatenation, not an encoding.
			head, tail := `{"id":"msg-bench-`, `","from":"bench","to":["sink"],"channel":"bench","content":{"text":"`+strings.Repeat("x", 1024)+`"}}`
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				body := head + strconv.Itoa(i) + tail
				req := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body))
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("send: %d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// entriesStub answers every entry of a batch with one fixed result.
type entriesStub struct {
	*transporttest.Service
	result json.RawMessage
}

func (s entriesStub) ApplyEntries(_ context.Context, entries [][]byte) ([]api.EntryOutcome, error) {
	outs := make([]api.EntryOutcome, len(entries))
	for i := range outs {
		outs[i].Result = s.result
	}
	return outs, nil
}

// BenchmarkServeEntries is the leader's API share of a follower's
// forwarded batch (POST /v1/internal/entries, 16 send entries of 1 KiB
// text) against a stub answering each entry; ns/op and allocs/op are per
// batch, so divide by 16 for an entry.
func BenchmarkServeEntries(b *testing.B) {
	svc := entriesStub{Service: transporttest.New(b), result: json.RawMessage(`{"id":"msg-bench-1","seq":7,"timestamp":"2026-11-21T10:30:00Z"}`)}
	h := transport.NewServer(svc, transport.ServerOptions{Logger: discard})
	var body []byte
	for i := range 16 {
		e, err := fsm.Encode(api.OpSend, 1, api.SendCommand{Message: api.Message{ID: fmt.Sprintf("msg-bench-%d", i),
			From: "bench", To: api.Recipients{"sink"}, Channel: "bench", Content: api.Content{Text: strings.Repeat("x", 1024)}}})
		if err != nil {
			b.Fatal(err)
		}
		body = api.AppendEntry(body, e)
	}
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/internal/entries", bytes.NewReader(body))
		req.Header.Set("Content-Type", api.ContentTypeEntries)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("entries: %d %s", rec.Code, rec.Body)
		}
	}
}

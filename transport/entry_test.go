package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// entryService is the fake with its own ApplyEntry: it records the
// entries it is given and answers with result or err.
type entryService struct {
	*transporttest.Service
	entries [][]byte
	result  json.RawMessage
	err     error
}

func (s *entryService) ApplyEntry(ctx context.Context, entry []byte) (json.RawMessage, error) {
	s.entries = append(s.entries, bytes.Clone(entry))
	return s.result, s.err
}

func serveEntries(t *testing.T, svc transport.Backend) *client.Client {
	t.Helper()
	srv := httptest.NewServer(transport.NewServer(svc, transport.ServerOptions{Logger: discard}))
	t.Cleanup(srv.Close)
	return client.NewClient(srv.URL, nil)
}

func TestApplyEntryRelaysTheEntryAndTheResult(t *testing.T) {
	svc := &entryService{Service: transporttest.New(t), result: json.RawMessage(`{"id":"m1","seq":7}`)}
	c := serveEntries(t, svc)
	entry, err := fsm.Encode(api.OpSend, 1, api.SendCommand{Message: api.Message{ID: "m1"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ApplyEntry(context.Background(), entry)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"id":"m1","seq":7}` {
		t.Errorf("result = %s", got)
	}
	if len(svc.entries) != 1 || !bytes.Equal(svc.entries[0], entry) {
		t.Errorf("the service got %q, want the entry as sent", svc.entries)
	}
}

func TestApplyEntryErrorsKeepTheirKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{fmt.Errorf("fsm: apply send: id m1: %w", api.ErrConflict), api.ErrConflict},
		{fmt.Errorf("%w: node n2", api.ErrNotLeader), api.ErrNotLeader},
		{fmt.Errorf("fsm: %w", api.ErrForbidden), api.ErrForbidden},
	} {
		svc := &entryService{Service: transporttest.New(t), err: tc.err}
		_, err := serveEntries(t, svc).ApplyEntry(context.Background(), []byte{2, 4, 's', 'e', 'n', 'd', 0, '{', '}'})
		if !errors.Is(err, tc.want) {
			t.Errorf("service error %v: client got %v, want one matching %v", tc.err, err, tc.want)
		}
	}
}

func TestInternalEntryRefusesBadRequests(t *testing.T) {
	svc := &entryService{Service: transporttest.New(t), result: json.RawMessage(`{}`)}
	srv := httptest.NewServer(transport.NewServer(svc, transport.ServerOptions{Logger: discard}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, ctype, body string
		status            int
		code              string
	}{
		{"JSON content type", "application/json", "{}", http.StatusBadRequest, api.CodeBadRequest},
		{"no content type", "", "x", http.StatusBadRequest, api.CodeBadRequest},
		{"empty", api.ContentTypeEntry, "", http.StatusBadRequest, api.CodeBadRequest},
		{"over the limit", api.ContentTypeEntry, strings.Repeat("x", 2<<20+1), http.StatusRequestEntityTooLarge, api.CodeTooLarge},
	} {
		h := http.Header{}
		if tc.ctype != "" {
			h.Set("Content-Type", tc.ctype)
		}
		r := do(t, http.MethodPost, srv.URL+"/v1/internal/entry", tc.body, h)
		if r.status != tc.status || !strings.Contains(string(r.body), `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d with code %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	// A chunked body declares no length: the handler meets the ceiling as
	// it reads.
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/internal/entry", io.MultiReader(strings.NewReader(strings.Repeat("x", 2<<20+1))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", api.ContentTypeEntry)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "entry over the limit of 2097152 bytes") {
		t.Errorf("chunked entry over the limit: %d %s", resp.StatusCode, body)
	}
	if len(svc.entries) != 0 {
		t.Errorf("refused requests reached the service: %q", svc.entries)
	}
}

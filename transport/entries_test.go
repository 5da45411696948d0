package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

func sendEntry(t *testing.T, id, text string) []byte {
	t.Helper()
	e, err := fsm.Encode(api.OpSend, 1, api.SendCommand{Message: api.Message{
		ID: id, Channel: "ops", From: "codex", To: api.Recipients{"claude"}, Type: "chat", Priority: "normal", Visibility: api.VisibilityPublic,
		Content: api.Content{Text: text}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A batch's entries are applied in order, each answered on its own: a
// refused entry (bad input, a reused id) fails only itself, with the kind
// of error the single-entry route would have given.
func TestApplyEntriesAnswersEachEntry(t *testing.T) {
	svc := transporttest.New(t)
	c := serveEntries(t, svc)
	const id1, id2 = "msg-20261128-090000-codex-0000000a", "msg-20261128-090000-codex-0000000b"
	bad := sendEntry(t, "not an id", "x")
	outs, err := c.ApplyEntries(context.Background(), [][]byte{
		sendEntry(t, id1, "one"), bad, sendEntry(t, id1, "other content"), sendEntry(t, id2, "two"), sendEntry(t, id1, "one"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 5 {
		t.Fatalf("%d outcomes for 5 entries", len(outs))
	}
	seq := func(o api.EntryOutcome) uint64 {
		t.Helper()
		var r fsm.SendResult
		if o.Err != nil || json.Unmarshal(o.Result, &r) != nil {
			t.Fatalf("outcome %s, %v: want a send result", o.Result, o.Err)
		}
		return r.Seq
	}
	first, second := seq(outs[0]), seq(outs[3])
	if !errors.Is(outs[1].Err, api.ErrInvalid) || outs[1].Result != nil {
		t.Errorf("bad entry: %s, %v; want invalid", outs[1].Result, outs[1].Err)
	}
	if !errors.Is(outs[2].Err, api.ErrConflict) {
		t.Errorf("reused id: %v; want conflict", outs[2].Err)
	}
	if second <= first {
		t.Errorf("seqs %d then %d: want them in the batch's order", first, second)
	}
	if again := seq(outs[4]); again != first {
		t.Errorf("the same send again answered seq %d, want the original %d", again, first)
	}
	page, err := svc.State().ChannelPage("ops", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 2 {
		t.Errorf("channel holds %d messages, want the two distinct sends once each", len(page.Messages))
	}
}

// A failure of the whole batch (the node no longer leads) comes back as
// the request's error, of its kind; nothing is answered per entry.
func TestApplyEntriesWholeBatchError(t *testing.T) {
	svc := transporttest.New(t)
	svc.Fail("ApplyEntries", api.ErrNotLeader)
	outs, err := serveEntries(t, svc).ApplyEntries(context.Background(), [][]byte{sendEntry(t, "msg-20261128-090000-codex-0000000a", "x")})
	if !errors.Is(err, api.ErrNotLeader) || outs != nil {
		t.Fatalf("got %v, %v; want the whole batch's not_leader", outs, err)
	}
}

// A malformed batch is refused whole with 400 naming the entry and the
// limit, and nothing of it reaches the state machine.
func TestInternalEntriesRefusesBadBatches(t *testing.T) {
	svc := transporttest.New(t)
	srv := httptest.NewServer(transport.NewServer(svc, transport.ServerOptions{Logger: discard}))
	t.Cleanup(srv.Close)
	entry := sendEntry(t, "msg-20261128-090000-codex-0000000a", "x")
	var tooMany []byte
	for range transport.MaxBatchEntries + 1 {
		tooMany = api.AppendEntry(tooMany, entry)
	}
	cut := api.AppendEntry(nil, entry)
	cut = append(cut, 5, 'a')
	for _, tc := range []struct {
		name, ctype, body string
		status            int
		says              string
	}{
		{"JSON content type", "application/json", "{}", http.StatusBadRequest, "Content-Type"},
		{"empty", api.ContentTypeEntries, "", http.StatusBadRequest, "entries: empty batch"},
		{"empty entry", api.ContentTypeEntries, "\x00", http.StatusBadRequest, "entries[0]: empty entry"},
		{"cut off", api.ContentTypeEntries, string(cut), http.StatusBadRequest, "entries[1]: length 5 but 1 bytes left"},
		{"bad prefix", api.ContentTypeEntries, "\xff", http.StatusBadRequest, "entries[0]: bad length prefix"},
		{"too many", api.ContentTypeEntries, string(tooMany), http.StatusBadRequest, "more than 256 entries"},
		{"over the limit", api.ContentTypeEntries, strings.Repeat("x", 2<<20+11), http.StatusRequestEntityTooLarge, "over the limit of 2097162 bytes"},
	} {
		r := do(t, http.MethodPost, srv.URL+"/v1/internal/entries", tc.body, http.Header{"Content-Type": {tc.ctype}})
		if r.status != tc.status || !strings.Contains(string(r.body), tc.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, r.status, r.body, tc.status, tc.says)
		}
	}
	if calls := svc.CallsTo("ApplyEntries"); len(calls) != 0 {
		t.Errorf("refused batches reached the service: %d calls", len(calls))
	}
}

// AppendEntry and SplitEntries are inverses.
func TestEntriesFramingRoundTrips(t *testing.T) {
	in := [][]byte{[]byte("a"), []byte(strings.Repeat("b", 300)), {2, 0, 1}}
	var body []byte
	for _, e := range in {
		body = api.AppendEntry(body, e)
	}
	out, err := transport.SplitEntries(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d entries back, want %d", len(out), len(in))
	}
	for i := range in {
		if string(out[i]) != string(in[i]) {
			t.Errorf("entry %d: %q, want %q", i, out[i], in[i])
		}
	}
}

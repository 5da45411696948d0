package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// call is one method call the fake received.
type call struct {
	method    string
	forwarded bool                  // IsForwarded(ctx)
	cons      transport.Consistency // reads only
	arg       string                // id, channel or node id
	after     uint64
	limit     int
}

// fakeService is an in-memory transport.Service: messages get seq 1, 2, 3...
// in send order; a send is idempotent on its id (same content → same seq,
// other content → an error wrapping fsm.ErrConflict). fail makes a method
// return a given error; every call is recorded with IsForwarded(ctx).
type fakeService struct {
	mu        sync.Mutex
	now       time.Time
	msgs      []*fsm.Message    // msgs[seq-1]
	byID      map[string]uint64 // id → seq
	sums      map[string][]byte // id → canonical sent form
	errs      map[string]error  // method → error to return
	calls     []call
	status    transport.Status
	joins     []transport.JoinRequest
	removed   []string
	transfers []string
	state     *fsm.FSM                                   // State(); nil unless a test sets it
	applied   []transport.ApplyRequest                   // Apply calls
	applyFn   func(fsm.Op, json.RawMessage) (any, error) // Apply's answer; nil echoes the op
}

func newFake() *fakeService {
	return &fakeService{
		now:  time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC),
		byID: map[string]uint64{},
		sums: map[string][]byte{},
		errs: map[string]error{},
		status: transport.Status{
			NodeID: "n1", State: "leader", LeaderID: "n1", LeaderAPIAddr: "127.0.0.1:7001",
			Term: 3, CommitIndex: 12, AppliedIndex: 12, LastIndex: 12,
			APIAddr: "127.0.0.1:7001", RaftAddr: "127.0.0.1:8001",
			Voters: []transport.Voter{
				{ID: "n1", RaftAddr: "127.0.0.1:8001", APIAddr: "127.0.0.1:7001", Suffrage: "voter"},
				{ID: "n2", RaftAddr: "127.0.0.1:8002", Suffrage: "nonvoter"},
			},
		},
	}
}

// fail makes method return err from now on (nil clears it).
func (f *fakeService) fail(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[method] = err
}

// record notes a call and returns the error configured for its method.
func (f *fakeService) record(ctx context.Context, c call) error {
	c.forwarded = transport.IsForwarded(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	return f.errs[c.method]
}

// callsTo returns the recorded calls of method, in order.
func (f *fakeService) callsTo(method string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

// count is the number of calls received, all methods together.
func (f *fakeService) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// stored returns a copy of the message at seq, or nil.
func (f *fakeService) stored(seq uint64) *fsm.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq == 0 || seq > uint64(len(f.msgs)) {
		return nil
	}
	m := *f.msgs[seq-1]
	return &m
}

// joined, removedIDs and transfersTo return copies of what the cluster
// methods received.
func (f *fakeService) joined() []transport.JoinRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.joins)
}

func (f *fakeService) removedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removed)
}

func (f *fakeService) transfersTo() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.transfers)
}

func (f *fakeService) numStored() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.msgs)
}

func (f *fakeService) Send(ctx context.Context, m *fsm.Message) (*fsm.SendResult, error) {
	if err := f.record(ctx, call{method: "Send", arg: m.ID}); err != nil {
		return nil, err
	}
	c := *m
	c.Seq = 0
	sum, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq, ok := f.byID[m.ID]; ok {
		if !bytes.Equal(f.sums[m.ID], sum) {
			return nil, fmt.Errorf("fake: send %s: %w", m.ID, fsm.ErrConflict)
		}
		prev := f.msgs[seq-1]
		return &fsm.SendResult{ID: prev.ID, Seq: seq, Timestamp: prev.Timestamp, Duplicate: true}, nil
	}
	c.Seq = uint64(len(f.msgs) + 1)
	if c.Timestamp.IsZero() {
		c.Timestamp = f.now.Add(time.Duration(c.Seq) * time.Millisecond)
	}
	f.msgs = append(f.msgs, &c)
	f.byID[c.ID] = c.Seq
	f.sums[c.ID] = sum
	return &fsm.SendResult{ID: c.ID, Seq: c.Seq, Timestamp: c.Timestamp}, nil
}

func (f *fakeService) Message(ctx context.Context, id string, cons transport.Consistency) (*fsm.Message, error) {
	if err := f.record(ctx, call{method: "Message", arg: id, cons: cons}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	seq, ok := f.byID[id]
	if !ok {
		return nil, fmt.Errorf("fake: message %s: %w", id, fsm.ErrNotFound)
	}
	m := *f.msgs[seq-1]
	return &m, nil
}

func (f *fakeService) ChannelPage(ctx context.Context, channel string, after uint64, limit int, cons transport.Consistency) (fsm.Page, error) {
	if err := f.record(ctx, call{method: "ChannelPage", arg: channel, after: after, limit: limit, cons: cons}); err != nil {
		return fsm.Page{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	page := fsm.Page{Messages: []*fsm.Message{}}
	for _, m := range f.msgs {
		if m.Channel != channel || m.Seq <= after {
			continue
		}
		if len(page.Messages) == limit {
			page.HasMore = true
			break
		}
		c := *m
		page.Messages = append(page.Messages, &c)
	}
	return page, nil
}

func (f *fakeService) Channels(ctx context.Context, cons transport.Consistency) ([]fsm.ChannelInfo, error) {
	if err := f.record(ctx, call{method: "Channels", cons: cons}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	by := map[string]*fsm.ChannelInfo{}
	for _, m := range f.msgs {
		ci := by[m.Channel]
		if ci == nil {
			ci = &fsm.ChannelInfo{Name: m.Channel, FirstSeq: m.Seq}
			by[m.Channel] = ci
		}
		ci.Count++
		ci.LastSeq = m.Seq
	}
	out := []fsm.ChannelInfo{}
	for _, ci := range by {
		out = append(out, *ci)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *fakeService) Status(ctx context.Context) (transport.Status, error) {
	if err := f.record(ctx, call{method: "Status"}); err != nil {
		return transport.Status{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.status
	st.Voters = slices.Clone(st.Voters)
	return st, nil
}

func (f *fakeService) Ready(ctx context.Context) error {
	return f.record(ctx, call{method: "Ready"})
}

func (f *fakeService) Join(ctx context.Context, req transport.JoinRequest) error {
	if err := f.record(ctx, call{method: "Join", arg: req.NodeID}); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joins = append(f.joins, req)
	return nil
}

func (f *fakeService) Remove(ctx context.Context, nodeID string) error {
	if err := f.record(ctx, call{method: "Remove", arg: nodeID}); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, nodeID)
	return nil
}

func (f *fakeService) Snapshot(ctx context.Context) (transport.SnapshotResponse, error) {
	if err := f.record(ctx, call{method: "Snapshot"}); err != nil {
		return transport.SnapshotResponse{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return transport.SnapshotResponse{NodeID: "n1", ID: "3-12-1700000000000", Index: 12, Term: 3}, nil
}

func (f *fakeService) Apply(ctx context.Context, op fsm.Op, body any) (json.RawMessage, error) {
	if err := f.record(ctx, call{method: "Apply", arg: string(op)}); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.applied = append(f.applied, transport.ApplyRequest{Op: op, Body: raw})
	fn := f.applyFn
	f.mu.Unlock()
	var res any = map[string]string{"op": string(op)}
	if fn != nil {
		if res, err = fn(op, raw); err != nil {
			return nil, err
		}
	}
	return json.Marshal(res)
}

func (f *fakeService) Linearize(ctx context.Context, c transport.Consistency) error {
	return f.record(ctx, call{method: "Linearize", cons: c})
}

func (f *fakeService) ReadIndex(ctx context.Context) (uint64, error) {
	if err := f.record(ctx, call{method: "ReadIndex"}); err != nil {
		return 0, err
	}
	return f.status.CommitIndex, nil
}

func (f *fakeService) State() *fsm.FSM { return f.state }

func (f *fakeService) TransferLeadership(ctx context.Context, to string) (transport.TransferResponse, error) {
	if err := f.record(ctx, call{method: "TransferLeadership", arg: to}); err != nil {
		return transport.TransferResponse{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transfers = append(f.transfers, to)
	leader := to
	if leader == "" {
		leader = "n2"
	}
	return transport.TransferResponse{LeaderID: leader}, nil
}

var _ transport.Service = (*fakeService)(nil)

// --- helpers shared by the tests ---

var discard = slog.New(slog.DiscardHandler)

// serve starts a loopback HTTP server for the API in front of f.
func serve(t testing.TB, f *fakeService, opts transport.ServerOptions) *httptest.Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard
	}
	srv := httptest.NewServer(transport.NewServer(f, opts))
	t.Cleanup(srv.Close)
	return srv
}

// reply is a raw HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends one raw request; body "" sends none.
func do(t testing.TB, method, url, body string, header http.Header) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// errorOf checks that data is exactly {"error":{"code":...,"message":...}}
// with a non-empty message and returns code and message.
func errorOf(t testing.TB, data []byte) (code, message string) {
	t.Helper()
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(data, &outer); err != nil {
		t.Fatalf("error body is not a JSON object: %v: %s", err, data)
	}
	if len(outer) != 1 || outer["error"] == nil {
		t.Fatalf("error body has keys %v, want only \"error\": %s", keys(outer), data)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(outer["error"], &inner); err != nil {
		t.Fatalf("\"error\" is not an object: %v: %s", err, data)
	}
	if got := keys(inner); !slices.Equal(got, []string{"code", "message"}) {
		t.Fatalf("\"error\" has keys %v, want [code message]: %s", got, data)
	}
	if err := json.Unmarshal(inner["code"], &code); err != nil {
		t.Fatalf("code is not a string: %s", data)
	}
	if err := json.Unmarshal(inner["message"], &message); err != nil {
		t.Fatalf("message is not a string: %s", data)
	}
	if code == "" || message == "" {
		t.Fatalf("empty code or message: %s", data)
	}
	return code, message
}

// wantError checks an error answer: status, JSON content type, body shape
// and code; it returns the message.
func wantError(t testing.TB, r reply, status int, code string) string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	gotCode, msg := errorOf(t, r.body)
	if gotCode != code {
		t.Fatalf("code %q, want %q; body %s", gotCode, code, r.body)
	}
	return msg
}

// wantOK checks a 200 JSON answer and decodes it into v (if not nil).
func wantOK(t testing.TB, r reply, v any) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// msg is a valid message body to send.
func msg(id, from, channel, text string, to ...string) *fsm.Message {
	return &fsm.Message{ID: id, From: from, Channel: channel, To: to, Content: fsm.Content{Text: text}}
}

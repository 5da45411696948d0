// Package transporttest provides Service, an in-memory transport.Service
// for the tests of the HTTP API, its client and the commands built on them
// (package cli). It is a test helper, as net/http/httptest is: only
// _test.go files import it.
//
// By default Service keeps messages in memory and answers the cluster
// methods with a fixed two-node view. WithState puts a real fsm.FSM behind
// Apply and State, as a one-node cluster would; MessagesOnState puts the
// message methods on it too.
package transporttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// Epoch is the fake's clock: a message sent without a timestamp is stamped
// Epoch + seq seconds, and a heartbeat without one Epoch + version seconds.
var Epoch = time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)

// Call is one method call the fake received. Forwarded is
// transport.IsForwarded(ctx); Cons is set by the reads; Arg is the
// message id (Send, Message), channel (ChannelPage), node id (Join,
// Remove, TransferLeadership), op (Apply) or agent (PutPresence,
// AgentPresence); After and Limit are ChannelPage's.
type Call struct {
	Method    string
	Forwarded bool
	Cons      transport.Consistency
	Arg       string
	After     uint64
	Limit     int
}

// Option configures a Service at New.
type Option func(*Service)

// FirstIndex makes the state machine apply its first entry at Raft index i
// (default 1), so a test can tell an index from a count. Values below 1
// are taken as 1.
func FirstIndex(i uint64) Option {
	return func(s *Service) { s.firstIndex = max(i, 1) }
}

// Clock stamps the entry at Raft index i with fn(i) (default: time.Now).
// fn runs with the Service's lock held and must not call the Service.
func Clock(fn func(index uint64) time.Time) Option {
	return func(s *Service) { s.clock = fn }
}

// MessagesOnState routes Send, Message, ChannelPage and Channels to the
// state machine of WithState: sends are applied as fsm.OpSend, so the
// reads see resolved recipients, inboxes and threads. Without WithState
// those methods fail.
func MessagesOnState() Option {
	return func(s *Service) { s.messagesOnState = true }
}

// Service is an in-memory transport.Service, safe for concurrent use.
//
// Without state: messages get seq 1, 2, 3... in send order; a send is
// idempotent on its id (the same content answers the stored seq with
// Duplicate set, other content an error wrapping fsm.ErrConflict); Status
// is DefaultStatus; Join, Remove and TransferLeadership record their
// argument; Apply records the command and answers {"op": op} (or what
// OnApply's function says); Linearize and Ready answer nil; ReadIndex the
// status's commit index. Presence records heartbeats by agent with
// versions 1, 2, 3... and Members answers DefaultMembers.
//
// Every call is recorded with whether ctx was marked forwarded (CallsTo),
// and Fail makes a method return an error before it does anything else.
type Service struct {
	firstIndex      uint64
	clock           func(uint64) time.Time
	messagesOnState bool

	mu        sync.Mutex
	errs      map[string]error
	calls     []Call
	msgs      []*fsm.Message    // msgs[seq-1]
	byID      map[string]uint64 // id → seq
	sums      map[string][]byte // id → canonical sent form
	status    transport.Status
	joins     []transport.JoinRequest
	removed   []string
	transfers []string
	applied   []Command
	applyFn   func(fsm.Op, json.RawMessage) (any, error)

	stateful bool     // WithState was called; stays set after the test
	state    *fsm.FSM // nil once the test is over
	entries  uint64   // entries applied to state

	presence map[string]transport.Presence
	updates  []transport.PresenceUpdate
	version  uint64
	members  transport.MembersResponse
}

var _ transport.Service = (*Service)(nil)

// New returns an empty Service.
func New(opts ...Option) *Service {
	s := &Service{
		firstIndex: 1,
		errs:       map[string]error{},
		byID:       map[string]uint64{},
		sums:       map[string][]byte{},
		status:     DefaultStatus(),
		presence:   map[string]transport.Presence{},
		members:    DefaultMembers(),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// DefaultStatus is what Status answers: n1 leads term 3 with commit index
// 42 and applied index 41; n2 is a nonvoter.
func DefaultStatus() transport.Status {
	return transport.Status{
		NodeID: "n1", State: "leader", LeaderID: "n1", LeaderAPIAddr: "127.0.0.1:7070",
		Term: 3, CommitIndex: 42, AppliedIndex: 41, LastIndex: 42,
		APIAddr: "127.0.0.1:7070", RaftAddr: "127.0.0.1:7000",
		Voters: []transport.Voter{
			{ID: "n1", RaftAddr: "127.0.0.1:7000", APIAddr: "127.0.0.1:7070", Suffrage: "voter"},
			{ID: "n2", RaftAddr: "127.0.0.1:7001", APIAddr: "127.0.0.1:7071", Suffrage: "nonvoter"},
		},
	}
}

// DefaultMembers is what Members answers until EditMembers: seen from n1,
// unencrypted; n1 alive, n2 dead, n3 left.
func DefaultMembers() transport.MembersResponse {
	return transport.MembersResponse{NodeID: "n1", Members: []transport.Member{
		{NodeID: "n1", Status: "alive", GossipAddr: "127.0.0.1:7072", APIAddr: "127.0.0.1:7070", RaftAddr: "127.0.0.1:7071", Version: "v0.1.0"},
		{NodeID: "n2", Status: "dead", GossipAddr: "127.0.0.1:7082", APIAddr: "127.0.0.1:7080", RaftAddr: "127.0.0.1:7081", Version: "v0.1.0"},
		{NodeID: "n3", Status: "left", GossipAddr: "127.0.0.1:7092"},
	}}
}

// WithState opens a real state machine in t's temporary directory and puts
// it behind Apply (entries applied one at a time at the next index, as a
// one-node cluster would) and State. When t ends it is detached, under the
// lock, before it closes: the API server may still propose in the
// background (denial audit lines), and such late writes then fail instead
// of reaching a closed file. It returns s.
func (s *Service) WithState(t testing.TB) *Service {
	t.Helper()
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		s.state = nil
		s.mu.Unlock()
		f.Close()
	})
	s.mu.Lock()
	s.state, s.stateful = f, true
	s.mu.Unlock()
	return s
}

// ApplyCommand applies one command to the state machine at the next index,
// as Apply does, but is not a call: it is not recorded and Fail does not
// apply. It returns the state machine's result, or its refusal as the
// error. For setting up a test.
func (s *Service) ApplyCommand(op fsm.Op, body any) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		if s.stateful {
			return nil, errors.New("fake: the test is over; the state machine is closed")
		}
		return nil, errors.New("fake: no state machine; call WithState")
	}
	idx := s.firstIndex + s.entries
	ts := time.Now()
	if s.clock != nil {
		ts = s.clock(idx)
	}
	data, err := fsm.Encode(op, ts.UnixNano(), body)
	if err != nil {
		return nil, err
	}
	return s.applyLocked(data)
}

// applyLocked applies an encoded entry at the next index; s.mu is held and
// the state is open.
func (s *Service) applyLocked(data []byte) (any, error) {
	idx := s.firstIndex + s.entries
	s.entries++
	res := s.state.ApplyBatch([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}})[0]
	if err, ok := res.(error); ok {
		return nil, err
	}
	return res, nil
}

// ApplyEntry applies an encoded log entry (fsm.Encode) to the state
// machine of WithState, as a leader does with a follower's forwarded entry
// (transport.EntryApplier). It is recorded as a call.
func (s *Service) ApplyEntry(ctx context.Context, entry []byte) (json.RawMessage, error) {
	if err := s.record(ctx, Call{Method: "ApplyEntry"}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.state == nil {
		s.mu.Unlock()
		return nil, errors.New("fake: no state machine; call WithState")
	}
	res, err := s.applyLocked(entry)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// messageState is the state machine the message methods read under
// MessagesOnState.
func (s *Service) messageState() (*fsm.FSM, error) {
	if st := s.State(); st != nil {
		return st, nil
	}
	return nil, errors.New("fake: MessagesOnState without a state machine; call WithState")
}

// Fail makes method (a Service method name, e.g. "Send") return err from
// now on, before it does anything else; nil clears it.
func (s *Service) Fail(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[method] = err
}

// OnApply makes Apply answer fn(op, body as JSON) instead of applying or
// echoing the command; fn runs without the lock.
func (s *Service) OnApply(fn func(op fsm.Op, body json.RawMessage) (any, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyFn = fn
}

// record notes a call and returns the error configured for its method.
func (s *Service) record(ctx context.Context, c Call) error {
	c.Forwarded = transport.IsForwarded(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
	return s.errs[c.Method]
}

// CallsTo returns the recorded calls of method, in order.
func (s *Service) CallsTo(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Count is the number of calls received, all methods together.
func (s *Service) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// Stored returns a copy of the message Send stored under id, or nil.
func (s *Service) Stored(id string) *fsm.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, ok := s.byID[id]
	if !ok {
		return nil
	}
	m := *s.msgs[seq-1]
	return &m
}

// StoredSeq returns a copy of the message Send stored at seq, or nil.
func (s *Service) StoredSeq(seq uint64) *fsm.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq == 0 || seq > uint64(len(s.msgs)) {
		return nil
	}
	m := *s.msgs[seq-1]
	return &m
}

// NumStored is the number of messages Send stored (not counting those
// applied to the state machine).
func (s *Service) NumStored() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs)
}

// Joined, Removed and Transfers return copies of what Join, Remove and
// TransferLeadership received, in order.
func (s *Service) Joined() []transport.JoinRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.joins)
}

func (s *Service) Removed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.removed)
}

func (s *Service) Transfers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.transfers)
}

// Command is one command Apply received: its op and its body as JSON.
type Command struct {
	Op   fsm.Op
	Body json.RawMessage
}

// Applied returns the commands Apply received (not ApplyCommand's), with
// their bodies as JSON, in order.
func (s *Service) Applied() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applied)
}

func (s *Service) Send(ctx context.Context, m *fsm.Message) (*fsm.SendResult, error) {
	if err := s.record(ctx, Call{Method: "Send", Arg: m.ID}); err != nil {
		return nil, err
	}
	if s.messagesOnState {
		res, err := s.ApplyCommand(fsm.OpSend, fsm.SendCommand{Message: *m})
		if err != nil {
			return nil, err
		}
		r, ok := res.(*fsm.SendResult)
		if !ok {
			return nil, fmt.Errorf("fake: send %s: the state machine answered %T", m.ID, res)
		}
		return r, nil
	}
	c := *m
	c.Seq = 0
	sum, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq, ok := s.byID[m.ID]; ok {
		if !bytes.Equal(s.sums[m.ID], sum) {
			return nil, fmt.Errorf("fake: send %s: %w", m.ID, fsm.ErrConflict)
		}
		prev := s.msgs[seq-1]
		return &fsm.SendResult{ID: prev.ID, Seq: seq, Timestamp: prev.Timestamp, Duplicate: true}, nil
	}
	c.Seq = uint64(len(s.msgs) + 1)
	if c.Timestamp.IsZero() {
		c.Timestamp = Epoch.Add(time.Duration(c.Seq) * time.Second)
	}
	s.msgs = append(s.msgs, &c)
	s.byID[c.ID] = c.Seq
	s.sums[c.ID] = sum
	return &fsm.SendResult{ID: c.ID, Seq: c.Seq, Timestamp: c.Timestamp}, nil
}

func (s *Service) Message(ctx context.Context, id string, cons transport.Consistency) (*fsm.Message, error) {
	if err := s.record(ctx, Call{Method: "Message", Arg: id, Cons: cons}); err != nil {
		return nil, err
	}
	if s.messagesOnState {
		st, err := s.messageState()
		if err != nil {
			return nil, err
		}
		return st.Message(id)
	}
	if m := s.Stored(id); m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("fake: message %s: %w", id, fsm.ErrNotFound)
}

func (s *Service) ChannelPage(ctx context.Context, channel string, after uint64, limit int, cons transport.Consistency) (fsm.Page, error) {
	if err := s.record(ctx, Call{Method: "ChannelPage", Arg: channel, After: after, Limit: limit, Cons: cons}); err != nil {
		return fsm.Page{}, err
	}
	if s.messagesOnState {
		st, err := s.messageState()
		if err != nil {
			return fsm.Page{}, err
		}
		return st.ChannelPage(channel, after, limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	page := fsm.Page{Messages: []*fsm.Message{}}
	for _, m := range s.msgs {
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

// Channels answers the channels by name, as the state machine does.
func (s *Service) Channels(ctx context.Context, cons transport.Consistency) ([]fsm.ChannelInfo, error) {
	if err := s.record(ctx, Call{Method: "Channels", Cons: cons}); err != nil {
		return nil, err
	}
	if s.messagesOnState {
		st, err := s.messageState()
		if err != nil {
			return nil, err
		}
		return st.Channels()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	by := map[string]*fsm.ChannelInfo{}
	for _, m := range s.msgs {
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

func (s *Service) Status(ctx context.Context) (transport.Status, error) {
	if err := s.record(ctx, Call{Method: "Status"}); err != nil {
		return transport.Status{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Voters = slices.Clone(st.Voters)
	return st, nil
}

func (s *Service) Ready(ctx context.Context) error {
	return s.record(ctx, Call{Method: "Ready"})
}

func (s *Service) Join(ctx context.Context, req transport.JoinRequest) error {
	if err := s.record(ctx, Call{Method: "Join", Arg: req.NodeID}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.joins = append(s.joins, req)
	return nil
}

func (s *Service) Remove(ctx context.Context, nodeID string) error {
	if err := s.record(ctx, Call{Method: "Remove", Arg: nodeID}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed = append(s.removed, nodeID)
	return nil
}

// Snapshot answers a snapshot of DefaultStatus's term and commit index.
func (s *Service) Snapshot(ctx context.Context) (transport.SnapshotResponse, error) {
	if err := s.record(ctx, Call{Method: "Snapshot"}); err != nil {
		return transport.SnapshotResponse{}, err
	}
	return transport.SnapshotResponse{NodeID: "n1", ID: "3-42-1700000000000", Index: 42, Term: 3}, nil
}

// TransferLeadership answers to as the new leader, n2 for "" (any).
func (s *Service) TransferLeadership(ctx context.Context, to string) (transport.TransferResponse, error) {
	if err := s.record(ctx, Call{Method: "TransferLeadership", Arg: to}); err != nil {
		return transport.TransferResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transfers = append(s.transfers, to)
	leader := to
	if leader == "" {
		leader = "n2"
	}
	return transport.TransferResponse{LeaderID: leader}, nil
}

// Apply records the command (Applied) and answers, in this order of
// precedence: OnApply's function; the state machine's result once
// WithState was called (an error after the test); {"op": op}.
func (s *Service) Apply(ctx context.Context, op fsm.Op, body any) (json.RawMessage, error) {
	if err := s.record(ctx, Call{Method: "Apply", Arg: string(op)}); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.applied = append(s.applied, Command{Op: op, Body: raw})
	fn, stateful := s.applyFn, s.stateful
	s.mu.Unlock()
	var res any = map[string]string{"op": string(op)}
	switch {
	case fn != nil:
		res, err = fn(op, raw)
	case stateful:
		res, err = s.ApplyCommand(op, json.RawMessage(raw))
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

func (s *Service) Linearize(ctx context.Context, c transport.Consistency) error {
	return s.record(ctx, Call{Method: "Linearize", Cons: c})
}

func (s *Service) ReadIndex(ctx context.Context) (uint64, error) {
	if err := s.record(ctx, Call{Method: "ReadIndex"}); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status.CommitIndex, nil
}

// State is the state machine of WithState; nil without one and after the
// test.
func (s *Service) State() *fsm.FSM {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// PresenceUpdates returns the heartbeats PutPresence received, as the
// handler passed them, in order.
func (s *Service) PresenceUpdates() []transport.PresenceUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.updates)
}

// SetPresence stores p as it is, e.g. an OFFLINE agent or one on another
// node; it is not a call.
func (s *Service) SetPresence(p transport.Presence) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.presence[p.AgentID] = p
}

// EditMembers changes what Members answers.
func (s *Service) EditMembers(fn func(*transport.MembersResponse)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.members)
}

// PutPresence stores the heartbeat on node n1 at the next version, stamped
// Epoch + version seconds unless it carries a timestamp.
func (s *Service) PutPresence(ctx context.Context, agent string, u transport.PresenceUpdate) (transport.Presence, error) {
	if err := s.record(ctx, Call{Method: "PutPresence", Arg: agent}); err != nil {
		return transport.Presence{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, u)
	s.version++
	ts := Epoch.Add(time.Duration(s.version) * time.Second)
	if u.Timestamp != nil {
		ts = *u.Timestamp
	}
	p := transport.Presence{AgentID: agent, Node: "n1", State: u.State, Substate: u.Substate, Channel: u.Channel,
		PID: u.PID, Task: u.Task, Reason: u.Reason, Timestamp: ts, Version: s.version, Origin: "n1"}
	s.presence[agent] = p
	return p, nil
}

// Presence answers the records by agent id; nil when there are none, so
// the handler must still answer a list.
func (s *Service) Presence(ctx context.Context) ([]transport.Presence, error) {
	if err := s.record(ctx, Call{Method: "Presence"}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []transport.Presence
	for _, p := range s.presence {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out, nil
}

func (s *Service) AgentPresence(ctx context.Context, agent string) (transport.Presence, error) {
	if err := s.record(ctx, Call{Method: "AgentPresence", Arg: agent}); err != nil {
		return transport.Presence{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.presence[agent]
	if !ok {
		return p, fmt.Errorf("fake: presence of %s: %w", agent, fsm.ErrNotFound)
	}
	return p, nil
}

func (s *Service) Members(ctx context.Context) (transport.MembersResponse, error) {
	if err := s.record(ctx, Call{Method: "Members"}); err != nil {
		return transport.MembersResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.members
	res.Members = slices.Clone(res.Members)
	return res, nil
}

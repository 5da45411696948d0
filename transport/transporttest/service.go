// Package transporttest provides Service, a one-node transport.Backend
// for the tests of the HTTP API, its client and the commands built on them
// (package cli). It is a test helper, as net/http/httptest is: only
// _test.go files import it.
//
// Service has one mode. A real fsm.FSM in the test's temporary directory
// applies every proposed command at the next index, as a one-node cluster
// would, so what a handler proposes is what the reads see (resolved
// recipients, inboxes, threads, dedup by id). Membership and presence are
// simple fakes: a fixed two-node view, and heartbeats recorded by agent.
package transporttest

import (
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

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/blobstore"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// Epoch is the fake's presence clock: a heartbeat without a timestamp is
// stamped Epoch + version seconds. Tests that want fixed entry timestamps
// pass a Clock built on it.
var Epoch = time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)

// Call is one method call the fake received. Forwarded is
// transport.IsForwarded(ctx); Cons is Linearize's consistency; Arg is the
// op (Apply), node id (Join, Remove, TransferLeadership) or agent
// (PutPresence, AgentPresence).
type Call struct {
	Method    string
	Forwarded bool
	Cons      api.Consistency
	Arg       string
}

// Option configures a Service at New.
type Option func(*Service)

// FirstIndex makes the state machine apply its first entry at Raft index i
// (default 1), so a test can tell an index from a count. Values below 1
// are taken as 1.
func FirstIndex(i uint64) Option {
	return func(s *Service) { s.firstIndex = max(i, 1) }
}

// Agents registers ids (role "agent") before the first entry: at the
// indexes just below FirstIndex's (which must leave room for them), so
// the test's own entries keep their indexes. They are the agents the
// test addresses: a send, a task or an approval may name only agents
// someone answers to (unknown_recipients, fsm/known.go).
func Agents(ids ...string) Option {
	return func(s *Service) { s.agents = append(s.agents, ids...) }
}

// Clock stamps the entry at Raft index i with fn(i) (default: time.Now).
// fn runs with the Service's lock held and must not call the Service.
func Clock(fn func(index uint64) time.Time) Option {
	return func(s *Service) { s.clock = fn }
}

// Service is a one-node transport.Backend, safe for concurrent use.
//
// Proposer: Apply and ApplyEntry apply to the state machine (Apply first
// records the command, see Applied, and answers OnApply's function
// instead if one is set); Linearize answers nil; ReadIndex the status's
// commit index. Reader (State): the state machine itself. Membership:
// Status is DefaultStatus; Join, Remove and TransferLeadership record
// their argument; Members answers DefaultMembers. Presence: heartbeats by
// agent with versions 1, 2, 3...
//
// Every call is recorded with whether ctx was marked forwarded (CallsTo),
// and Fail makes a method return an error before it does anything else.
// Reads of the state are not calls: they go to the state machine.
type Service struct {
	firstIndex uint64
	agents     []string // registered before the first entry (Agents)
	clock      func(uint64) time.Time
	fsm        *fsm.FSM
	blobs      *blobstore.Store

	mu        sync.Mutex
	closed    bool // the test is over: the state machine is closed
	entries   uint64
	errs      map[string]error
	calls     []Call
	status    api.Status
	joins     []api.JoinRequest
	removed   []string
	transfers []string
	applied   []Command
	applyFn   func(api.Op, json.RawMessage) (any, error)

	presence map[string]api.Presence
	updates  []api.PresenceUpdate
	version  uint64
	members  api.MembersResponse
}

var _ transport.Backend = (*Service)(nil)

// New returns a Service whose state machine is empty, in t's temporary
// directory. When t ends the state machine closes; the API server may
// still propose in the background (denial audit lines), and such late
// writes then fail instead of reaching a closed file.
func New(t testing.TB, opts ...Option) *Service {
	t.Helper()
	s := &Service{
		firstIndex: 1,
		errs:       map[string]error{},
		status:     DefaultStatus(),
		presence:   map[string]api.Presence{},
		members:    DefaultMembers(),
	}
	for _, o := range opts {
		o(s)
	}
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.fsm = f
	if s.blobs, err = blobstore.Open(filepath.Join(t.TempDir(), "blobs")); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		f.Close()
	})
	if n := uint64(len(s.agents)); n > 0 {
		if s.firstIndex <= n {
			t.Fatalf("transporttest: %d agents need FirstIndex above %d, got %d", n, n, s.firstIndex)
		}
		s.firstIndex -= n
		s.Register(t, s.agents...)
	}
	return s
}

// DefaultStatus is what Status answers: n1 leads term 3 with commit index
// 42 and applied index 41; n2 is a nonvoter.
func DefaultStatus() api.Status {
	return api.Status{
		NodeID: "n1", State: "leader", LeaderID: "n1", LeaderAPIAddr: "127.0.0.1:7070",
		Term: 3, CommitIndex: 42, AppliedIndex: 41, LastIndex: 42,
		APIAddr: "127.0.0.1:7070", RaftAddr: "127.0.0.1:7000",
		StateVersion: 2, ClusterVersion: 1, // a rolling upgrade under way
		Voters: []api.Voter{
			{ID: "n1", RaftAddr: "127.0.0.1:7000", APIAddr: "127.0.0.1:7070", Suffrage: "voter"},
			{ID: "n2", RaftAddr: "127.0.0.1:7001", APIAddr: "127.0.0.1:7071", Suffrage: "nonvoter"},
		},
	}
}

// DefaultMembers is what Members answers until EditMembers: seen from n1,
// unencrypted; n1 alive, n2 dead, n3 left.
func DefaultMembers() api.MembersResponse {
	return api.MembersResponse{NodeID: "n1", Members: []api.Member{
		{NodeID: "n1", Status: "alive", GossipAddr: "127.0.0.1:7072", APIAddr: "127.0.0.1:7070", RaftAddr: "127.0.0.1:7071", Version: "v0.1.0"},
		{NodeID: "n2", Status: "dead", GossipAddr: "127.0.0.1:7082", APIAddr: "127.0.0.1:7080", RaftAddr: "127.0.0.1:7081", Version: "v0.1.0"},
		{NodeID: "n3", Status: "left", GossipAddr: "127.0.0.1:7092"},
	}}
}

// --- test helpers: setup and inspection, not calls ---

// FSM is the state machine, for a test's own reads (AppliedIndex...).
func (s *Service) FSM() *fsm.FSM { return s.fsm }

// ApplyCommand applies one command to the state machine at the next index,
// as Apply does, but is not a call: it is not recorded and Fail does not
// apply. It returns the state machine's result, or its refusal as the
// error. For setting up a test.
func (s *Service) ApplyCommand(op api.Op, body any) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := time.Now()
	if s.clock != nil {
		ts = s.clock(s.firstIndex + s.entries)
	}
	data, err := fsm.Encode(op, ts.UnixNano(), body)
	if err != nil {
		return nil, err
	}
	return s.applyLocked(data)
}

// applyLocked applies an encoded entry at the next index; s.mu is held.
func (s *Service) applyLocked(data []byte) (any, error) {
	if s.closed {
		return nil, errors.New("fake: the test is over; the state machine is closed")
	}
	idx := s.firstIndex + s.entries
	s.entries++
	res := s.fsm.ApplyBatch([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}})[0]
	if err, ok := res.(error); ok {
		return nil, err
	}
	return res, nil
}

// Fail makes method (a Service method name, e.g. "Apply") return err from
// now on, before it does anything else; nil clears it.
func (s *Service) Fail(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[method] = err
}

// OnApply makes Apply answer fn(op, body as JSON) instead of applying the
// command; fn runs without the lock.
func (s *Service) OnApply(fn func(op api.Op, body json.RawMessage) (any, error)) {
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

// Stored returns the message stored under id, or nil.
func (s *Service) Stored(id string) *api.Message {
	m, err := s.fsm.Message(id)
	if err != nil {
		return nil
	}
	return m
}

// StoredSeq returns the message stored at seq, or nil.
func (s *Service) StoredSeq(seq uint64) *api.Message {
	if seq == 0 {
		return nil
	}
	p, err := s.fsm.MessagesAfter(seq-1, 1)
	if err != nil || len(p.Messages) == 0 || p.Messages[0].Seq != seq {
		return nil
	}
	return p.Messages[0]
}

// NumStored is the number of messages the state machine holds.
func (s *Service) NumStored() int {
	n := 0
	for after := uint64(0); ; {
		p, err := s.fsm.MessagesAfter(after, api.MaxPageLimit)
		if err != nil || len(p.Messages) == 0 {
			return n
		}
		n += len(p.Messages)
		after = p.Messages[len(p.Messages)-1].Seq
	}
}

// Joined, Removed and Transfers return copies of what Join, Remove and
// TransferLeadership received, in order.
func (s *Service) Joined() []api.JoinRequest {
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
	Op   api.Op
	Body json.RawMessage
}

// Applied returns the commands Apply received (not ApplyCommand's nor
// ApplyEntry's), with their bodies as JSON, in order.
func (s *Service) Applied() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applied)
}

// PresenceUpdates returns the heartbeats PutPresence received, as the
// handler passed them, in order.
func (s *Service) PresenceUpdates() []api.PresenceUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.updates)
}

// SetPresence stores p as it is, e.g. an OFFLINE agent or one on another
// node; it is not a call.
func (s *Service) SetPresence(p api.Presence) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.presence[p.AgentID] = p
}

// EditStatus changes what Status answers.
func (s *Service) EditStatus(fn func(*api.Status)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.status)
}

// EditMembers changes what Members answers.
func (s *Service) EditMembers(fn func(*api.MembersResponse)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.members)
}

// --- transport.Proposer ---

// Apply records the command (Applied) and answers OnApply's function if
// one is set, else the state machine's result as JSON (its refusal as the
// error).
func (s *Service) Apply(ctx context.Context, op api.Op, body any) (json.RawMessage, error) {
	if err := s.record(ctx, Call{Method: "Apply", Arg: string(op)}); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.applied = append(s.applied, Command{Op: op, Body: raw})
	fn := s.applyFn
	s.mu.Unlock()
	var res any
	if fn != nil {
		res, err = fn(op, raw)
	} else {
		res, err = s.ApplyCommand(op, json.RawMessage(raw))
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// ApplyEntry applies an encoded log entry (fsm.Encode), as a leader does
// with a follower's forwarded entry.
func (s *Service) ApplyEntry(ctx context.Context, entry []byte) (json.RawMessage, error) {
	if err := s.record(ctx, Call{Method: "ApplyEntry"}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	res, err := s.applyLocked(entry)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// ApplyEntries applies a batch of encoded entries in order, as a leader
// does with a follower's forwarded batch: one outcome per entry, one
// entry's error failing only that entry.
func (s *Service) ApplyEntries(ctx context.Context, entries [][]byte) ([]api.EntryOutcome, error) {
	if err := s.record(ctx, Call{Method: "ApplyEntries"}); err != nil {
		return nil, err
	}
	outs := make([]api.EntryOutcome, len(entries))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range entries {
		res, err := s.applyLocked(e)
		if err == nil {
			outs[i].Result, err = json.Marshal(res)
		}
		outs[i].Err = err
	}
	return outs, nil
}

func (s *Service) Linearize(ctx context.Context, c api.Consistency) error {
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

// --- transport.Backend's reader ---

// State is the state machine, as the server reads it.
func (s *Service) State() transport.Reader { return s.fsm }

// --- transport.Membership ---

func (s *Service) Status(ctx context.Context) (api.Status, error) {
	if err := s.record(ctx, Call{Method: "Status"}); err != nil {
		return api.Status{}, err
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

func (s *Service) Join(ctx context.Context, req api.JoinRequest) error {
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
func (s *Service) Snapshot(ctx context.Context) (api.SnapshotResponse, error) {
	if err := s.record(ctx, Call{Method: "Snapshot"}); err != nil {
		return api.SnapshotResponse{}, err
	}
	return api.SnapshotResponse{NodeID: "n1", ID: "3-42-1700000000000", Index: 42, Term: 3}, nil
}

// TransferLeadership answers to as the new leader, n2 for "" (any).
func (s *Service) TransferLeadership(ctx context.Context, to string) (api.TransferResponse, error) {
	if err := s.record(ctx, Call{Method: "TransferLeadership", Arg: to}); err != nil {
		return api.TransferResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transfers = append(s.transfers, to)
	leader := to
	if leader == "" {
		leader = "n2"
	}
	return api.TransferResponse{LeaderID: leader}, nil
}

func (s *Service) Members(ctx context.Context) (api.MembersResponse, error) {
	if err := s.record(ctx, Call{Method: "Members"}); err != nil {
		return api.MembersResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.members
	res.Members = slices.Clone(res.Members)
	return res, nil
}

// --- transport.PresenceStore ---

// PutPresence stores the heartbeat on node n1 at the next version, stamped
// Epoch + version seconds unless it carries a timestamp.
func (s *Service) PutPresence(ctx context.Context, agent string, u api.PresenceUpdate) (api.Presence, error) {
	if err := s.record(ctx, Call{Method: "PutPresence", Arg: agent}); err != nil {
		return api.Presence{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, u)
	s.version++
	ts := Epoch.Add(time.Duration(s.version) * time.Second)
	if u.Timestamp != nil {
		ts = *u.Timestamp
	}
	p := api.Presence{AgentID: agent, Node: "n1", State: u.State, Substate: u.Substate, Source: u.Source, Channel: u.Channel,
		PID: u.PID, Task: u.Task, Reason: u.Reason, AgentHealth: u.AgentHealth, Timestamp: ts, Version: s.version, Origin: "n1"}
	s.presence[agent] = p
	return p, nil
}

// Presence answers the records by agent id; nil when there are none, so
// the handler must still answer a list.
func (s *Service) Presence(ctx context.Context) ([]api.Presence, error) {
	if err := s.record(ctx, Call{Method: "Presence"}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []api.Presence
	for _, p := range s.presence {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out, nil
}

func (s *Service) AgentPresence(ctx context.Context, agent string) (api.Presence, error) {
	if err := s.record(ctx, Call{Method: "AgentPresence", Arg: agent}); err != nil {
		return api.Presence{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.presence[agent]
	if !ok {
		return p, fmt.Errorf("fake: presence of %s: %w", agent, api.ErrNotFound)
	}
	return p, nil
}

// Register registers each id as an agent (role "agent"): the agents a
// test addresses, which a send, a task or an approval may name only once
// someone answers to them (unknown_recipients, fsm/known.go). Each is an
// entry of the log: Register answers how many entries it took, by which
// the seqs of the messages after them are offset.
func (s *Service) Register(t testing.TB, ids ...string) uint64 {
	t.Helper()
	for _, id := range ids {
		if _, err := s.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: id, Role: api.DefaultRole}); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
	}
	return uint64(len(ids))
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// withState gives the fake a real state machine: Apply encodes the command
// and applies it at the next index, as a one-node cluster would, and the
// generic read endpoints read it. Commands of the mailbox model are tested
// against this, so their CLI sees the real results and errors.
func (s *ctlFakeService) withState(t testing.TB) *ctlFakeService {
	t.Helper()
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Detached under the lock before it closes: the API server may still
	// propose in the background (denial audit lines) as the test ends.
	t.Cleanup(func() {
		s.mu.Lock()
		s.state = nil
		s.mu.Unlock()
		f.Close()
	})
	s.mu.Lock()
	s.state = f
	s.mu.Unlock()
	return s
}

func (s *ctlFakeService) Apply(_ context.Context, op fsm.Op, body any) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		return nil, errors.New("fake: no state; call withState")
	}
	s.index++
	data, err := fsm.Encode(op, time.Now().UnixNano(), body)
	if err != nil {
		return nil, err
	}
	res := s.state.ApplyBatch([]*raft.Log{{Index: 1000 + s.index, Type: raft.LogCommand, Data: data}})[0]
	if err, ok := res.(error); ok {
		return nil, err
	}
	return json.Marshal(res)
}

func (s *ctlFakeService) Linearize(context.Context, transport.Consistency) error { return nil }

func (s *ctlFakeService) ReadIndex(context.Context) (uint64, error) { return 0, nil }

func (s *ctlFakeService) State() *fsm.FSM {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

package transport_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// The helpers that seed and watch the fake node's state machine.

// store applies a send of m, normalized, to f's state machine directly (no
// call is recorded) and returns its result.
func store(t testing.TB, f *transporttest.Service, m *api.Message) *fsm.SendResult {
	t.Helper()
	m.Normalize(time.Now())
	res, err := f.ApplyCommand(api.OpSend, api.SendCommand{Message: *m})
	if err != nil {
		t.Fatalf("store %s: %v", m.ID, err)
	}
	return res.(*fsm.SendResult)
}

// sendCalls counts the sends f was asked to propose.
func sendCalls(f *transporttest.Service) int {
	n := 0
	for _, c := range f.CallsTo("Apply") {
		if c.Arg == string(api.OpSend) {
			n++
		}
	}
	return n
}

// pageRead is one ChannelPage read of the state.
type pageRead struct {
	Channel string
	After   uint64
	Limit   int
}

// pageRecorder is f with a reader that records its ChannelPage reads.
type pageRecorder struct {
	*transporttest.Service
	reader *pageReader
}

func (p pageRecorder) State() transport.Reader { return p.reader }

type pageReader struct {
	transport.Reader
	mu    sync.Mutex
	reads []pageRead
}

func (r *pageReader) ChannelPage(channel string, after uint64, limit int) (api.Page, error) {
	r.mu.Lock()
	r.reads = append(r.reads, pageRead{channel, after, limit})
	r.mu.Unlock()
	return r.Reader.ChannelPage(channel, after, limit)
}

// recordPages returns f as a Backend whose ChannelPage reads are recorded,
// and the function that lists them.
func recordPages(f *transporttest.Service) (transport.Backend, func() []pageRead) {
	r := &pageReader{Reader: f.State()}
	return pageRecorder{Service: f, reader: r}, func() []pageRead {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Clone(r.reads)
	}
}

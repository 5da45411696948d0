package transport

import (
	"container/list"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// Limits bound what one agent can make one node do. The zero value limits
// nothing beyond the request body ceilings (see Server.Routes) and
// api.MaxRecipients. Every limit is enforced by the node the client
// reached: a request another node forwarded (IsForwarded, and with auth
// carrying an admin token, as nodes do) was limited there and is not
// counted again.
//
// An agent is the authenticated identity's agent (IdentityFrom) or, when the
// node runs without --auth, whoever the request says it is ("from", or the
// stream's ?agent=). Without --auth a client can claim any name, so there
// the limits only slow down a well-behaved client gone wrong.
type Limits struct {
	// SendRate is how many message-producing writes (POST /v1/messages,
	// POST /v1/agents/{id}/interrupt, and a task's create, complete and
	// handoff) one agent may make per second: the refill rate of its token
	// bucket. 0 means unlimited.
	SendRate float64
	// SendBurst is the bucket's size: how many such writes an idle agent
	// may make at once. 0 means DefaultSendBurst(SendRate).
	SendBurst int
	// MaxRecipients caps the entries in a message's "to" (each entry counts
	// once, whether an agent, "role:NAME", "all" or a glob). 0 means
	// api.MaxRecipients (256), which is also the most it may be: the state
	// machine refuses longer lists whatever the node allows.
	MaxRecipients int
	// MaxStreamsPerAgent caps the GET /v1/stream requests one agent (or,
	// for a stream without ?agent= on a node without --auth, one remote IP)
	// has open on this node at once. 0 means unlimited.
	MaxStreamsPerAgent int
	// MaxArtifactBytes caps one artifact's bytes (PUT /v1/artifacts, and a
	// peer's push of them, PUT /v1/internal/blobs/{id}): a declared longer
	// body is refused before it is read, an undeclared one as it streams
	// (413 naming --max-artifact-bytes). 0 means DefaultMaxArtifactBytes
	// (64 MiB); at most MaxArtifactBytesCeiling.
	MaxArtifactBytes int64
}

// The artifact size limit's default and ceiling.
const (
	// DefaultMaxArtifactBytes is MaxArtifactBytes when none is set: 64 MiB.
	DefaultMaxArtifactBytes int64 = 64 << 20
	// MaxArtifactBytesCeiling is the most MaxArtifactBytes may be: 16 GiB.
	// Every voter's disk holds every artifact, and an upload waits for a
	// majority of them to store it.
	MaxArtifactBytesCeiling int64 = 16 << 30
)

// DefaultSendBurst is the burst a SendRate gets when none is given: twice
// the rate, at least 1.
func DefaultSendBurst(perSecond float64) int {
	return int(max(1, min(math.Ceil(2*perSecond), math.MaxInt32)))
}

// Validate reports the first limit that is negative or out of range, as a
// *api.FieldError naming the Limits field.
func (l Limits) Validate() error {
	switch {
	case math.IsNaN(l.SendRate) || math.IsInf(l.SendRate, 0) || l.SendRate < 0:
		return &api.FieldError{Field: "SendRate", Reason: fmt.Sprintf("%v: want a finite number of sends per second ≥ 0 (0: unlimited)", l.SendRate)}
	case l.SendBurst < 0:
		return &api.FieldError{Field: "SendBurst", Reason: fmt.Sprintf("%d: want ≥ 0 (0: twice the rate)", l.SendBurst)}
	case l.SendBurst > 0 && l.SendRate == 0:
		return &api.FieldError{Field: "SendBurst", Reason: fmt.Sprintf("%d: has no effect without a send rate", l.SendBurst)}
	case l.MaxRecipients < 0 || l.MaxRecipients > api.MaxRecipients:
		return &api.FieldError{Field: "MaxRecipients", Reason: fmt.Sprintf("%d: want 0..%d (0: %d)", l.MaxRecipients, api.MaxRecipients, api.MaxRecipients)}
	case l.MaxStreamsPerAgent < 0:
		return &api.FieldError{Field: "MaxStreamsPerAgent", Reason: fmt.Sprintf("%d: want ≥ 0 (0: unlimited)", l.MaxStreamsPerAgent)}
	case l.MaxArtifactBytes < 0 || l.MaxArtifactBytes > MaxArtifactBytesCeiling:
		return &api.FieldError{Field: "MaxArtifactBytes", Reason: fmt.Sprintf("%d: want 0..%d bytes (16 GiB; 0: %d, 64 MiB)",
			l.MaxArtifactBytes, MaxArtifactBytesCeiling, DefaultMaxArtifactBytes)}
	}
	return nil
}

// withDefaults fills the zero fields that have defaults.
func (l Limits) withDefaults() Limits {
	if l.SendRate > 0 && l.SendBurst == 0 {
		l.SendBurst = DefaultSendBurst(l.SendRate)
	}
	if l.MaxRecipients == 0 {
		l.MaxRecipients = api.MaxRecipients
	}
	if l.MaxArtifactBytes == 0 {
		l.MaxArtifactBytes = DefaultMaxArtifactBytes
	}
	return l
}

// retrySeconds is d in whole seconds for Retry-After: rounded up, at least 1.
func retrySeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// DefaultLimiterKeys bounds how many agents' buckets a node keeps.
const DefaultLimiterKeys = 10000

// SendLimiter is a token bucket per key (an agent id), for at most maxKeys
// keys at once. It is safe for concurrent use.
//
// A bucket idle for burst/rate has refilled completely and is the same as a
// new one, so it is dropped without changing any answer; that keeps the
// map to the agents active within one refill period. Past maxKeys such
// agents the least recently used bucket is dropped, and that agent starts
// again with a full burst.
type SendLimiter struct {
	limit   rate.Limit
	burst   int
	maxKeys int
	refill  time.Duration // an idle bucket is full after this long

	mu   sync.Mutex
	keys map[string]*list.Element // → *bucket in lru
	lru  *list.List               // front: most recently used
}

type bucket struct {
	key  string
	lim  *rate.Limiter
	last time.Time
}

// NewSendLimiter returns a limiter allowing perSecond events per key (> 0)
// in bursts of up to burst (≥ 1), keeping at most maxKeys buckets (≤ 0:
// DefaultLimiterKeys).
func NewSendLimiter(perSecond float64, burst, maxKeys int) *SendLimiter {
	if maxKeys <= 0 {
		maxKeys = DefaultLimiterKeys
	}
	burst = max(burst, 1)
	// A tiny rate must not overflow the duration into a negative one.
	refill := time.Duration(math.MaxInt64)
	if f := float64(burst) / perSecond * float64(time.Second); f < math.MaxInt64 {
		refill = time.Duration(f)
	}
	return &SendLimiter{
		limit:   rate.Limit(perSecond),
		burst:   burst,
		maxKeys: maxKeys,
		refill:  refill,
		keys:    map[string]*list.Element{},
		lru:     list.New(),
	}
}

// Allow takes one token from key's bucket at now. It returns 0 if the event
// may proceed, else how long until a token is due; a refused event takes
// nothing.
func (l *SendLimiter) Allow(key string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropIdle(now)
	var b *bucket
	if e, ok := l.keys[key]; ok {
		b = e.Value.(*bucket)
		l.lru.MoveToFront(e)
	} else {
		if l.lru.Len() >= l.maxKeys {
			l.remove(l.lru.Back())
		}
		b = &bucket{key: key, lim: rate.NewLimiter(l.limit, l.burst)}
		l.keys[key] = l.lru.PushFront(b)
	}
	b.last = now
	res := b.lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}

// Len is how many buckets the limiter holds.
func (l *SendLimiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

// dropIdle removes the buckets that have been idle long enough to be full.
func (l *SendLimiter) dropIdle(now time.Time) {
	for e := l.lru.Back(); e != nil; e = l.lru.Back() {
		if now.Sub(e.Value.(*bucket).last) < l.refill {
			return
		}
		l.remove(e)
	}
}

func (l *SendLimiter) remove(e *list.Element) {
	delete(l.keys, e.Value.(*bucket).key)
	l.lru.Remove(e)
}

// streamSlots counts open streams per key. A key's entry goes when its
// last stream closes, so the map is no bigger than the open streams.
type streamSlots struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

// acquire takes a slot for key; false when key has max open already.
func (s *streamSlots) acquire(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key] >= s.max {
		return false
	}
	s.open[key]++
	return true
}

func (s *streamSlots) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key] <= 1 {
		delete(s.open, key)
		return
	}
	s.open[key]--
}

// limiter is a Server's limit state.
type limiter struct {
	cfg     Limits
	sends   *SendLimiter // nil: unlimited
	streams *streamSlots // nil: unlimited
	now     func() time.Time
}

func newLimiter(cfg Limits) *limiter {
	if err := cfg.Validate(); err != nil {
		panic("transport: ServerOptions.Limits: " + err.Error())
	}
	cfg = cfg.withDefaults()
	l := &limiter{cfg: cfg, now: time.Now}
	if cfg.SendRate > 0 {
		l.sends = NewSendLimiter(cfg.SendRate, cfg.SendBurst, DefaultLimiterKeys)
	}
	if cfg.MaxStreamsPerAgent > 0 {
		l.streams = &streamSlots{max: cfg.MaxStreamsPerAgent, open: map[string]int{}}
	}
	return l
}

// writeRateLimited answers 429 with Retry-After: secs (see retrySeconds);
// msg names the limit and the retry delay. (writeError sets the header from
// RetryAfter.)
func (s *Server) writeRateLimited(w http.ResponseWriter, r *http.Request, secs int64, msg string) {
	s.writeError(w, r, &api.APIError{Status: http.StatusTooManyRequests, Code: api.CodeRateLimited,
		RetryAfter: time.Duration(secs) * time.Second, Message: msg})
}

// limitKind is the per-agent limit a route draws on (routes.go).
type limitKind int

const (
	limitNone   limitKind = iota
	limitSend             // a token of the agent's send bucket (Limits.SendRate)
	limitStream           // one of the agent's open-stream slots (Limits.MaxStreamsPerAgent), held while the stream runs
)

// allowSend charges one message-producing write to its agent (the
// identity's, else from) and reports whether it may proceed; if not, it
// has answered 429.
func (s *Server) allowSend(w http.ResponseWriter, r *http.Request, c caller, from string) bool {
	l := s.limits
	if l.sends == nil || c.limited {
		return true
	}
	// One bucket per principal: a token's agent (its forks act under it),
	// else from's (fsm.Principal), so A-fork-1 … A-fork-N share A's.
	key := fsm.Principal(from)
	if c.id != nil && c.id.Agent != "" {
		key = c.id.Agent
	}
	d := l.sends.Allow(key, l.now())
	if d == 0 {
		return true
	}
	secs := retrySeconds(d)
	s.writeRateLimited(w, r, secs, fmt.Sprintf("agent %s over its send rate of %s/s (burst %d); retry after %d s (--send-rate, --send-burst)",
		key, strconv.FormatFloat(l.cfg.SendRate, 'g', -1, 64), l.cfg.SendBurst, secs))
	return false
}

// checkRecipients refuses a "to" longer than the node allows, naming the
// field and the limit. Forwarded sends were checked where they arrived.
func (s *Server) checkRecipients(r *http.Request, m *api.Message) error {
	if n := len(m.To); n > s.limits.cfg.MaxRecipients && !callerFrom(r.Context()).limited {
		return &api.FieldError{Field: "to", Reason: fmt.Sprintf("%d recipients, at most %d (--max-recipients)", n, s.limits.cfg.MaxRecipients)}
	}
	return nil
}

// admitStream takes a slot of the stream route's limit for the request's
// agent (the identity's, else ?agent=, else the remote IP). It returns the
// release func, or false after answering 429.
func (s *Server) admitStream(w http.ResponseWriter, r *http.Request, agent string) (func(), bool) {
	l := s.limits
	if l.streams == nil || s.routeOf(r).limit != limitStream {
		return func() {}, true
	}
	who := "agent " + fsm.Principal(agent)
	if id := IdentityFrom(r.Context()); id != nil && id.Agent != "" {
		who = "agent " + id.Agent
	} else if agent == "" {
		who = "client " + clientOf(r)
	}
	if !l.streams.acquire(who) {
		s.writeRateLimited(w, r, 1, fmt.Sprintf("%s has %d streams open on this node, the most allowed; close one or retry after 1 s (--max-streams-per-agent)",
			who, l.cfg.MaxStreamsPerAgent))
		return nil, false
	}
	return func() { l.streams.release(who) }, true
}

// localClient is clientOf a request that came over a Unix socket (maosd's
// <data dir>/api.sock): its RemoteAddr has no host ("@" or "").
const localClient = "local"

// clientOf names the client of r for per-client limits and logs: the
// remote IP without its port, or localClient for a request with no IP
// (a Unix socket's), so those share one key of their own and never an
// IP's.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || host == "" {
		if ip := net.ParseIP(r.RemoteAddr); ip != nil {
			return ip.String()
		}
		return localClient
	}
	return host
}

package workload

import (
	"fmt"
	"math"

	"github.com/steplab/steplab/sim/rng"
)

// Think-time distributions (ClosedLoopConfig.Think).
const (
	ThinkFixed       = "fixed"
	ThinkExponential = "exponential"
)

// ClosedLoopConfig configures a closed loop: Users users, each sending a
// request, waiting for its completion, thinking, and sending the next.
type ClosedLoopConfig struct {
	// Users is the number of concurrent users (>= 1): at most Users requests
	// are outstanding at once.
	Users int
	// Think is fixed | exponential (default fixed); ThinkNs its mean (>= 0).
	Think   string
	ThinkNs int64
	// Requests is the number of measured requests; WarmupRequests more are
	// sent first, marked Warmup. Zero means "until DurationNs".
	Requests       int
	WarmupRequests int
	// DurationNs: no request is sent at or after StartNs + DurationNs.
	DurationNs int64
	// StartNs is when the first user sends. RampNs staggers the users: user
	// u sends its first request at StartNs + u·RampNs/Users.
	StartNs, RampNs int64
	// Lengths draws each request's prompt and output lengths.
	Lengths Lengths
	// Seed, Rand and IDPrefix as in OpenLoopConfig; think times come from
	// the stream "workload/think".
	Seed     uint64
	Rand     *rng.Stream
	IDPrefix string
}

// Validate reports the first invalid setting, naming the field.
func (c ClosedLoopConfig) Validate() error {
	if c.Users < 1 {
		return fmt.Errorf("workload: closed loop: Users=%d: need at least 1 user", c.Users)
	}
	switch c.Think {
	case "", ThinkFixed, ThinkExponential:
	default:
		return fmt.Errorf("workload: closed loop: unknown Think %q: choose fixed or exponential", c.Think)
	}
	if c.ThinkNs < 0 {
		return fmt.Errorf("workload: closed loop: ThinkNs=%d: think time must be >= 0", c.ThinkNs)
	}
	if c.Requests < 0 {
		return fmt.Errorf("workload: closed loop: Requests=%d: must be >= 0 (0 = limit by DurationNs)", c.Requests)
	}
	if c.DurationNs < 0 {
		return fmt.Errorf("workload: closed loop: DurationNs=%d: must be >= 0 (0 = limit by Requests)", c.DurationNs)
	}
	if c.Requests == 0 && c.DurationNs == 0 {
		return fmt.Errorf("workload: closed loop: neither Requests nor DurationNs is set: set one so the loop ends")
	}
	if c.WarmupRequests < 0 {
		return fmt.Errorf("workload: closed loop: WarmupRequests=%d: must be >= 0", c.WarmupRequests)
	}
	if c.StartNs < 0 || c.RampNs < 0 {
		return fmt.Errorf("workload: closed loop: StartNs=%d RampNs=%d: must be >= 0", c.StartNs, c.RampNs)
	}
	return c.Lengths.validate("workload: closed loop: Lengths")
}

type userAt struct {
	at   int64
	user int32
}

// ClosedLoop is a closed-loop arrival stream. It needs the engine's
// completions: see Peeker for the protocol, and call Complete for every
// request it produced. When every user is waiting, NextAt returns Waiting
// and Next returns false while Err stays nil.
type ClosedLoop struct {
	cfg     ClosedLoopConfig
	think   *rng.Stream
	lengths lengthSampler
	ids     idArena

	total int64 // 0 = unbounded
	endNs int64 // 0 = unbounded

	ready       []userAt         // min-heap on (at, user): users about to send
	outstanding map[string]int32 // request id -> user (lookups only)
	issued      int64
	lastAt      int64
}

// NewClosedLoop validates cfg and returns its stream.
func NewClosedLoop(cfg ClosedLoopConfig) (*ClosedLoop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	root := rootStream(cfg.Rand, cfg.Seed)
	cfg.IDPrefix = idPrefix(cfg.IDPrefix)
	c := &ClosedLoop{
		cfg:         cfg,
		think:       root.Derive("think"),
		lengths:     newLengthSampler(cfg.Lengths, root),
		ids:         idArena{prefix: cfg.IDPrefix},
		ready:       make([]userAt, 0, cfg.Users),
		outstanding: make(map[string]int32, cfg.Users),
		lastAt:      cfg.StartNs,
	}
	c.total, c.endNs = bounds(cfg.Requests, cfg.WarmupRequests, cfg.StartNs, cfg.DurationNs)
	for u := 0; u < cfg.Users; u++ {
		off := int64(0)
		if cfg.RampNs > 0 {
			off = int64(float64(cfg.RampNs) * float64(u) / float64(cfg.Users))
		}
		c.push(userAt{at: cfg.StartNs + off, user: int32(u)})
	}
	return c, nil
}

func (c *ClosedLoop) less(i, j int) bool {
	a, b := c.ready[i], c.ready[j]
	return a.at < b.at || (a.at == b.at && a.user < b.user)
}

func (c *ClosedLoop) push(x userAt) {
	c.ready = append(c.ready, x)
	i := len(c.ready) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !c.less(i, p) {
			break
		}
		c.ready[i], c.ready[p] = c.ready[p], c.ready[i]
		i = p
	}
}

func (c *ClosedLoop) pop() userAt {
	top := c.ready[0]
	last := len(c.ready) - 1
	c.ready[0] = c.ready[last]
	c.ready = c.ready[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && c.less(l, m) {
			m = l
		}
		if r < last && c.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		c.ready[i], c.ready[m] = c.ready[m], c.ready[i]
		i = m
	}
	return top
}

func (c *ClosedLoop) done() bool { return c.total > 0 && c.issued >= c.total }

// prune drops ready users whose next send falls past the duration.
func (c *ClosedLoop) prune() {
	for c.endNs > 0 && len(c.ready) > 0 && c.ready[0].at >= c.endNs {
		c.pop()
	}
}

// NextAt implements Peeker: Ready with the earliest known send time, Waiting
// when every remaining user waits for a completion, Exhausted when the loop
// has sent all its requests (or every user is past the duration).
func (c *ClosedLoop) NextAt() (int64, Status) {
	if c.done() {
		return 0, Exhausted
	}
	c.prune()
	if len(c.ready) > 0 {
		return c.ready[0].at, Ready
	}
	if len(c.outstanding) > 0 {
		return 0, Waiting
	}
	return 0, Exhausted
}

// Next implements Source: the earliest ready user's request, or false when
// every user is waiting (NextAt says Waiting) or the loop is over.
func (c *ClosedLoop) Next() (Arrival, bool) {
	if _, st := c.NextAt(); st != Ready {
		return Arrival{}, false
	}
	u := c.pop()
	p, o := c.lengths.draw()
	a := Arrival{
		ID:           c.ids.id(c.issued),
		AtNs:         u.at,
		PromptTokens: p,
		OutputTokens: o,
		Warmup:       c.issued < int64(c.cfg.WarmupRequests),
	}
	c.issued++
	c.outstanding[a.ID] = u.user
	c.lastAt = u.at
	return a, true
}

// Complete implements Completer: request id finished at atNs, so its user
// thinks and becomes ready at atNs + think. atNs must not precede the last
// arrival returned (the engine's clock only moves forward).
func (c *ClosedLoop) Complete(id string, atNs int64) error {
	u, ok := c.outstanding[id]
	if !ok {
		return fmt.Errorf("workload: closed loop: Complete(%q): not an outstanding request of this loop (unknown, or completed twice)", id)
	}
	if atNs < c.lastAt {
		return fmt.Errorf("workload: closed loop: Complete(%q, %d): completion precedes the last arrival at %d ns: call Complete at the engine's current time", id, atNs, c.lastAt)
	}
	delete(c.outstanding, id)
	if c.done() {
		return nil
	}
	next := atNs + c.thinkNs()
	if c.endNs > 0 && next >= c.endNs {
		return nil
	}
	c.push(userAt{at: next, user: u})
	return nil
}

func (c *ClosedLoop) thinkNs() int64 {
	if c.cfg.ThinkNs == 0 {
		return 0
	}
	if c.cfg.Think == ThinkExponential {
		x := float64(c.cfg.ThinkNs) * c.think.ExpFloat64()
		if x > math.MaxInt64/4 {
			return math.MaxInt64 / 4
		}
		return int64(math.Round(x))
	}
	return c.cfg.ThinkNs
}

// Outstanding is the number of requests sent and not completed.
func (c *ClosedLoop) Outstanding() int { return len(c.outstanding) }

// Err implements Source; a closed loop never fails after construction
// (protocol errors are returned by Complete).
func (c *ClosedLoop) Err() error { return nil }

package workload

import (
	"fmt"
	"math"

	"github.com/steplab/steplab/sim/rng"
)

// Arrival processes of an open-loop generator (OpenLoopConfig.Process).
const (
	ProcessConstant = "constant" // evenly spaced, 1/RateRPS apart
	ProcessPoisson  = "poisson"  // exponential gaps (CV 1)
	ProcessGamma    = "gamma"    // gamma gaps with coefficient of variation CV
)

// DefaultIDPrefix prefixes generated request IDs: "req-0", "req-1", ...
const DefaultIDPrefix = "req-"

// OpenLoopConfig configures an open-loop generator: arrivals at a given
// rate, independent of how fast the engine serves them.
type OpenLoopConfig struct {
	// Process is constant | poisson | gamma.
	Process string
	// RateRPS is the mean arrival rate, requests per second (> 0), unless
	// RateCurve is set.
	RateRPS float64
	// RateCurve, when set (RateRPS 0), varies the rate with time: linear
	// between its points, the last point's rate after it. The process runs
	// at one request per unit of the curve's integral (time rescaling), so
	// poisson gives a non-homogeneous Poisson stream and constant arrivals
	// spaced 1/rate(t) apart.
	RateCurve []RatePoint
	// CV is the coefficient of variation of the gaps for gamma (> 0; 1
	// gives exactly the Poisson stream of the same seed, < 1 is smoother,
	// > 1 burstier). Ignored by constant and poisson.
	CV float64
	// Requests is the number of measured requests; the generator sends
	// WarmupRequests more before them (first), so Requests + WarmupRequests
	// in all. Zero means "until DurationNs".
	Requests int
	// DurationNs stops the stream at StartNs + DurationNs (arrivals strictly
	// before it). Zero means no time limit; Requests or DurationNs must be set.
	DurationNs int64
	// WarmupRequests are marked Arrival.Warmup.
	WarmupRequests int
	// StartNs is the first arrival's time.
	StartNs int64
	// Lengths draws each request's prompt and output lengths.
	Lengths Lengths
	// Seed is the root seed. The generator draws from the streams
	// "workload/arrivals", "workload/prompt" and "workload/output" of it
	// (package rng), so a change of length distribution leaves arrival
	// times untouched.
	Seed uint64
	// Rand, when set, replaces rng.New(Seed, "workload") as the root stream
	// (for repetitions: parent.DeriveN(rep)).
	Rand *rng.Stream
	// IDPrefix prefixes request IDs (default "req-").
	IDPrefix string
}

// Validate reports the first invalid setting, naming the field and what to
// change.
func (c OpenLoopConfig) Validate() error {
	switch c.Process {
	case ProcessConstant, ProcessPoisson:
	case ProcessGamma:
		if !(c.CV > 0) || math.IsInf(c.CV, 0) {
			return fmt.Errorf("workload: open loop: CV=%v: the gamma process needs a finite coefficient of variation > 0 (1 = Poisson)", c.CV)
		}
	case "":
		return fmt.Errorf("workload: open loop: Process is empty: choose constant, poisson or gamma")
	default:
		return fmt.Errorf("workload: open loop: unknown Process %q: choose constant, poisson or gamma", c.Process)
	}
	switch {
	case len(c.RateCurve) > 0 && c.RateRPS != 0:
		return fmt.Errorf("workload: open loop: RateRPS=%v with a RateCurve: set one of them", c.RateRPS)
	case len(c.RateCurve) > 0:
		if err := CheckRateCurve(c.RateCurve, "workload: open loop: RateCurve"); err != nil {
			return err
		}
	case !(c.RateRPS > 0) || math.IsInf(c.RateRPS, 0):
		return fmt.Errorf("workload: open loop: RateRPS=%v: must be a finite rate > 0 requests per second", c.RateRPS)
	}
	if c.Requests < 0 {
		return fmt.Errorf("workload: open loop: Requests=%d: must be >= 0 (0 = limit by DurationNs)", c.Requests)
	}
	if c.DurationNs < 0 {
		return fmt.Errorf("workload: open loop: DurationNs=%d: must be >= 0 (0 = limit by Requests)", c.DurationNs)
	}
	if c.Requests == 0 && c.DurationNs == 0 {
		return fmt.Errorf("workload: open loop: neither Requests nor DurationNs is set: set one so the stream ends")
	}
	if c.WarmupRequests < 0 {
		return fmt.Errorf("workload: open loop: WarmupRequests=%d: must be >= 0", c.WarmupRequests)
	}
	if c.StartNs < 0 {
		return fmt.Errorf("workload: open loop: StartNs=%d: must be >= 0", c.StartNs)
	}
	return c.Lengths.validate("workload: open loop: Lengths")
}

// OpenLoop is an open-loop arrival stream. It implements Peeker and
// Completer (Complete is a no-op).
type OpenLoop struct {
	cfg     OpenLoopConfig
	arr     *rng.Stream
	lengths lengthSampler
	ids     idArena

	meanGapNs float64 // 1e9 / rate (a curve: 1e9, one request per unit of its integral)
	curve     *rateCurve
	shape     float64 // gamma shape k = 1/CV²
	total     int64   // 0 = unbounded count
	endNs     int64   // 0 = unbounded time

	n      int64   // arrivals generated so far (including the peeked one)
	tNs    float64 // time of the peeked arrival, ns since StartNs
	next   Arrival
	have   bool
	closed bool
}

// NewOpenLoop validates cfg and returns its stream.
func NewOpenLoop(cfg OpenLoopConfig) (*OpenLoop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	root := rootStream(cfg.Rand, cfg.Seed)
	cfg.IDPrefix = idPrefix(cfg.IDPrefix)
	g := &OpenLoop{
		cfg:       cfg,
		arr:       root.Derive("arrivals"),
		lengths:   newLengthSampler(cfg.Lengths, root),
		ids:       idArena{prefix: cfg.IDPrefix},
		meanGapNs: 1e9 / cfg.RateRPS,
	}
	if len(cfg.RateCurve) > 0 {
		g.curve, g.meanGapNs = newRateCurve(cfg.RateCurve), 1e9
	}
	if cfg.Process == ProcessGamma {
		g.shape = 1 / (cfg.CV * cfg.CV)
	}
	g.total, g.endNs = bounds(cfg.Requests, cfg.WarmupRequests, cfg.StartNs, cfg.DurationNs)
	return g, nil
}

// gap draws the next inter-arrival gap in ns.
func (g *OpenLoop) gap() float64 {
	switch g.cfg.Process {
	case ProcessPoisson:
		return g.meanGapNs * g.arr.ExpFloat64()
	case ProcessGamma:
		// Gamma(k, θ) with mean kθ = meanGap: θ = meanGap/k. For k = 1 this
		// is exactly ExpFloat64, so CV 1 reproduces the Poisson stream.
		return g.meanGapNs / g.shape * g.arr.Gamma(g.shape)
	}
	return g.meanGapNs
}

func (g *OpenLoop) fill() {
	if g.have || g.closed {
		return
	}
	if g.total > 0 && g.n >= g.total {
		g.closed = true
		return
	}
	if g.n > 0 {
		if g.cfg.Process == ProcessConstant {
			g.tNs = float64(g.n) * g.meanGapNs // no accumulated rounding
		} else {
			g.tNs += g.gap()
		}
	}
	if g.tNs > math.MaxInt64/4 { // past any representable run
		g.closed = true
		return
	}
	t := g.tNs
	if g.curve != nil {
		s, ok := g.curve.at(t / 1e9)
		if !ok || s > math.MaxInt64/4e9 {
			g.closed = true
			return
		}
		t = s * 1e9
	}
	at := g.cfg.StartNs + int64(math.Round(t))
	if g.endNs > 0 && at >= g.endNs {
		g.closed = true
		return
	}
	p, o := g.lengths.draw()
	g.next = Arrival{
		ID:           g.ids.id(g.n),
		AtNs:         at,
		PromptTokens: p,
		OutputTokens: o,
		Warmup:       g.n < int64(g.cfg.WarmupRequests),
	}
	g.n++
	g.have = true
}

// NextAt implements Peeker.
func (g *OpenLoop) NextAt() (int64, Status) {
	g.fill()
	if g.have {
		return g.next.AtNs, Ready
	}
	return 0, Exhausted
}

// Next implements Source.
func (g *OpenLoop) Next() (Arrival, bool) {
	g.fill()
	if !g.have {
		return Arrival{}, false
	}
	g.have = false
	return g.next, true
}

// Err implements Source; a generator never fails after construction.
func (g *OpenLoop) Err() error { return nil }

// Complete implements Completer; an open loop ignores completions.
func (g *OpenLoop) Complete(string, int64) error { return nil }

// rootStream is the generator's root stream: the caller's (a repetition's
// derived stream) or the one of the seed.
func rootStream(r *rng.Stream, seed uint64) *rng.Stream {
	if r != nil {
		return r
	}
	return rng.New(seed, "workload")
}

func idPrefix(p string) string {
	if p == "" {
		return DefaultIDPrefix
	}
	return p
}

// bounds turns a request count (measured plus warm-ups) and a duration
// into the generator's limits; 0 means unbounded.
func bounds(requests, warmup int, startNs, durationNs int64) (total, endNs int64) {
	if requests > 0 {
		total = int64(requests) + int64(warmup)
	}
	if durationNs > 0 {
		endNs = startNs + durationNs
	}
	return total, endNs
}

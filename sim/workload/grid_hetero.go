package workload

import (
	"fmt"
	"math"
	"slices"
)

// Spread shapes of ragged decode points (Spread.Shape).
const (
	// SpreadRamp spaces the B contexts evenly from (2 − r)·mean to r·mean
	// (a uniform spread; r ≤ 2).
	SpreadRamp = "ramp"
	// SpreadTail puts ⌈B/8⌉ requests at r·mean and the rest at the equal
	// shorter context that keeps the mean: a few long requests among many
	// short ones (B ≥ 2, r > 1).
	SpreadTail = "tail"
)

// Spread is how the contexts of a ragged decode point spread around their
// mean: a shape and the ratio of the longest context to the mean.
type Spread struct {
	Shape    string
	MaxRatio float64
}

func (s Spread) String() string { return fmt.Sprintf("%s×%g", s.Shape, s.MaxRatio) }

// RaggedPoints are heterogeneous-context decode points: for each batch
// size B, mean context C and spread, B requests decoding over contexts
// spread around C (Spread), measured under the grid's decode policy like
// the uniform points. Production batches mix long and short requests; a
// kernel that gives each request its own program waits for the longest,
// which a uniform grid never shows. No points unless BatchSizes is set;
// then Contexts and Spreads must be too.
type RaggedPoints struct {
	BatchSizes []int // B ≥ 2
	Contexts   []int // mean context per request
	Spreads    []Spread
}

// MixedPoints are prefill chunks riding with decodes: for each chunk of
// PrefillTokens tokens after PrefillContexts tokens already in the
// request's KV cache (0: a fresh prompt), DecodeBatchSizes decodes at
// DecodeContexts. Under the steady policy the decodes are on their second
// step (cached requests, as in production) and the chunk's request is new
// in the measured step, arriving once the decodes' admission step is
// scheduled; under admission_step everything is admitted and measured in
// one step. A batch size of 0 measures the chunk alone (a prefill point at
// that context). No points unless PrefillTokens is set; then
// DecodeBatchSizes and DecodeContexts must be too (PrefillContexts
// defaults to [0]).
type MixedPoints struct {
	PrefillTokens    []int
	PrefillContexts  []int
	DecodeBatchSizes []int
	DecodeContexts   []int
}

func (r RaggedPoints) set() bool { return len(r.BatchSizes)+len(r.Contexts)+len(r.Spreads) > 0 }
func (m MixedPoints) set() bool {
	return len(m.PrefillTokens)+len(m.PrefillContexts)+len(m.DecodeBatchSizes)+len(m.DecodeContexts) > 0
}

// checkHetero validates the ragged and mixed axes.
func (g *gridLimits) checkHetero() error {
	c := g.cfg
	r, m := c.Ragged, c.Mixed
	if (r.set() || m.set()) && c.Mode != "" && c.Mode != ModeAgg {
		return fmt.Errorf("workload: grid: ragged and mixed points run in Mode=agg only (Mode=%s): clear them or use agg", c.Mode)
	}
	if r.set() {
		if err := needAxes("ragged points need batch sizes, mean contexts and spreads (e.g. {shape: ramp, max_ratio: 1.5})",
			axis{"Ragged.BatchSizes", len(r.BatchSizes)}, axis{"Ragged.Contexts", len(r.Contexts)}, axis{"Ragged.Spreads", len(r.Spreads)}); err != nil {
			return err
		}
		for i, b := range r.BatchSizes {
			if b < 2 || b > c.MaxNumSeqs || b > c.MaxNumBatchedTokens {
				return fmt.Errorf("workload: grid: Ragged.BatchSizes[%d]=%d: want 2 <= B <= min(MaxNumSeqs=%d, MaxNumBatchedTokens=%d) (one request has no spread)",
					i, b, c.MaxNumSeqs, c.MaxNumBatchedTokens)
			}
		}
		for i, ctx := range r.Contexts {
			if ctx < 1 {
				return fmt.Errorf("workload: grid: Ragged.Contexts[%d]=%d: must be >= 1", i, ctx)
			}
		}
		for i, s := range r.Spreads {
			switch {
			case s.Shape == SpreadRamp && (s.MaxRatio < 1 || s.MaxRatio > 2):
				return fmt.Errorf("workload: grid: Ragged.Spreads[%d] %s: a ramp's max_ratio must be in [1, 2] (its shortest context is (2 − r)·mean); use a tail for longer ones", i, s)
			case s.Shape == SpreadTail && !(s.MaxRatio > 1):
				return fmt.Errorf("workload: grid: Ragged.Spreads[%d] %s: a tail's max_ratio must be > 1", i, s)
			case s.Shape != SpreadRamp && s.Shape != SpreadTail:
				return fmt.Errorf("workload: grid: Ragged.Spreads[%d]: unknown shape %q: use %s or %s", i, s.Shape, SpreadRamp, SpreadTail)
			}
		}
	}
	if m.set() {
		if err := needAxes("mixed points need prefill tokens, decode batch sizes and decode contexts",
			axis{"Mixed.PrefillTokens", len(m.PrefillTokens)}, axis{"Mixed.DecodeBatchSizes", len(m.DecodeBatchSizes)},
			axis{"Mixed.DecodeContexts", len(m.DecodeContexts)}); err != nil {
			return err
		}
		for _, f := range []struct {
			name string
			v    []int
			min  int
		}{{"Mixed.PrefillTokens", m.PrefillTokens, 1}, {"Mixed.PrefillContexts", m.PrefillContexts, 0},
			{"Mixed.DecodeBatchSizes", m.DecodeBatchSizes, 0}, {"Mixed.DecodeContexts", m.DecodeContexts, 1}} {
			for i, v := range f.v {
				if v < f.min {
					return fmt.Errorf("workload: grid: %s[%d]=%d: must be >= %d", f.name, i, v, f.min)
				}
			}
		}
		for i, p := range m.PrefillTokens {
			if p > c.MaxNumBatchedTokens {
				return fmt.Errorf("workload: grid: Mixed.PrefillTokens[%d]=%d exceeds MaxNumBatchedTokens=%d: lower it or raise the budget", i, p, c.MaxNumBatchedTokens)
			}
		}
		for i, b := range m.DecodeBatchSizes {
			if b+1 > c.MaxNumSeqs {
				return fmt.Errorf("workload: grid: Mixed.DecodeBatchSizes[%d]=%d: with the chunk's request exceeds MaxNumSeqs=%d", i, b, c.MaxNumSeqs)
			}
		}
	}
	return nil
}

// axis is a named grid axis and its number of values.
type axis struct {
	name string
	n    int
}

// needAxes refuses the first empty axis.
func needAxes(why string, axes ...axis) error {
	for _, a := range axes {
		if a.n == 0 {
			return fmt.Errorf("workload: grid: %s is empty: %s", a.name, why)
		}
	}
	return nil
}

// heteroPoints builds the ragged then the mixed points, leaving out the
// combinations the engine cannot hold; axes that yield no point at all
// are an error.
func (g *gridLimits) heteroPoints() ([]Point, error) {
	c := g.cfg
	var out []Point
	if c.Ragged.set() {
		n := len(out)
		for _, b := range sortedSet(c.Ragged.BatchSizes) {
			for _, mean := range sortedSet(c.Ragged.Contexts) {
				for _, s := range c.Ragged.Spreads {
					ctxs, ok := spreadContexts(b, mean, s)
					if !ok || !g.decodeFits(ctxs) {
						continue
					}
					p := g.decodePoint(ctxs, true)
					p.SampleReasons = append(p.SampleReasons, ReasonRagged)
					out = append(out, p)
				}
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("workload: grid: no ragged point fits: every (Ragged.BatchSizes × Contexts × Spreads) combination exceeds MaxModelLen=%d or NumGPUBlocks=%d of BlockSize=%d, or leaves a context below 1: lower the contexts or ratios",
				c.MaxModelLen, c.NumGPUBlocks, c.BlockSize)
		}
	}
	if c.Mixed.set() {
		n := len(out)
		ctxs := c.Mixed.PrefillContexts
		if len(ctxs) == 0 {
			ctxs = []int{0}
		}
		for _, tok := range sortedSet(c.Mixed.PrefillTokens) {
			for _, pc := range sortedSet(ctxs) {
				for _, b := range sortedSet(c.Mixed.DecodeBatchSizes) {
					for _, dc := range sortedSet(c.Mixed.DecodeContexts) {
						if p, ok := g.mixedPoint(tok, pc, b, dc); ok {
							out = append(out, p)
						}
						if b == 0 {
							break // the chunk alone: no decode context
						}
					}
				}
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("workload: grid: no mixed point fits: every combination exceeds MaxNumBatchedTokens=%d, MaxModelLen=%d or NumGPUBlocks=%d of BlockSize=%d: lower the tokens, contexts or batch sizes",
				c.MaxNumBatchedTokens, c.MaxModelLen, c.NumGPUBlocks, c.BlockSize)
		}
	}
	return out, nil
}

// spreadContexts returns b contexts with mean ≈ mean spread as s says, or
// false when a context would fall below 1.
func spreadContexts(b, mean int, s Spread) ([]int, bool) {
	out := make([]int, b)
	hi := int(math.Round(s.MaxRatio * float64(mean)))
	switch s.Shape {
	case SpreadRamp:
		lo := 2*mean - hi
		for i := range out {
			out[i] = lo + int(math.Round(float64(hi-lo)*float64(i)/float64(b-1)))
		}
	case SpreadTail:
		long := (b + 7) / 8
		rest := b*mean - long*hi
		if long == b || rest < b-long {
			return nil, false
		}
		short := balancedPartition(rest, b-long)
		copy(out, short)
		for i := b - long; i < b; i++ {
			out[i] = hi
		}
	}
	if slices.Min(out) < 1 {
		return nil, false
	}
	return out, true
}

// decodeFits checks that requests decoding over ctxs fit the engine.
func (g *gridLimits) decodeFits(ctxs []int) bool {
	c := g.cfg
	if len(ctxs) > c.MaxNumSeqs || len(ctxs) > c.MaxNumBatchedTokens {
		return false
	}
	var blocks int64
	for _, ctx := range ctxs {
		if g.decodeLen(ctx)+2 > c.MaxModelLen {
			return false
		}
		blocks += int64(g.decodeBlocks(ctx))
	}
	return blocks <= int64(c.NumGPUBlocks)
}

// mixedPoint builds the point of a chunk of tok tokens after pc cached
// ones riding with b decodes at dc, or false when it does not fit.
func (g *gridLimits) mixedPoint(tok, pc, b, dc int) (Point, bool) {
	c := g.cfg
	ctxs := make([]int, b)
	for i := range ctxs {
		ctxs[i] = dc
	}
	chunkBlocks := ceilDiv(pc+tok, c.BlockSize)
	if b+1 > c.MaxNumSeqs || b+tok > c.MaxNumBatchedTokens || pc+tok+1 > c.MaxModelLen || chunkBlocks > c.NumGPUBlocks {
		return Point{}, false
	}
	var p Point
	if b > 0 {
		if !g.decodeFits(ctxs) {
			return Point{}, false
		}
		var blocks int64
		for _, ctx := range ctxs {
			blocks += int64(g.decodeBlocks(ctx))
		}
		if blocks+int64(chunkBlocks) > int64(c.NumGPUBlocks) {
			return Point{}, false
		}
		p = g.decodePoint(ctxs, true)
		p.Type = PointMixed
		if g.steady {
			p.Plan.Deferred = 1
		}
	} else {
		p = Point{Type: PointPrefill, Plan: Injection{Policy: PolicySingleStep}}
	}
	p.BatchSize = b + 1
	p.PrefillTokensPerReq = []int{tok}
	p.PrefillContextPerReq = []int{pc}
	p.TotalPrefillTokens = tok
	p.Plan.PrecomputedTokens = append(p.Plan.PrecomputedTokens, pc)
	p.Plan.AdmitTokens = append(p.Plan.AdmitTokens, tok)
	// Steps with prefill work pad, if at all, to a token-count capture.
	p.ExpectedCaptureSize, p.PaddingTokens, _ = cudagraphMetadata(b+tok, g.prefillCaptures, c.MaxNumBatchedTokens)
	p.SampleReasons = []string{ReasonExplicit}
	if b > 0 {
		p.SampleReasons = append(p.SampleReasons, ReasonMixed)
	}
	if p.Clamped {
		p.SampleReasons = append(p.SampleReasons, ReasonContextClamped)
	}
	if pc > 0 {
		p.SampleReasons = append(p.SampleReasons, ReasonPrefillContext)
	}
	return p, true
}

package workload

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/steplab/steplab/datasets"
)

// Measurement policies of decode benchmark points (GridConfig.Policy), and
// the single-step policy of prefill points. The names are those of the
// manifest's measurement_policy block.
const (
	// PolicyAdmissionStep measures the step that admits the batch: B new
	// requests whose fake-prefix KV is ctx tokens, one token scheduled each.
	// It ships full token arrays through scheduled_new_reqs and pays
	// first-step bookkeeping that production decode never pays
	// (docs/architecture.md#why-it-exists).
	PolicyAdmissionStep = datasets.PolicyAdmissionStep
	// PolicySteadyStateSecondStep admits the batch one token short
	// (max(1, ctx−1) precomputed tokens; the admission step is scaffolding)
	// and measures the next step, through cached requests.
	PolicySteadyStateSecondStep = datasets.PolicySteadyStateSecondStep
	// PolicySingleStep: a prefill point is its admission step.
	PolicySingleStep = datasets.PolicySingleStep
)

// Grid modes (GridConfig.Mode), as Dynamo's --benchmark-mode.
const (
	ModeAgg     = "agg"
	ModePrefill = "prefill"
	ModeDecode  = "decode"
)

// Point types.
const (
	PointPrefill = "prefill"
	PointDecode  = "decode"
	// PointMixed: a prefill chunk riding with decodes (see MixedPoints).
	PointMixed = "mixed"
)

// Sample reasons (Point.SampleReasons), Dynamo's vocabulary.
const (
	ReasonCapture           = "capture"            // the shape is a CUDA-graph capture size
	ReasonPostCapture       = "post_capture"       // one past a capture size (pads to the next graph)
	ReasonCUDAGraphDisabled = "cudagraph_disabled" // no capture sizes: everything runs eagerly
	ReasonGeometricAxis     = "geometric_axis"     // power-of-two axis without graphs
	ReasonEagerTail         = "eager_tail"         // above the largest capture size
	ReasonGeometricTail     = "geometric_tail"     // ×2 steps of the eager tail
	ReasonEngineLimit       = "engine_limit"       // the engine's (KV-feasible) maximum
	ReasonExplicit          = "explicit"           // a value the config listed
	ReasonContextClamped    = "context_clamped"    // ctx=1 entries measured at 2 (steady policy)
	ReasonWarmup            = "warmup"             // a global warm-up iteration, not measured
	ReasonRagged            = "ragged_context"     // decode contexts spread around a mean (RaggedPoints)
	ReasonMixed             = "mixed_step"         // a prefill chunk with decodes (MixedPoints)
	ReasonPrefillContext    = "prefill_context"    // a prefill chunk reading a cached context
)

// Dynamo's default sample limits (BenchmarkConfig).
const (
	DefaultDecodeMaxBatchSizeSamples  = 128
	DefaultDecodeMaxKVSamples         = 128
	DefaultPrefillMaxTokenSamples     = 64
	DefaultPrefillMaxBatchSizeSamples = 3
	// warmupPrefillTokens is the size of the global warm-up prefill.
	warmupPrefillTokens = 256
)

// GridConfig describes a self-benchmark grid (Dynamo's forward-pass-metrics
// self-benchmark in its instrumented vLLM scheduler). An empty axis is derived from the engine limits
// as Dynamo does; a listed axis is used as given (sorted, deduplicated) and
// its points carry the "explicit" reason.
type GridConfig struct {
	// Mode is agg (prefill then decode; default), prefill or decode.
	Mode string
	// DecodeBatchSizes lists decode batch sizes B. Empty: the capture-aware
	// axis over the decode capture sizes (those <= MaxNumSeqs): every
	// capture size C and C+1, a ×2 geometric tail above the largest one, and
	// the KV-feasible maximum; powers of two without captures.
	DecodeBatchSizes []int
	// DecodeContexts lists per-request KV contexts: a point (B, ctx) has B
	// requests reading ctx tokens each. Empty: per B, the total-KV axis
	// {B, 2^k >= B, max feasible}, split as evenly as possible across the B
	// requests (each >= 1).
	DecodeContexts []int
	// PrefillTokens lists total prefill tokens per step. Empty: the
	// capture-aware axis over CaptureSizes up to MaxNumBatchedTokens.
	PrefillTokens []int
	// PrefillBatchSizes lists prefill batch sizes. Empty: per token count,
	// the legal powers of two plus the legal maximum, smallest first, the
	// first PrefillMaxBatchSizeSamples of them.
	PrefillBatchSizes []int
	// Policy is the decode measurement policy: steady_state_second_step
	// (default) or admission_step.
	Policy string
	// Warmups is the number of global warm-up decode iterations (Dynamo's
	// default is 5), run after one warm-up prefill of 256 tokens. They are
	// returned first, with Warmup set and BenchmarkID −1.
	Warmups int

	// Engine limits (docs/architecture.md#scheduler-semantics).
	MaxModelLen, MaxNumSeqs, MaxNumBatchedTokens, BlockSize, NumGPUBlocks int
	// CaptureSizes are the CUDA-graph capture sizes (tokens per step).
	// Empty: CUDA graphs disabled, every shape is eager.
	CaptureSizes []int

	// Sample limits (0 = Dynamo's defaults: 128, 128, 64, 3).
	DecodeMaxBatchSizeSamples, DecodeMaxKVSamples      int
	PrefillMaxTokenSamples, PrefillMaxBatchSizeSamples int

	// Ragged are the heterogeneous-context decode points (none by
	// default); Mixed the prefill-with-decodes points (none by default).
	// Both run after the decode points, in agg mode only.
	Ragged RaggedPoints
	Mixed  MixedPoints
}

// Injection is how the engine runs a point: which requests to admit, with
// how much resident (fake-prefix) KV, and which step to measure.
type Injection struct {
	// Policy: single_step (prefill), admission_step or
	// steady_state_second_step (decode).
	Policy string
	// PrecomputedTokens is each request's resident KV when admitted.
	PrecomputedTokens []int
	// AdmitTokens is the number of tokens each request computes in the
	// admission step (1 for decode; its prompt share for prefill).
	AdmitTokens []int
	// MeasuredStep is 0 when the admission step is measured, 1 when the
	// step after it is (the admission step is then scaffolding).
	MeasuredStep int
	// Deferred is the number of trailing requests that arrive only once the
	// point's first step is scheduled, so that they join the measured step
	// (a steady mixed point's prefill chunk).
	Deferred int
}

// Steps is the number of engine steps a point dispatches.
func (in Injection) Steps() int { return in.MeasuredStep + 1 }

// Point is one benchmark point.
type Point struct {
	// BenchmarkID numbers measured points 1..N in run order; warm-ups have −1.
	BenchmarkID int64
	// Type is prefill or decode.
	Type string
	// Warmup marks a global warm-up iteration (not measured).
	Warmup bool
	// BatchSize is the number of requests in the measured step.
	BatchSize int
	// ContextPerReq (decode) is the KV context each request reads in the
	// measured step: the coordinate actually measured.
	ContextPerReq []int
	// RequestedContextPerReq (decode) is the grid coordinate before
	// clamping; it differs from ContextPerReq only when Clamped.
	RequestedContextPerReq []int
	// PrefillTokensPerReq (prefill, mixed) is each prefill request's chunk:
	// its whole prompt, or the part after PrefillContextPerReq.
	PrefillTokensPerReq []int
	// PrefillContextPerReq (prefill, mixed) is the KV each chunk reads
	// before its own tokens (resident when admitted); nil for prompts
	// computed from the start.
	PrefillContextPerReq []int
	// TotalPrefillTokens and TotalKVReadTokens are the step's coordinates
	// (Dynamo's total_prefill_tokens, total_kv_read_tokens).
	TotalPrefillTokens, TotalKVReadTokens int
	// ExpectedCaptureSize is the CUDA graph the step pads to (0: eager);
	// PaddingTokens = ExpectedCaptureSize − tokens of the step.
	ExpectedCaptureSize, PaddingTokens int
	// SampleReasons says why the point is on the grid.
	SampleReasons []string
	// Clamped: the steady policy could not give up a token for ctx=1
	// entries, so they are measured at 2; ContextPerReq is the measured
	// coordinate, sum(max(1,ctx−1)) + B in total.
	Clamped bool
	// EagerWarmup: the first point of an eager shape (no capture covers its
	// token count): run one discarded replica of it first, since a cold eager
	// shape costs far more than a warm one (1126 vs 147 ms at decode B=513).
	EagerWarmup bool
	// Plan is the injection that measures the point.
	Plan Injection
}

// ChunkID is the ID suffix of a mixed point's prefill request.
const ChunkID = "chunk"

// Arrivals returns the requests that inject the point, all at atNs, with
// IDs prefix+"0", prefix+"1", ... (a mixed point's prefill request is
// prefix+ChunkID, last). Decode requests carry PrecomputedTokens and a
// prompt one token longer (the token the admission step computes); their
// OutputTokens is MeasuredStep+1, so they finish with the measured step.
// Prefill requests produce one token. The last Plan.Deferred arrivals are
// meant to be added once the point's first step is scheduled.
func (p Point) Arrivals(prefix string, atNs int64) []Arrival {
	out := make([]Arrival, p.BatchSize)
	nDec := len(p.ContextPerReq)
	for i := range out {
		pre, admit := p.Plan.PrecomputedTokens[i], p.Plan.AdmitTokens[i]
		out[i] = Arrival{
			ID:                prefix + strconv.Itoa(i),
			AtNs:              atNs,
			PromptTokens:      pre + admit,
			OutputTokens:      p.Plan.MeasuredStep + 1,
			PrecomputedTokens: pre,
			Warmup:            p.Warmup,
		}
		if p.Type == PointMixed && i >= nDec {
			out[i].ID, out[i].OutputTokens = prefix+ChunkID, 1
		}
	}
	return out
}

type gridLimits struct {
	cfg              GridConfig
	steady           bool
	decodeCaptures   []int
	prefillCaptures  []int
	feasibleMaxBatch int
}

// Validate reports the first invalid setting, naming the field and what to
// change.
func (c GridConfig) Validate() error {
	_, err := c.limits()
	return err
}

func (c GridConfig) limits() (*gridLimits, error) {
	switch c.Mode {
	case "", ModeAgg, ModePrefill, ModeDecode:
	default:
		return nil, fmt.Errorf("workload: grid: unknown Mode %q: choose agg, prefill or decode", c.Mode)
	}
	switch c.Policy {
	case "", PolicySteadyStateSecondStep, PolicyAdmissionStep:
	default:
		return nil, fmt.Errorf("workload: grid: unknown Policy %q: choose %s or %s", c.Policy, PolicySteadyStateSecondStep, PolicyAdmissionStep)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxModelLen", c.MaxModelLen}, {"MaxNumSeqs", c.MaxNumSeqs}, {"MaxNumBatchedTokens", c.MaxNumBatchedTokens}, {"BlockSize", c.BlockSize}, {"NumGPUBlocks", c.NumGPUBlocks}} {
		if f.v < 1 {
			return nil, fmt.Errorf("workload: grid: %s=%d: must be >= 1 (set the engine limit)", f.name, f.v)
		}
	}
	if c.Warmups < 0 {
		return nil, fmt.Errorf("workload: grid: Warmups=%d: must be >= 0", c.Warmups)
	}
	for _, f := range []struct {
		name string
		v    int
		min  int
	}{{"DecodeMaxBatchSizeSamples", c.DecodeMaxBatchSizeSamples, 2}, {"DecodeMaxKVSamples", c.DecodeMaxKVSamples, 2}, {"PrefillMaxTokenSamples", c.PrefillMaxTokenSamples, 2}, {"PrefillMaxBatchSizeSamples", c.PrefillMaxBatchSizeSamples, 1}} {
		if f.v != 0 && f.v < f.min {
			return nil, fmt.Errorf("workload: grid: %s=%d: must be >= %d (0 = default)", f.name, f.v, f.min)
		}
	}
	for _, f := range []struct {
		name string
		v    []int
	}{{"CaptureSizes", c.CaptureSizes}, {"DecodeBatchSizes", c.DecodeBatchSizes}, {"DecodeContexts", c.DecodeContexts}, {"PrefillTokens", c.PrefillTokens}, {"PrefillBatchSizes", c.PrefillBatchSizes}} {
		for i, v := range f.v {
			if v < 1 {
				return nil, fmt.Errorf("workload: grid: %s[%d]=%d: must be >= 1", f.name, i, v)
			}
		}
	}
	g := &gridLimits{cfg: c, steady: c.Policy != PolicyAdmissionStep}
	caps := sortedSet(c.CaptureSizes)
	g.prefillCaptures = caps
	for _, s := range caps {
		if s <= c.MaxNumSeqs {
			g.decodeCaptures = append(g.decodeCaptures, s)
		}
	}
	if c.decode() {
		minLen := 3 // admission: ctx + 2 at ctx = 1
		if g.steady {
			minLen = 4 // max(ctx,2) + 2 at ctx = 1
		}
		if c.MaxModelLen < minLen {
			return nil, fmt.Errorf("workload: grid: MaxModelLen=%d: the %s decode grid needs >= %d (max(ctx,2)+2 <= max_model_len at ctx=1 for the steady policy, ctx+2 for admission): raise MaxModelLen or use Mode=prefill",
				c.MaxModelLen, g.policy(), minLen)
		}
		g.feasibleMaxBatch = min(c.MaxNumSeqs, c.MaxNumBatchedTokens, c.NumGPUBlocks/g.decodeBlocks(1))
		if g.feasibleMaxBatch < 1 {
			return nil, fmt.Errorf("workload: grid: NumGPUBlocks=%d: one decode request needs %d blocks of BlockSize=%d: raise NumGPUBlocks", c.NumGPUBlocks, g.decodeBlocks(1), c.BlockSize)
		}
		for i, b := range c.DecodeBatchSizes {
			if b > c.MaxNumSeqs {
				return nil, fmt.Errorf("workload: grid: DecodeBatchSizes[%d]=%d exceeds MaxNumSeqs=%d: lower it or raise MaxNumSeqs", i, b, c.MaxNumSeqs)
			}
			if b > c.MaxNumBatchedTokens {
				return nil, fmt.Errorf("workload: grid: DecodeBatchSizes[%d]=%d exceeds MaxNumBatchedTokens=%d (one token per request): lower it or raise MaxNumBatchedTokens", i, b, c.MaxNumBatchedTokens)
			}
			if b > g.feasibleMaxBatch {
				return nil, fmt.Errorf("workload: grid: DecodeBatchSizes[%d]=%d does not fit the KV cache even at ctx=1 (%d blocks each, NumGPUBlocks=%d): lower it or raise NumGPUBlocks", i, b, g.decodeBlocks(1), c.NumGPUBlocks)
			}
		}
		for i, ctx := range c.DecodeContexts {
			if g.decodeLen(ctx)+2 > c.MaxModelLen {
				return nil, fmt.Errorf("workload: grid: DecodeContexts[%d]=%d: needs %d+2 <= MaxModelLen=%d: lower it or raise MaxModelLen", i, ctx, g.decodeLen(ctx), c.MaxModelLen)
			}
			if g.decodeBlocks(ctx) > c.NumGPUBlocks {
				return nil, fmt.Errorf("workload: grid: DecodeContexts[%d]=%d: one request needs %d KV blocks > NumGPUBlocks=%d: lower it or raise NumGPUBlocks", i, ctx, g.decodeBlocks(ctx), c.NumGPUBlocks)
			}
		}
	}
	if c.prefill() {
		for i, b := range c.PrefillBatchSizes {
			if b > c.MaxNumSeqs {
				return nil, fmt.Errorf("workload: grid: PrefillBatchSizes[%d]=%d exceeds MaxNumSeqs=%d: lower it or raise MaxNumSeqs", i, b, c.MaxNumSeqs)
			}
		}
		for i, t := range c.PrefillTokens {
			if t > c.MaxNumBatchedTokens {
				return nil, fmt.Errorf("workload: grid: PrefillTokens[%d]=%d exceeds MaxNumBatchedTokens=%d: lower it or raise MaxNumBatchedTokens", i, t, c.MaxNumBatchedTokens)
			}
			if len(g.prefillBatchSizes(t)) == 0 {
				return nil, fmt.Errorf("workload: grid: PrefillTokens[%d]=%d: no batch size fits (each prompt+1 <= MaxModelLen=%d, B <= MaxNumSeqs=%d, blocks <= NumGPUBlocks=%d): lower it or raise the limits",
					i, t, c.MaxModelLen, c.MaxNumSeqs, c.NumGPUBlocks)
			}
		}
	}
	if err := g.checkHetero(); err != nil {
		return nil, err
	}
	return g, nil
}

func (c GridConfig) decode() bool  { return c.Mode != ModePrefill }
func (c GridConfig) prefill() bool { return c.Mode != ModeDecode }

func (g *gridLimits) policy() string {
	if g.steady {
		return PolicySteadyStateSecondStep
	}
	return PolicyAdmissionStep
}

// decodeLen is the context the measured step reads for a requested ctx:
// the steady policy cannot admit fewer than 1 token, so ctx=1 reads 2.
func (g *gridLimits) decodeLen(ctx int) int {
	if g.steady {
		return max(ctx, 2)
	}
	return ctx
}

// decodeBlocks is one request's KV footprint: the measured step's context
// plus the token it writes.
func (g *gridLimits) decodeBlocks(ctx int) int {
	return ceilDiv(g.decodeLen(ctx)+1, g.cfg.BlockSize)
}

// decodeFeasible checks B requests splitting total KV tokens evenly
// (balanced partition: r requests of q+1, B−r of q).
func (g *gridLimits) decodeFeasible(b, total int) bool {
	c := g.cfg
	if b < 1 || b > c.MaxNumSeqs || b > c.MaxNumBatchedTokens || total < b {
		return false
	}
	q, r := total/b, total%b
	hi := q
	if r > 0 {
		hi = q + 1
	}
	if g.decodeLen(hi)+2 > c.MaxModelLen {
		return false
	}
	blocks := int64(r)*int64(g.decodeBlocks(q+1)) + int64(b-r)*int64(g.decodeBlocks(q))
	return blocks <= int64(c.NumGPUBlocks)
}

// maxDecodeKV is the largest feasible total KV for batch b (0 if none).
func (g *gridLimits) maxDecodeKV(b int) int {
	lo, hi, best := b, b*(g.cfg.MaxModelLen-2), 0
	for lo <= hi {
		mid := lo + (hi-lo)/2
		if g.decodeFeasible(b, mid) {
			best, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}

func (g *gridLimits) prefillFeasible(total, b int) bool {
	c := g.cfg
	if total < 1 || total > c.MaxNumBatchedTokens || b < 1 || b > c.MaxNumSeqs || b > total {
		return false
	}
	q, r := total/b, total%b
	hi := q
	if r > 0 {
		hi = q + 1
	}
	if hi+1 > c.MaxModelLen {
		return false
	}
	blocks := int64(r)*int64(ceilDiv(q+1, c.BlockSize)) + int64(b-r)*int64(ceilDiv(q, c.BlockSize))
	return blocks <= int64(c.NumGPUBlocks)
}

// prefillBatchSizes is the batch axis of a token count: the listed sizes
// that fit, or Dynamo's presets.
func (g *gridLimits) prefillBatchSizes(total int) []int {
	c := g.cfg
	if len(c.PrefillBatchSizes) > 0 {
		var out []int
		for _, b := range sortedSet(c.PrefillBatchSizes) {
			if g.prefillFeasible(total, b) {
				out = append(out, b)
			}
		}
		return out
	}
	// Feasibility is not monotone in b (more requests round up to more
	// blocks), so take the legal powers of two and the largest legal b,
	// searched downward from the upper bound (at most 4096 candidates).
	upper := min(total, c.MaxNumSeqs, c.MaxNumBatchedTokens)
	maxLegal := 0
	var legal []int
	for b := 1; b <= upper; b *= 2 {
		if g.prefillFeasible(total, b) {
			legal = append(legal, b)
		}
		if b > upper/2 {
			break
		}
	}
	for b := upper; b >= 1; b-- {
		if g.prefillFeasible(total, b) {
			maxLegal = b
			break
		}
		if upper-b > 4096 { // bounded search; powers of two cover the rest
			break
		}
	}
	if maxLegal > 0 {
		legal = append(legal, maxLegal)
	}
	legal = sortedSet(legal)
	n := c.PrefillMaxBatchSizeSamples
	if n == 0 {
		n = DefaultPrefillMaxBatchSizeSamples
	}
	if len(legal) > n {
		legal = legal[:n]
	}
	return legal
}

// BuildGrid returns the benchmark points of cfg in run order: warm-ups,
// then prefill points largest first, then decode points by batch size and
// context. Measured points are numbered 1..N. Combinations of two axes that
// do not fit the engine (a large B with a large ctx) are left out, as Dynamo
// does; a listed value that cannot fit at all, or an empty phase, is an
// error naming the setting.
func BuildGrid(cfg GridConfig) ([]Point, error) {
	g, err := cfg.limits()
	if err != nil {
		return nil, err
	}
	var pts []Point
	if cfg.Warmups > 0 {
		pts = append(pts, g.warmups()...)
	}
	nWarm := len(pts)
	if cfg.prefill() {
		pre := g.prefillPoints()
		if len(pre) == 0 {
			return nil, fmt.Errorf("workload: grid: no prefill point fits the engine limits (MaxNumBatchedTokens=%d, MaxModelLen=%d, NumGPUBlocks=%d×%d): raise them or use Mode=decode",
				cfg.MaxNumBatchedTokens, cfg.MaxModelLen, cfg.NumGPUBlocks, cfg.BlockSize)
		}
		pts = append(pts, pre...)
	}
	if cfg.decode() {
		dec := g.decodePoints()
		if len(dec) == 0 {
			return nil, fmt.Errorf("workload: grid: no decode point fits: every (DecodeBatchSizes × DecodeContexts) pair exceeds NumGPUBlocks=%d of BlockSize=%d: lower the contexts or batch sizes", cfg.NumGPUBlocks, cfg.BlockSize)
		}
		pts = append(pts, dec...)
	}
	het, err := g.heteroPoints()
	if err != nil {
		return nil, err
	}
	pts = append(pts, het...)
	for i := nWarm; i < len(pts); i++ {
		pts[i].BenchmarkID = int64(i - nWarm + 1)
	}
	markEagerWarmups(pts[nWarm:])
	return pts, nil
}

func (g *gridLimits) warmups() []Point {
	c := g.cfg
	var out []Point
	{ // one warm-up prefill, as Dynamo's WARMUP phase
		t := min(warmupPrefillTokens, c.MaxNumBatchedTokens, c.MaxModelLen-1, c.NumGPUBlocks*c.BlockSize)
		if t >= 1 {
			p := g.prefillPoint(t, 1, false)
			p.Warmup, p.BenchmarkID, p.SampleReasons = true, -1, []string{ReasonWarmup}
			out = append(out, p)
		}
	}
	if c.decode() {
		ctx := min(warmupPrefillTokens, c.MaxModelLen-2)
		for ctx > 1 && !g.decodeFeasible(1, ctx) {
			ctx /= 2
		}
		for i := 0; i < c.Warmups; i++ {
			p := g.decodePoint([]int{ctx}, false)
			p.Warmup, p.BenchmarkID, p.SampleReasons = true, -1, []string{ReasonWarmup}
			out = append(out, p)
		}
	}
	return out
}

// gridAxis is one axis of the grid: the explicit values, sorted and
// deduplicated, or else the CUDA-graph capture sizes up to max, thinned to
// at most samples.
func gridAxis(explicit, captures []int, max, samples int) []int {
	if len(explicit) > 0 {
		return sortedSet(explicit)
	}
	return limitCudagraphAxis(cudagraphAxis(captures, max), captures, samples)
}

func (g *gridLimits) prefillPoints() []Point {
	c := g.cfg
	explicit := len(c.PrefillTokens) > 0
	totals := gridAxis(c.PrefillTokens, g.prefillCaptures, c.MaxNumBatchedTokens,
		orDefault(c.PrefillMaxTokenSamples, DefaultPrefillMaxTokenSamples))
	var out []Point
	for i := len(totals) - 1; i >= 0; i-- { // largest first
		t := totals[i]
		for _, b := range g.prefillBatchSizes(t) {
			out = append(out, g.prefillPoint(t, b, explicit || len(c.PrefillBatchSizes) > 0))
		}
	}
	return out
}

func (g *gridLimits) prefillPoint(total, b int, explicit bool) Point {
	per := balancedPartition(total, b)
	capSize, pad, reasons := cudagraphMetadata(total, g.prefillCaptures, g.cfg.MaxNumBatchedTokens)
	if explicit {
		reasons = append(reasons, ReasonExplicit)
	}
	return Point{
		Type:                PointPrefill,
		BatchSize:           b,
		PrefillTokensPerReq: per,
		TotalPrefillTokens:  total,
		ExpectedCaptureSize: capSize,
		PaddingTokens:       pad,
		SampleReasons:       reasons,
		Plan: Injection{
			Policy:            PolicySingleStep,
			PrecomputedTokens: make([]int, b),
			AdmitTokens:       slices.Clone(per),
		},
	}
}

func (g *gridLimits) decodePoints() []Point {
	c := g.cfg
	explicitB := len(c.DecodeBatchSizes) > 0
	batches := gridAxis(c.DecodeBatchSizes, g.decodeCaptures, g.feasibleMaxBatch,
		orDefault(c.DecodeMaxBatchSizeSamples, DefaultDecodeMaxBatchSizeSamples))
	var out []Point
	for _, b := range batches {
		if len(c.DecodeContexts) > 0 {
			for _, ctx := range sortedSet(c.DecodeContexts) {
				if !g.decodeFeasible(b, b*ctx) {
					continue
				}
				ctxs := make([]int, b)
				for i := range ctxs {
					ctxs[i] = ctx
				}
				out = append(out, g.decodePoint(ctxs, true))
			}
			continue
		}
		maxKV := g.maxDecodeKV(b)
		if maxKV < b {
			continue
		}
		axis := []int{b}
		for v := 1; v <= maxKV && v > 0; v *= 2 {
			if v >= b {
				axis = append(axis, v)
			}
			if v > maxKV/2 {
				break
			}
		}
		axis = append(axis, maxKV)
		axis = uniformlyLimitAxis(sortedSet(axis), orDefault(c.DecodeMaxKVSamples, DefaultDecodeMaxKVSamples))
		for _, total := range axis {
			if g.decodeFeasible(b, total) {
				out = append(out, g.decodePoint(balancedPartition(total, b), explicitB))
			}
		}
	}
	return out
}

// decodePoint builds the point and its injection plan for requested
// per-request contexts.
func (g *gridLimits) decodePoint(requested []int, explicit bool) Point {
	b := len(requested)
	measured := make([]int, b)
	pre := make([]int, b)
	admit := make([]int, b)
	clamped := false
	total := 0
	for i, ctx := range requested {
		admit[i] = 1
		if g.steady {
			pre[i] = max(1, ctx-1)
			measured[i] = pre[i] + 1
			if ctx < 2 {
				clamped = true
			}
		} else {
			pre[i] = ctx
			measured[i] = ctx
		}
		total += measured[i]
	}
	capSize, pad, reasons := cudagraphMetadata(b, g.decodeCaptures, g.feasibleMaxBatch)
	if explicit {
		reasons = append(reasons, ReasonExplicit)
	}
	if clamped {
		reasons = append(reasons, ReasonContextClamped)
	}
	plan := Injection{Policy: g.policy(), PrecomputedTokens: pre, AdmitTokens: admit}
	if g.steady {
		plan.MeasuredStep = 1
	}
	return Point{
		Type:                   PointDecode,
		BatchSize:              b,
		ContextPerReq:          measured,
		RequestedContextPerReq: slices.Clone(requested),
		TotalKVReadTokens:      total,
		ExpectedCaptureSize:    capSize,
		PaddingTokens:          pad,
		SampleReasons:          reasons,
		Clamped:                clamped,
		Plan:                   plan,
	}
}

// markEagerWarmups flags the first point of each eager shape (decode: its
// batch size; prefill: its total tokens), as Dynamo deduplicates its warm-up
// replicas.
func markEagerWarmups(pts []Point) {
	type shape struct {
		typ    string
		tokens int
	}
	var seen []shape // small; a slice keeps iteration order out of the picture
	for i := range pts {
		p := &pts[i]
		if p.ExpectedCaptureSize != 0 {
			continue
		}
		s := shape{p.Type, p.BatchSize}
		switch p.Type {
		case PointPrefill:
			s.tokens = p.TotalPrefillTokens
		case PointMixed:
			s.tokens = p.TotalPrefillTokens + len(p.ContextPerReq)
		}
		if slices.Contains(seen, s) {
			continue
		}
		seen = append(seen, s)
		p.EagerWarmup = true
	}
}

// cudagraphMetadata mirrors Dynamo's _bench_cudagraph_metadata: the capture
// size a step of n tokens pads to (0: none), the padding, and the reasons.
func cudagraphMetadata(n int, captures []int, axisLimit int) (capSize, pad int, reasons []string) {
	for _, c := range captures {
		if c >= n {
			capSize = c
			break
		}
	}
	if slices.Contains(captures, n) {
		reasons = append(reasons, ReasonCapture)
	}
	if n > 1 && slices.Contains(captures, n-1) {
		reasons = append(reasons, ReasonPostCapture)
	}
	if len(captures) == 0 {
		reasons = append(reasons, ReasonCUDAGraphDisabled)
		if n != axisLimit {
			reasons = append(reasons, ReasonGeometricAxis)
		}
	} else if n > captures[len(captures)-1] {
		reasons = append(reasons, ReasonEagerTail)
		if n != axisLimit {
			reasons = append(reasons, ReasonGeometricTail)
		}
	}
	if n == axisLimit {
		reasons = append(reasons, ReasonEngineLimit)
	}
	if capSize > 0 {
		pad = capSize - n
	}
	return capSize, pad, reasons
}

// cudagraphAxis mirrors Dynamo's _cudagraph_axis_points: every capture
// size C <= limit and C+1, a ×2 geometric tail above the largest capture
// size, and limit itself; powers of two up to limit without captures.
func cudagraphAxis(captures []int, limit int) []int {
	if limit < 1 {
		return nil
	}
	var pts []int
	if len(captures) == 0 {
		for v := 1; v <= limit; v *= 2 {
			pts = append(pts, v)
			if v > limit/2 {
				break
			}
		}
		return sortedSet(append(pts, limit))
	}
	for _, c := range captures {
		if c > limit {
			continue
		}
		pts = append(pts, c)
		if c < limit {
			pts = append(pts, c+1)
		}
	}
	if top := captures[len(captures)-1]; top <= limit {
		for v := top * 2; v < limit && v > 0; v *= 2 {
			pts = append(pts, v)
		}
	}
	return sortedSet(append(pts, limit))
}

// uniformlyLimitAxis keeps at most n values, both endpoints included.
func uniformlyLimitAxis(vals []int, n int) []int {
	if len(vals) <= n {
		return vals
	}
	last, iv := len(vals)-1, n-1
	out := make([]int, 0, n)
	for s := 0; s < n; s++ {
		out = append(out, vals[(s*last+iv/2)/iv])
	}
	return out
}

// limitCudagraphAxis keeps the whole eager tail when it is at most 20% of
// the candidates and spends the rest of the budget on graph-covered values;
// otherwise it limits uniformly (Dynamo's _limit_cudagraph_axis).
func limitCudagraphAxis(vals, captures []int, n int) []int {
	if len(vals) <= n {
		return vals
	}
	if len(captures) == 0 {
		return uniformlyLimitAxis(vals, n)
	}
	top := captures[len(captures)-1]
	var graph, tail []int
	for _, v := range vals {
		if v <= top {
			graph = append(graph, v)
		} else {
			tail = append(tail, v)
		}
	}
	budget := n - len(tail)
	if len(tail) == 0 || len(tail)*5 > len(vals) || len(graph) == 0 || budget < 1 {
		return uniformlyLimitAxis(vals, n)
	}
	if budget == 1 {
		graph = graph[:1]
	} else {
		graph = uniformlyLimitAxis(graph, budget)
	}
	return append(slices.Clone(graph), tail...)
}

// balancedPartition splits total into b parts >= 1 as evenly as possible,
// the larger parts first (Dynamo's _balanced_partition, minimum 1).
func balancedPartition(total, b int) []int {
	q, r := (total-b)/b, (total-b)%b
	out := make([]int, b)
	for i := range out {
		out[i] = 1 + q
		if i < r {
			out[i]++
		}
	}
	return out
}

func sortedSet(v []int) []int {
	out := slices.Clone(v)
	slices.Sort(out)
	return slices.Compact(out)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

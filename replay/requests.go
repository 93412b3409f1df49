package replay

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/workload"
)

// Trace is a recorded run's requests, loaded once: arrivals for the engine
// and the recorded latencies to compare with.
type Trace struct {
	Dir string
	// Arrivals are the requests as workload.TraceArrival converts them (the
	// conversion simulate's trace workload uses): their prefix_hash_ids a
	// hash chain over blocks of HashBlock tokens.
	Arrivals []workload.Arrival
	Rec      []datasets.Request // same order as Arrivals (by arrival time, then id)
	// HashBlock is the prompt tokens behind each prefix hash
	// (workload.HashBlockSize); 0 when the requests carry none.
	HashBlock int
	// Steps is the recorded step composition, when the dataset has steps.
	Steps *Composition
}

// LoadTrace reads a dataset's requests (and its step composition when
// present). Requests without a positive prompt or output length are
// skipped. Prefix hashes are kept where the manifest records their block
// size; a dataset with prefix hashes and no block size is refused
// (workload.HashBlockSize).
func LoadTrace(d *datasets.Dataset) (*Trace, error) {
	block, err := workload.HashBlockSize(d, 0)
	if err != nil {
		return nil, err
	}
	rows, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].ArrivalNs != rows[j].ArrivalNs {
			return rows[i].ArrivalNs < rows[j].ArrivalNs
		}
		return rows[i].ReqID < rows[j].ReqID
	})
	t := &Trace{Dir: d.Dir, HashBlock: block}
	for _, r := range rows {
		if r.PromptTokens < 1 || r.OutputTokens < 1 || r.Status == datasets.StatusAborted {
			continue
		}
		t.Arrivals = append(t.Arrivals, workload.TraceArrival(&r))
		r.PrefixHashIDs = nil
		t.Rec = append(t.Rec, r)
	}
	if len(t.Arrivals) == 0 {
		return nil, fmt.Errorf("%s: no requests with prompt and output lengths to replay", d.Dir)
	}
	if !t.timed() {
		return nil, fmt.Errorf("%s records no request latencies (first_token_ns and finish_ns are unset): request replay and calibration compare against them; to run its arrivals on an engine, use steplab simulate --set workload.trace=%s", d.Dir, d.Dir)
	}
	if d.Has(datasets.TableSteps) {
		c, err := recordedComposition(d)
		if err != nil {
			return nil, err
		}
		t.Steps = c
	}
	return t, nil
}

// timed reports whether any recorded request has a latency to compare.
func (t *Trace) timed() bool {
	for i := range t.Rec {
		if l := latOf(&t.Rec[i]); l.ttft >= 0 || l.e2e >= 0 {
			return true
		}
	}
	return false
}

// Window returns the trace restricted to requests [lo, hi) by arrival order.
func (t *Trace) Window(lo, hi int) *Trace {
	return &Trace{Dir: t.Dir, Arrivals: t.Arrivals[lo:hi], Rec: t.Rec[lo:hi], HashBlock: t.HashBlock}
}

// engineArrivals are the arrivals with their prefix hash chains re-blocked
// to an engine's block of engineBlock tokens, as simulate's trace workload
// maps them (workload.EngineBlockHashes).
func (t *Trace) engineArrivals(engineBlock int) []workload.Arrival {
	if t.HashBlock == 0 {
		return t.Arrivals
	}
	out := slices.Clone(t.Arrivals)
	for i := range out {
		if a := &out[i]; len(a.PrefixHashes) > 0 {
			a.PrefixHashes = workload.EngineBlockHashes(a.PrefixHashes, t.HashBlock, engineBlock, a.PromptTokens, nil)
		}
	}
	return out
}

// Composition is the step composition of a run.
type Composition struct {
	Steps         int64            `json:"steps"`
	StepsByKind   map[string]int64 `json:"steps_by_kind"`
	MeanBatchSize float64          `json:"mean_batch_size"`
	MeanTokens    float64          `json:"mean_tokens_per_step"`
	Preemptions   int64            `json:"preemptions"`
	// ExtrapolatedOps counts the operations the FPM priced past its
	// measured range, summed over the engines (sim.Stats).
	ExtrapolatedOps int64 `json:"extrapolated_ops"`
	// PrefixHitTokens are the prompt tokens a re-simulation found in the
	// prefix cache (a recorded step table does not say).
	PrefixHitTokens int64 `json:"prefix_hit_tokens,omitempty"`
	sumB, sumT      float64
}

func (c *Composition) add(kind string, batch, tokens int64, preempted int32) {
	if c.StepsByKind == nil {
		c.StepsByKind = map[string]int64{}
	}
	c.Steps++
	c.StepsByKind[kind]++
	c.sumB += float64(batch)
	c.sumT += float64(tokens)
	c.Preemptions += int64(preempted)
}

func (c *Composition) finish() {
	if c.Steps > 0 {
		c.MeanBatchSize, c.MeanTokens = c.sumB/float64(c.Steps), c.sumT/float64(c.Steps)
	}
}

func recordedComposition(d *datasets.Dataset) (*Composition, error) {
	type cols struct {
		Kind          string `parquet:"kind"`
		NumNewReqs    int32  `parquet:"num_new_reqs"`
		NumCachedReqs int32  `parquet:"num_cached_reqs"`
		Tokens        int64  `parquet:"total_scheduled_tokens"`
		NumPreempted  int32  `parquet:"num_preempted"`
	}
	s, err := datasets.Scan[cols](d, datasets.TableSteps)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	c := &Composition{}
	buf := make([]cols, 4096)
	for {
		n, err := s.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		for _, r := range buf[:n] {
			c.add(r.Kind, int64(r.NumNewReqs+r.NumCachedReqs), r.Tokens, r.NumPreempted)
		}
	}
	c.finish()
	return c, nil
}

// simSink collects what a re-simulation produces.
type simSink struct {
	reqs   map[string]datasets.Request
	comp   Composition
	onStep func(*datasets.Step) // nil, or the engine-curve recorder
}

func (s *simSink) Step(st *datasets.Step, _ []datasets.StepRequest) error {
	s.comp.add(st.Kind, int64(st.NumNewReqs+st.NumCachedReqs), st.TotalScheduledTokens, st.NumPreempted)
	if s.onStep != nil {
		s.onStep(st)
	}
	return nil
}

func (s *simSink) Request(r *datasets.Request) error {
	c := *r
	c.PrefixHashIDs = nil
	s.reqs[r.ReqID] = c
	return nil
}

// Simulate re-simulates the trace's arrivals on the plan's engines (one
// engine, or the cluster the run had) with its models and returns the
// simulated requests by id and the step composition.
func Simulate(t *Trace, p *cluster.Plan) (map[string]datasets.Request, *Composition, error) {
	return simulate(t, p, nil)
}

// simulate is Simulate with a function called after every step.
func simulate(t *Trace, p *cluster.Plan, onStep func(*datasets.Step)) (map[string]datasets.Request, *Composition, error) {
	sink := &simSink{reqs: make(map[string]datasets.Request, len(t.Arrivals)), onStep: onStep}
	c, err := p.New(cluster.Tee{sink}, nil)
	if err != nil {
		return nil, nil, err
	}
	// The pools share one block size (cluster.Plan checks it).
	end, err := cluster.Drive(c, workload.NewSlice(t.engineArrivals(p.Pools[0].Engine.Sched.BlockSize)))
	if err != nil {
		return nil, nil, err
	}
	if err := c.Finish(end); err != nil {
		return nil, nil, err
	}
	st := c.Stats()
	sink.comp.finish()
	sink.comp.ExtrapolatedOps, sink.comp.PrefixHitTokens = st.ExtrapolatedOps, st.PrefixHitTokens
	return sink.reqs, &sink.comp, nil
}

// Latencies of one request, ns; −1 where not defined.
type latencies struct{ ttft, itl, e2e int64 }

func latOf(r *datasets.Request) latencies {
	l := latencies{-1, -1, -1}
	if r.FirstTokenNs >= 0 && r.ArrivalNs >= 0 {
		l.ttft = r.FirstTokenNs - r.ArrivalNs
	}
	if r.FinishNs >= 0 && r.ArrivalNs >= 0 {
		l.e2e = r.FinishNs - r.ArrivalNs
		if r.FirstTokenNs >= 0 && r.OutputTokens > 1 {
			l.itl = (r.FinishNs - r.FirstTokenNs) / (r.OutputTokens - 1)
		}
	}
	return l
}

// RequestRow is one row of a request replay's request_comparison table. For each of
// ttft, itl (per request: (finish − first token)/(outputs − 1)) and e2e:
// rec_X and pred_X in ns (−1 when undefined), err_X = pred − rec and
// rel_err_X = err / rec (NaN when either is undefined).
type RequestRow struct {
	ReqID        string  `parquet:"req_id"`
	ArrivalNs    int64   `parquet:"arrival_ns,delta"`
	PromptTokens int64   `parquet:"prompt_tokens,delta"`
	OutputTokens int64   `parquet:"output_tokens,delta"`
	RecStatus    string  `parquet:"rec_status,dict"`
	PredStatus   string  `parquet:"pred_status,dict"`
	RecTTFT      int64   `parquet:"rec_ttft_ns,delta"`
	PredTTFT     int64   `parquet:"pred_ttft_ns,delta"`
	ErrTTFT      int64   `parquet:"err_ttft_ns,delta"`
	RelErrTTFT   float64 `parquet:"rel_err_ttft"`
	RecITL       int64   `parquet:"rec_itl_ns,delta"`
	PredITL      int64   `parquet:"pred_itl_ns,delta"`
	ErrITL       int64   `parquet:"err_itl_ns,delta"`
	RelErrITL    float64 `parquet:"rel_err_itl"`
	RecE2E       int64   `parquet:"rec_e2e_ns,delta"`
	PredE2E      int64   `parquet:"pred_e2e_ns,delta"`
	ErrE2E       int64   `parquet:"err_e2e_ns,delta"`
	RelErrE2E    float64 `parquet:"rel_err_e2e"`
	// PredPreemptions counts the request's preemptions in the simulation.
	PredPreemptions int32 `parquet:"pred_preemptions,delta"`
	// The latencies re-simulated with the lower and upper edges of the
	// model's step-time interval (RequestIntervals); −1 without.
	PredTTFTLo int64 `parquet:"pred_ttft_lo_ns,delta"`
	PredTTFTHi int64 `parquet:"pred_ttft_hi_ns,delta"`
	PredITLLo  int64 `parquet:"pred_itl_lo_ns,delta"`
	PredITLHi  int64 `parquet:"pred_itl_hi_ns,delta"`
	PredE2ELo  int64 `parquet:"pred_e2e_lo_ns,delta"`
	PredE2EHi  int64 `parquet:"pred_e2e_hi_ns,delta"`
}

func pairErr(rec, pred int64) (int64, float64) {
	if rec < 0 || pred < 0 {
		return 0, math.NaN()
	}
	if rec == 0 {
		return pred - rec, math.NaN()
	}
	return pred - rec, float64(pred-rec) / float64(rec)
}

// Dist is a latency distribution in ms.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
}

func distOf(v []float64) Dist {
	if len(v) == 0 {
		return Dist{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Dist{N: len(s), Mean: sum / float64(len(s)) / 1e6, P50: fpm.SortedQuantile(s, 0.5) / 1e6,
		P90: fpm.SortedQuantile(s, 0.9) / 1e6, P99: fpm.SortedQuantile(s, 0.99) / 1e6}
}

// DistCompare is a recorded and a re-simulated distribution and the
// relative error (pred − rec)/rec of each statistic.
type DistCompare struct {
	Recorded  Dist               `json:"recorded"`
	Predicted Dist               `json:"predicted"`
	RelErr    map[string]float64 `json:"rel_err"` // mean, p50, p90, p99
	// MAPE is the mean over requests of |pred − rec| / rec.
	MAPE float64 `json:"per_request_mape"`
}

func compareDist(rec, pred []float64, mape float64) DistCompare {
	c := DistCompare{Recorded: distOf(rec), Predicted: distOf(pred), RelErr: map[string]float64{}, MAPE: mape}
	rel := func(p, r float64) float64 {
		if r == 0 {
			return 0
		}
		return (p - r) / r
	}
	c.RelErr["mean"] = rel(c.Predicted.Mean, c.Recorded.Mean)
	c.RelErr["p50"] = rel(c.Predicted.P50, c.Recorded.P50)
	c.RelErr["p90"] = rel(c.Predicted.P90, c.Recorded.P90)
	c.RelErr["p99"] = rel(c.Predicted.P99, c.Recorded.P99)
	return c
}

// RequestSummary is summary.json of a request replay.
type RequestSummary struct {
	Dataset  string        `json:"dataset"`
	Model    string        `json:"model"`
	Requests int           `json:"requests"`
	Compared int           `json:"compared"` // finished in both record and simulation
	Finished int           `json:"simulated_finished"`
	Engine   EngineSummary `json:"engine"`
	TTFT     DistCompare   `json:"ttft"`
	ITL      DistCompare   `json:"itl"`
	E2E      DistCompare   `json:"e2e"`
	// Intervals carries the model's step-time interval to the latencies
	// (models with intervals).
	Intervals *RequestIntervals `json:"intervals,omitempty"`
	// NoUncertainty, instead of Intervals, says why the latencies carry no
	// interval (fpm.NoUncertainty): a zero-width one is never reported.
	NoUncertainty string `json:"no_uncertainty,omitempty"`
	// Steps compares the step composition where the record has steps.
	RecordedSteps  *Composition `json:"recorded_steps,omitempty"`
	SimulatedSteps *Composition `json:"simulated_steps"`
	// EngineCurves compares the engine's state over time where the record
	// has engine samples (see CurveSummary).
	EngineCurves *CurveSummary `json:"engine_curves,omitempty"`
	Warnings     []string      `json:"warnings,omitempty"`
}

// EngineSummary is the engine a replay ran (the first pool's, for a
// cluster), and how many.
type EngineSummary struct {
	Engines             int    `json:"engines,omitempty"`
	ExpertParallel      int    `json:"expert_parallel,omitempty"`
	Router              string `json:"router,omitempty"`
	MaxNumSeqs          int    `json:"max_num_seqs"`
	MaxNumBatchedTokens int    `json:"max_num_batched_tokens"`
	BlockSize           int    `json:"block_size"`
	NumGPUBlocks        int    `json:"num_gpu_blocks"`
	MaxModelLen         int    `json:"max_model_len"`
	ChunkedPrefill      bool   `json:"chunked_prefill"`
	PrefixCaching       bool   `json:"prefix_caching"`
	Async               bool   `json:"async_scheduling"`
	CUDAGraphs          int    `json:"cuda_graph_sizes"`
}

func engineSummary(p *cluster.Plan) EngineSummary {
	e := p.Pools[0].Engine
	c := e.Sched
	s := EngineSummary{MaxNumSeqs: c.MaxNumSeqs, MaxNumBatchedTokens: c.MaxNumBatchedTokens, BlockSize: c.BlockSize,
		NumGPUBlocks: c.NumGPUBlocks, MaxModelLen: c.MaxModelLen, ChunkedPrefill: c.ChunkedPrefill, PrefixCaching: c.PrefixCaching,
		Async: e.Async, CUDAGraphs: len(e.Graphs)}
	if n := p.Engines(); n > 1 {
		s.Engines, s.ExpertParallel, s.Router = n, p.Pools[0].ExpertParallel, p.Router.Name
	}
	return s
}

// CompareRequests compares recorded and simulated requests. Only the
// requests of rec are compared (a hold-out window of a longer simulation).
func CompareRequests(rec []datasets.Request, simReqs map[string]datasets.Request, row func(*RequestRow) error) (*RequestSummary, error) {
	s := &RequestSummary{Requests: len(rec)}
	var rt, pt, ri, pi, re, pe []float64
	var mt, mi, me float64
	var nt, ni, ne int
	for i := range rec {
		r := &rec[i]
		p, ok := simReqs[r.ReqID]
		rl := latOf(r)
		pl := latencies{-1, -1, -1}
		out := RequestRow{ReqID: r.ReqID, ArrivalNs: r.ArrivalNs, PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens,
			RecStatus: r.Status, PredStatus: "missing", PredTTFTLo: -1, PredTTFTHi: -1, PredITLLo: -1, PredITLHi: -1, PredE2ELo: -1, PredE2EHi: -1}
		if ok {
			pl = latOf(&p)
			out.PredStatus, out.PredPreemptions = p.Status, p.NumPreemptions
			if p.Status == datasets.StatusFinished {
				s.Finished++
			}
		}
		out.RecTTFT, out.PredTTFT, out.RecITL, out.PredITL, out.RecE2E, out.PredE2E = rl.ttft, pl.ttft, rl.itl, pl.itl, rl.e2e, pl.e2e
		out.ErrTTFT, out.RelErrTTFT = pairErr(rl.ttft, pl.ttft)
		out.ErrITL, out.RelErrITL = pairErr(rl.itl, pl.itl)
		out.ErrE2E, out.RelErrE2E = pairErr(rl.e2e, pl.e2e)
		if rl.e2e >= 0 && pl.e2e >= 0 {
			s.Compared++
		}
		if rl.ttft >= 0 && pl.ttft >= 0 {
			rt, pt = append(rt, float64(rl.ttft)), append(pt, float64(pl.ttft))
			if !math.IsNaN(out.RelErrTTFT) {
				mt += math.Abs(out.RelErrTTFT)
				nt++
			}
		}
		if rl.itl >= 0 && pl.itl >= 0 {
			ri, pi = append(ri, float64(rl.itl)), append(pi, float64(pl.itl))
			if !math.IsNaN(out.RelErrITL) {
				mi += math.Abs(out.RelErrITL)
				ni++
			}
		}
		if rl.e2e >= 0 && pl.e2e >= 0 {
			re, pe = append(re, float64(rl.e2e)), append(pe, float64(pl.e2e))
			if !math.IsNaN(out.RelErrE2E) {
				me += math.Abs(out.RelErrE2E)
				ne++
			}
		}
		if row != nil {
			if err := row(&out); err != nil {
				return nil, err
			}
		}
	}
	avg := func(s float64, n int) float64 {
		if n == 0 {
			return 0
		}
		return s / float64(n)
	}
	s.TTFT = compareDist(rt, pt, avg(mt, nt))
	s.ITL = compareDist(ri, pi, avg(mi, ni))
	s.E2E = compareDist(re, pe, avg(me, ne))
	return s, nil
}

// RequestOptions tune RunRequests.
type RequestOptions struct {
	// Plan is the engines and models the requests are re-simulated with
	// (scenario.PlanFromManifest of the dataset, usually).
	Plan *cluster.Plan
	// Warnings say what the plan assumed; they are carried into the
	// summary.
	Warnings []string
	// Level is the coverage of the step-time interval carried to the
	// latencies when the plan's FPM is a fpm.IntervalFPM (0: the model's
	// own, fpm.LevelOf; negative: none).
	Level float64
	// Holdout, when > 0, also scores the interval on the last Holdout of
	// the requests by arrival alone: those calibrate --holdout left out
	// (HoldoutStart).
	Holdout float64
}

// IntervalMethod says how RequestIntervals are propagated.
const IntervalMethod = "re-simulated with the lower and upper edges of every step's interval"

// RequestIntervals carries a model's step-time interval to request
// latencies by re-simulating the trace twice: with every step at the
// lower edge of its interval, and at the upper edge (fpm.Bound). The
// two runs are deterministic, and they bound the systematic part of the
// model's error, which is what dominates: a model that under-prices a
// regime does so on every step of it, and its errors compound through
// queueing. A Monte Carlo over independent per-step draws would average
// such errors away and give latency intervals far narrower than the
// model's error.
type RequestIntervals struct {
	Level  float64         `json:"level"`
	Method string          `json:"method"`
	TTFT   LatencyInterval `json:"ttft"`
	ITL    LatencyInterval `json:"itl"`
	E2E    LatencyInterval `json:"e2e"`
}

// LatencyInterval is a latency's distribution in the lower and upper
// re-simulations, and how often a request's recorded latency lay between
// its two re-simulated ones. That share is below 100% even for the model
// that generated the record: when step times shift, an arrival lands at
// another point of the step pipeline, so one request's TTFT is not
// monotone in the step times.
type LatencyInterval struct {
	Lo          Dist    `json:"lo"`
	Hi          Dist    `json:"hi"`
	N           int     `json:"n"`
	CoveragePct float64 `json:"coverage_pct"`
	// HeldOutN and HeldOutCoveragePct are the same over the held-out
	// requests (RequestOptions.Holdout; 0 without).
	HeldOutN           int     `json:"held_out_n,omitempty"`
	HeldOutCoveragePct float64 `json:"held_out_coverage_pct,omitempty"`
}

// boundLatencies fills the rows' interval columns from the lower and
// upper re-simulations and summarises them.
func boundLatencies(rows []RequestRow, lo, hi map[string]datasets.Request, level, holdout float64) *RequestIntervals {
	out := &RequestIntervals{Level: level, Method: IntervalMethod}
	var vals [3][2][]float64
	var n, in, hn, hin [3]int
	first := len(rows)
	if holdout > 0 {
		first = HoldoutStart(len(rows), holdout)
	}
	for i := range rows {
		r := &rows[i]
		a, aok := lo[r.ReqID]
		b, bok := hi[r.ReqID]
		if !aok || !bok {
			continue
		}
		la, lb := latOf(&a), latOf(&b)
		rec := [3]int64{r.RecTTFT, r.RecITL, r.RecE2E}
		dst := [3][2]*int64{{&r.PredTTFTLo, &r.PredTTFTHi}, {&r.PredITLLo, &r.PredITLHi}, {&r.PredE2ELo, &r.PredE2EHi}}
		for m, pair := range [3][2]int64{{la.ttft, lb.ttft}, {la.itl, lb.itl}, {la.e2e, lb.e2e}} {
			if pair[0] < 0 || pair[1] < 0 {
				continue
			}
			l, h := min(pair[0], pair[1]), max(pair[0], pair[1])
			*dst[m][0], *dst[m][1] = l, h
			vals[m][0], vals[m][1] = append(vals[m][0], float64(l)), append(vals[m][1], float64(h))
			if rec[m] >= 0 {
				n[m]++
				inside := rec[m] >= l && rec[m] <= h
				if inside {
					in[m]++
				}
				if i >= first {
					hn[m]++
					if inside {
						hin[m]++
					}
				}
			}
		}
	}
	for m, li := range []*LatencyInterval{&out.TTFT, &out.ITL, &out.E2E} {
		li.Lo, li.Hi, li.N = distOf(vals[m][0]), distOf(vals[m][1]), n[m]
		if n[m] > 0 {
			li.CoveragePct = 100 * float64(in[m]) / float64(n[m])
		}
		if li.HeldOutN = hn[m]; hn[m] > 0 {
			li.HeldOutCoveragePct = 100 * float64(hin[m]) / float64(hn[m])
		}
	}
	return out
}

// RunRequests re-simulates the dataset's requests and writes
// out/request_comparison.parquet and out/summary.json; where the record
// has engine samples, also out/engine_samples.parquet and the engine.*
// figures.
func RunRequests(d *datasets.Dataset, opts RequestOptions, out Output) (*RequestSummary, error) {
	t, err := LoadTrace(d)
	if err != nil {
		return nil, err
	}
	e := opts.Plan
	if e == nil {
		return nil, errors.New("replay requests: no plan to re-simulate on")
	}
	curves, err := newCurveRecorder(d)
	if err != nil {
		return nil, err
	}
	simReqs, comp, err := simulate(t, e, curves.stepHook())
	if err != nil {
		return nil, err
	}
	var edges [2]map[string]datasets.Request
	level := e.IntervalLevel(opts.Level)
	for i, name := range []string{"lower", "upper"} {
		if level <= 0 {
			break
		}
		b, err := e.Bound(level, i == 1)
		if err == nil {
			edges[i], _, err = Simulate(t, b)
		}
		if err != nil {
			return nil, fmt.Errorf("%s-edge re-simulation: %w", name, err)
		}
	}
	w, err := out.create("requests")
	if err != nil {
		return nil, err
	}
	tw, err := datasets.NewTableWriter[RequestRow](w, TableRequestComparison, datasets.DefaultTableOptions)
	if err != nil {
		return nil, err
	}
	var buf []RequestRow
	sum, err := CompareRequests(t.Rec, simReqs, func(r *RequestRow) error { buf = append(buf, *r); return nil })
	if err == nil && level > 0 {
		sum.Intervals = boundLatencies(buf, edges[0], edges[1], level, opts.Holdout)
	}
	if err == nil {
		sum.EngineCurves, err = curves.writeCurves(w)
	}
	if err := finishTable(w, tw, buf, err); err != nil {
		return nil, err
	}
	sum.Dataset, sum.Model = out.DatasetDir, out.ModelName
	if level <= 0 && opts.Level >= 0 {
		sum.NoUncertainty = fpm.NoUncertainty(e.Pools[0].Engine.FPM, out.ModelName)
	}
	sum.Engine = engineSummary(e)
	sum.Warnings = append(sum.Warnings, opts.Warnings...)
	sum.RecordedSteps, sum.SimulatedSteps = t.Steps, comp
	if n := sim.ExtrapolatedNote(comp.ExtrapolatedOps); n != "" {
		sum.Warnings = append(sum.Warnings, n)
	}
	if err := writeJSONFile(filepath.Join(out.Dir, "summary.json"), sum); err != nil {
		return nil, err
	}
	if !out.NoFigures {
		if _, err := CurveFigures(sum.EngineCurves, out.Dir); err != nil {
			return nil, err
		}
	}
	return sum, nil
}

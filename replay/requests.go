package replay

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/sched"
	"github.com/steplab/steplab/sim/workload"
)

// Engine is the engine a recorded run is re-simulated on: the manifest's
// limits, CUDA-graph sizes and KV capacity (sim.Plan's pieces).
type Engine struct {
	Sched  sched.Config
	Async  bool
	Graphs []int
	// Warnings says what was not in the manifest and took a default.
	Warnings []string
}

// EngineOf builds the engine of a dataset from its manifest, falling back to
// sim.DefaultScenario's engine for what is absent (with a warning). The KV
// capacity is the manifest's num_gpu_blocks, else computed from the
// hardware and model shape at the manifest's gpu_memory_utilization (0.9,
// vLLM's default, when not recorded).
func EngineOf(m *datasets.Manifest) (*Engine, error) {
	def := sim.DefaultScenario().Engine
	e := &Engine{Async: def.AsyncScheduling, Graphs: def.CUDAGraphSizes}
	c := sched.Config{MaxNumSeqs: def.MaxNumSeqs, MaxNumBatchedTokens: def.MaxNumBatchedTokens, BlockSize: def.BlockSize,
		MaxModelLen: def.MaxModelLen, ChunkedPrefill: true, PrefixCaching: true}
	if m == nil || m.Engine == nil {
		e.Warnings = append(e.Warnings, "manifest has no engine section: default engine limits (max_num_seqs 256, max_num_batched_tokens 8192, block 16, async)")
	} else {
		me := m.Engine
		set := func(dst *int, v int, name string) {
			if v > 0 {
				*dst = v
			} else {
				e.Warnings = append(e.Warnings, fmt.Sprintf("engine.%s not recorded: default %d", name, *dst))
			}
		}
		set(&c.MaxNumSeqs, me.MaxNumSeqs, "max_num_seqs")
		set(&c.MaxNumBatchedTokens, me.MaxNumBatchedTokens, "max_num_batched_tokens")
		set(&c.BlockSize, me.BlockSize, "block_size")
		set(&c.MaxModelLen, me.MaxModelLen, "max_model_len")
		c.ChunkedPrefill, c.PrefixCaching, c.LongPrefillTokenThreshold = me.ChunkedPrefill, me.PrefixCaching, me.LongPrefillTokenThreshold
		c.NumGPUBlocks = me.NumGPUBlocks
		e.Async = me.AsyncScheduling
	}
	if m != nil && len(m.CUDAGraphSizes) > 0 {
		e.Graphs = m.CUDAGraphSizes
	} else {
		e.Warnings = append(e.Warnings, "cuda_graph_capture_sizes not recorded: vLLM defaults up to 512")
	}
	if c.NumGPUBlocks <= 0 {
		hw, herr := HardwareOf(m)
		sh, _, serr := ShapeOf(m)
		if herr != nil || serr != nil {
			c.NumGPUBlocks = 1 + (c.MaxModelLen/c.BlockSize+1)*c.MaxNumSeqs
			e.Warnings = append(e.Warnings, fmt.Sprintf("num_gpu_blocks not recorded and the KV capacity cannot be computed (%v; %v): %d blocks (no KV pressure)",
				herr, serr, c.NumGPUBlocks))
		} else {
			util := 0.9 // vLLM's default gpu_memory_utilization
			if m.Engine != nil && m.Engine.GPUMemoryUtilization > 0 {
				util = m.Engine.GPUMemoryUtilization
			}
			n, err := model.KVBlocks(hw, sh, c.BlockSize, util)
			if err != nil {
				return nil, fmt.Errorf("engine: %w", err)
			}
			c.NumGPUBlocks = n
			e.Warnings = append(e.Warnings, fmt.Sprintf("num_gpu_blocks not recorded: %d from %s memory and the %s shape at %g utilisation", n, hw.Name, sh.Name, util))
		}
	}
	if kvMax := (c.NumGPUBlocks - 1) * c.BlockSize; c.MaxModelLen > kvMax {
		c.MaxModelLen = kvMax
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.Sched = c
	return e, nil
}

// Trace is a recorded run's requests, loaded once: arrivals for the engine
// and the recorded latencies to compare with.
type Trace struct {
	Dir      string
	Arrivals []workload.Arrival
	Rec      []datasets.Request // same order as Arrivals (by arrival time, then id)
	// Steps is the recorded step composition, when the dataset has steps.
	Steps *Composition
}

// LoadTrace reads a dataset's requests (and its step composition when
// present). Requests without a positive prompt or output length are
// skipped.
func LoadTrace(d *datasets.Dataset) (*Trace, error) {
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
	t := &Trace{Dir: d.Dir}
	for _, r := range rows {
		if r.PromptTokens < 1 || r.OutputTokens < 1 || r.Status == datasets.StatusAborted {
			continue
		}
		t.Arrivals = append(t.Arrivals, workload.Arrival{ID: r.ReqID, AtNs: r.ArrivalNs, PromptTokens: int(r.PromptTokens),
			OutputTokens: int(r.OutputTokens)})
		r.PrefixHashIDs = nil
		t.Rec = append(t.Rec, r)
	}
	if len(t.Arrivals) == 0 {
		return nil, fmt.Errorf("%s: no requests with prompt and output lengths to replay", d.Dir)
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

// Window returns the trace restricted to requests [lo, hi) by arrival order.
func (t *Trace) Window(lo, hi int) *Trace {
	return &Trace{Dir: t.Dir, Arrivals: t.Arrivals[lo:hi], Rec: t.Rec[lo:hi]}
}

type sliceSource struct {
	a []workload.Arrival
	i int
}

func (s *sliceSource) NextAt() (int64, workload.Status) {
	if s.i < len(s.a) {
		return s.a[s.i].AtNs, workload.Ready
	}
	return 0, workload.Exhausted
}

func (s *sliceSource) Next() (workload.Arrival, bool) {
	if s.i < len(s.a) {
		s.i++
		return s.a[s.i-1], true
	}
	return workload.Arrival{}, false
}

func (s *sliceSource) Err() error { return nil }

// Composition is the step composition of a run.
type Composition struct {
	Steps         int64            `json:"steps"`
	StepsByKind   map[string]int64 `json:"steps_by_kind"`
	MeanBatchSize float64          `json:"mean_batch_size"`
	MeanTokens    float64          `json:"mean_tokens_per_step"`
	Preemptions   int64            `json:"preemptions"`
	sumB, sumT    float64
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

// Simulate re-simulates the trace's arrivals on the engine with the FPM and
// host model and returns the simulated requests by id and the step
// composition.
func Simulate(t *Trace, e *Engine, fpm model.FPM, host model.HostModel) (map[string]datasets.Request, *Composition, error) {
	return simulate(t, e, fpm, host, nil)
}

// simulate is Simulate with a function called after every step.
func simulate(t *Trace, e *Engine, fpm model.FPM, host model.HostModel, onStep func(*datasets.Step)) (map[string]datasets.Request, *Composition, error) {
	sink := &simSink{reqs: make(map[string]datasets.Request, len(t.Arrivals)), onStep: onStep}
	exec := sim.NewSimExecutor(fpm, model.DefaultPayloadModel(), host, e.Graphs)
	eng, err := sim.NewEngine(sim.EngineConfig{Sched: e.Sched, Async: e.Async, WorkerID: "replay-0"}, exec, &sim.VirtualClock{},
		sim.HostAdapter{M: host}, sink)
	if err != nil {
		return nil, nil, err
	}
	if _, err := sim.Drive(eng, &sliceSource{a: t.Arrivals}); err != nil {
		return nil, nil, err
	}
	if err := eng.Finish(eng.Now()); err != nil {
		return nil, nil, err
	}
	sink.comp.finish()
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

// RequestRow is one row of a request replay's requests.parquet. For each of
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
	return Dist{N: len(s), Mean: sum / float64(len(s)) / 1e6, P50: model.SortedQuantile(s, 0.5) / 1e6,
		P90: model.SortedQuantile(s, 0.9) / 1e6, P99: model.SortedQuantile(s, 0.99) / 1e6}
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
	// Steps compares the step composition where the record has steps.
	RecordedSteps  *Composition `json:"recorded_steps,omitempty"`
	SimulatedSteps *Composition `json:"simulated_steps"`
	// EngineCurves compares the engine's state over time where the record
	// has engine samples (see CurveSummary).
	EngineCurves *CurveSummary `json:"engine_curves,omitempty"`
	Warnings     []string      `json:"warnings,omitempty"`
}

// EngineSummary is the engine a replay ran.
type EngineSummary struct {
	MaxNumSeqs          int  `json:"max_num_seqs"`
	MaxNumBatchedTokens int  `json:"max_num_batched_tokens"`
	BlockSize           int  `json:"block_size"`
	NumGPUBlocks        int  `json:"num_gpu_blocks"`
	MaxModelLen         int  `json:"max_model_len"`
	ChunkedPrefill      bool `json:"chunked_prefill"`
	PrefixCaching       bool `json:"prefix_caching"`
	Async               bool `json:"async_scheduling"`
	CUDAGraphs          int  `json:"cuda_graph_sizes"`
}

func engineSummary(e *Engine) EngineSummary {
	c := e.Sched
	return EngineSummary{MaxNumSeqs: c.MaxNumSeqs, MaxNumBatchedTokens: c.MaxNumBatchedTokens, BlockSize: c.BlockSize,
		NumGPUBlocks: c.NumGPUBlocks, MaxModelLen: c.MaxModelLen, ChunkedPrefill: c.ChunkedPrefill, PrefixCaching: c.PrefixCaching,
		Async: e.Async, CUDAGraphs: len(e.Graphs)}
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
			RecStatus: r.Status, PredStatus: "missing"}
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
	FPM  model.FPM
	Host model.HostModel
	// Engine overrides the manifest's engine.
	Engine *Engine
}

// RunRequests re-simulates the dataset's requests and writes
// out/requests.parquet and out/summary.json; where the record has engine
// samples, also out/engine_samples.parquet and the engine.* figures.
func RunRequests(d *datasets.Dataset, opts RequestOptions, out Output) (*RequestSummary, error) {
	t, err := LoadTrace(d)
	if err != nil {
		return nil, err
	}
	e := opts.Engine
	if e == nil {
		if e, err = EngineOf(d.Manifest); err != nil {
			return nil, err
		}
	}
	curves, err := newCurveRecorder(d)
	if err != nil {
		return nil, err
	}
	simReqs, comp, err := simulate(t, e, opts.FPM, opts.Host, curves.stepHook())
	if err != nil {
		return nil, err
	}
	w, err := out.create("requests")
	if err != nil {
		return nil, err
	}
	tw, err := datasets.NewTableWriter[RequestRow](w, datasets.TableRequests, datasets.DefaultTableOptions)
	if err != nil {
		return nil, err
	}
	var buf []RequestRow
	sum, err := CompareRequests(t.Rec, simReqs, func(r *RequestRow) error { buf = append(buf, *r); return nil })
	if err == nil {
		sum.EngineCurves, err = curves.writeCurves(w)
	}
	if err := finishTable(w, tw, buf, err); err != nil {
		return nil, err
	}
	sum.Dataset, sum.Model = out.DatasetDir, out.ModelName
	sum.Engine = engineSummary(e)
	sum.Warnings = append(sum.Warnings, e.Warnings...)
	sum.RecordedSteps, sum.SimulatedSteps = t.Steps, comp
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

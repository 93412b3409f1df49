package sim

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/sim/sched"
	"github.com/steplab/steplab/sim/workload"
)

// RunOptions tune Run.
type RunOptions struct {
	// Overwrite replaces an existing dataset at the output directory.
	Overwrite bool
	// Command is recorded in the manifest.
	Command []string
	// Progress, when set, is called with the number of requests finished.
	Progress func(done int64)
	// Stop, when closed, ends the run early with ErrInterrupted; the
	// dataset is left partial with every row recorded until then.
	Stop <-chan struct{}
}

// Result is what a simulation run reports.
type Result struct {
	Dataset string `json:"dataset"`
	Report
	// Interval, when the caller asked for it (Bounds), is the latencies at
	// the edges of the FPM's prediction interval.
	Interval *LatencyInterval `json:"interval,omitempty"`
	// PrefixCacheHitRate is the share of admitted prompt tokens found in
	// the prefix cache.
	PrefixCacheHitRate float64 `json:"prefix_cache_hit_rate"`
	// Service is a cluster run's GPU time and service level, when its
	// scenario states an slo or autoscales a pool.
	Service *Service `json:"service,omitempty"`
	// ExtrapolatedOps counts the operations the FPM priced past its
	// measured range, summed over the engines (Stats.ExtrapolatedOps).
	ExtrapolatedOps int64 `json:"extrapolated_ops"`
	Engine          Stats `json:"-"`
}

// ExtrapolatedNote is the manifest note of a run whose FPM priced n
// operations past its measured range ("" when none).
func ExtrapolatedNote(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("extrapolated_ops: %d operation lookups priced past the FPM's measured range (the ops prior's kernel tables): those step times rest on its speed-of-light scaling", n)
}

// Service is what a run held of its GPUs and how many requests met the
// objective.
type Service struct {
	// GPUHours is every engine × its GPUs over the time it held them (a
	// fixed pool: from 0 to the last engine's end).
	GPUHours float64 `json:"gpu_hours"`
	// SLO, when stated: the share of requests that finished within it.
	SLO *SLOAttainment `json:"slo,omitempty"`
	// Autoscaled is each autoscaled pool's replicas over time.
	Autoscaled []datasets.PoolScaling `json:"autoscaled,omitempty"`
}

// SLOAttainment is the requests that met a TTFT and mean inter-token
// latency objective (0: none on that metric), of all requests measured.
type SLOAttainment struct {
	TTFTMs     float64 `json:"ttft_ms"`
	ITLMs      float64 `json:"itl_ms"`
	Met        int64   `json:"met"`
	Requests   int64   `json:"requests"`
	Attainment float64 `json:"attainment"`
}

// Job is one run's input and record: the workload's arrivals (Source)
// or, when Source is nil, a self-benchmark grid (Bench) run point by
// point; the dataset's manifest, and whether it holds step_requests.
// Package scenario makes it from a scenario's workload and output blocks.
type Job struct {
	Source       workload.Peeker
	Bench        Bench
	Manifest     datasets.Manifest
	StepRequests bool
}

// Bench is a self-benchmark grid and the idle time between its points.
type Bench struct {
	Grid  workload.GridConfig
	GapNs int64
}

// Backend is what runs the steps: the plan's simulated executor on a
// virtual clock (the zero Backend), or a real worker on the wall clock
// (package capture).
type Backend struct {
	Exec  Executor
	Clock Clock
	Host  HostCosts // nil for a real executor
	// WorkerID names the worker in the steps table; DPRank is its rank in
	// a data-parallel group.
	WorkerID string
	DPRank   int32
	// CheckpointSteps closes the open parts every so many steps, so an
	// interrupted run keeps what it measured (0: only at the end).
	CheckpointSteps int
	// Manifest, when set, amends the manifest before writing (a capture adds
	// its hardware).
	Manifest func(*datasets.Manifest)
	// Started and Stopping bracket the run: a capture samples the GPU into
	// another table of the dataset in between.
	Started  func(*datasets.Writer) error
	Stopping func() error
}

// Execute runs the job on the plan's engine and the backend and writes
// the dataset to dir (steps, step_requests when the job asks, requests).
// The same plan and job give a byte-identical dataset; on failure the
// dataset is left partial with every completed part.
func Execute(p *Plan, job Job, dir string, b Backend, opts RunOptions) (*Result, error) {
	m := job.Manifest
	if b.Manifest != nil {
		b.Manifest(&m)
	}
	return WriteDataset(dir, m, opts.Overwrite, func(w *datasets.Writer) (*Result, error) {
		if b.Started != nil {
			if err := b.Started(w); err != nil {
				return nil, err
			}
		}
		res, err := runInto(p, w, job, b, opts)
		if b.Stopping != nil {
			if serr := b.Stopping(); err == nil && serr != nil {
				err = serr
			}
		}
		return res, err
	})
}

// WriteDataset creates the dataset at dir, fills it and closes it; when
// fill fails the dataset is left partial (aborted with the error) with
// every part completed so far. The parts are encoded on the processors
// the engine leaves (datasets.EncodersFor of GOMAXPROCS); the dataset is
// the same on any number.
func WriteDataset(dir string, m datasets.Manifest, overwrite bool, fill func(*datasets.Writer) (*Result, error)) (*Result, error) {
	w, err := datasets.Create(dir, m, datasets.CreateOptions{Overwrite: overwrite, Encoders: datasets.EncodersFor(runtime.GOMAXPROCS(0))})
	if err != nil {
		return nil, err
	}
	res, err := fill(w)
	if err == nil && (len(res.Overload) > 0 || res.ExtrapolatedOps > 0) {
		err = w.UpdateManifest(func(m *datasets.Manifest) {
			for _, n := range res.Overload {
				m.Notes = append(m.Notes, "overloaded: "+n)
			}
			if n := ExtrapolatedNote(res.ExtrapolatedOps); n != "" {
				m.Notes = append(m.Notes, n)
			}
		})
	}
	if err != nil {
		_ = w.Abort(err.Error())
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	res.Dataset = dir
	return res, nil
}

func runInto(p *Plan, w *datasets.Writer, job Job, b Backend, opts RunOptions) (*Result, error) {
	sink, err := NewDatasetSink(w, job.StepRequests)
	if err != nil {
		return nil, err
	}
	sink.CheckpointSteps = b.CheckpointSteps
	metrics := NewRunMetrics()
	var out Sink = Tee{sink, metrics}
	if opts.Progress != nil {
		out = Tee{sink, metrics, NewProgressSink(opts.Progress)}
	}
	eng, err := p.NewEngine(b, out)
	if err != nil {
		return nil, err
	}
	err = runEngine(eng, job, opts.Stop)
	if cerr := sink.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	st := eng.Stats()
	return &Result{Report: metrics.Report(), Engine: st, PrefixCacheHitRate: st.PrefixHitRate(), ExtrapolatedOps: st.ExtrapolatedOps}, nil
}

// runEngine drives the engine through the workload (or the benchmark
// grid) until it ends or stop closes, then records every live request as
// unfinished: after a failure too, what was measured stays, and the
// step_requests rows of the last steps name requests the requests table
// has.
func runEngine(eng *Engine, job Job, stop <-chan struct{}) error {
	var err error
	if job.Source != nil {
		_, err = DriveUntil(eng, job.Source, stop)
	} else {
		err = RunBenchmark(eng, job.Bench, stop)
	}
	if ferr := eng.Finish(eng.Now()); err == nil {
		err = ferr
	}
	return err
}

// LatencyInterval is what a plan's latencies become when every step takes
// the lower, or the upper, edge of its FPM's prediction interval: the
// workload re-simulated twice (Bounds). Each statistic's Lo and Hi are the
// lesser and greater of the two runs'.
type LatencyInterval struct {
	Level  float64 `json:"level"`
	Method string  `json:"method"`
	TTFT   Bounded `json:"ttft"`
	ITL    Bounded `json:"itl"`
	E2E    Bounded `json:"e2e"`
}

// Bounded is a latency summary at the two edges of an interval.
type Bounded struct {
	Lo Summary `json:"lo"`
	Hi Summary `json:"hi"`
}

func bounded(a, b Summary) Bounded {
	lo := Summary{Count: min(a.Count, b.Count), Mean: min(a.Mean, b.Mean), P50: min(a.P50, b.P50), P90: min(a.P90, b.P90),
		P99: min(a.P99, b.P99), Max: min(a.Max, b.Max)}
	hi := Summary{Count: max(a.Count, b.Count), Mean: max(a.Mean, b.Mean), P50: max(a.P50, b.P50), P90: max(a.P90, b.P90),
		P99: max(a.P99, b.P99), Max: max(a.Max, b.Max)}
	return Bounded{Lo: lo, Hi: hi}
}

// BoundsMethod says how Bounds propagates an interval.
const BoundsMethod = "re-simulated with every step at the lower and at the upper edge of its interval"

// Bounds re-simulates the plan's workload with every step at the lower
// edge of its FPM's interval at level, then at the upper edge
// (fpm.Bound), writing nothing, and returns the latencies of both; open
// makes each run's job afresh (and what to clean up after it). The two
// runs are deterministic. They bound the systematic error of the model,
// which compounds through queueing; independent per-step draws would
// average it away. The plan's FPM must be a fpm.IntervalFPM.
func Bounds(p *Plan, level float64, open func() (Job, func(), error)) (*LatencyInterval, error) {
	im, ok := p.FPM.(fpm.IntervalFPM)
	if !ok || fpm.NoUncertainty(p.FPM, p.FPMName) != "" {
		return nil, fmt.Errorf("bounds: fpm %s has no prediction intervals", p.FPMName)
	}
	return BoundsOf(level, func(upper bool) (Report, error) {
		job, cleanup, err := open()
		if err != nil {
			return Report{}, err
		}
		defer cleanup()
		metrics := NewRunMetrics()
		edge := *p
		edge.FPM = fpm.Bound{M: im, Level: level, Upper: upper}
		eng, err := edge.NewEngine(Backend{}, metrics)
		if err == nil {
			err = runEngine(eng, job, nil)
		}
		return metrics.Report(), err
	})
}

// BoundsOf is Bounds for any simulation: run re-simulates with every step
// at the lower (upper false) or the upper edge of its interval and
// reports the run; the interval pairs the two runs' statistics.
func BoundsOf(level float64, run func(upper bool) (Report, error)) (*LatencyInterval, error) {
	var reps [2]Report
	for i := range reps {
		r, err := run(i == 1)
		if err != nil {
			return nil, fmt.Errorf("bounds: %w", err)
		}
		reps[i] = r
	}
	return &LatencyInterval{Level: level, Method: BoundsMethod, TTFT: bounded(reps[0].TTFT, reps[1].TTFT),
		ITL: bounded(reps[0].ITL, reps[1].ITL), E2E: bounded(reps[0].E2E, reps[1].E2E)}, nil
}

// NewProgressSink is a sink that calls f with the number of requests
// finished, every 512.
func NewProgressSink(f func(done int64)) Sink { return &progressSink{f: f} }

type progressSink struct {
	f    func(int64)
	done int64
}

func (p *progressSink) Step(*datasets.Step, []datasets.StepRequest) error { return nil }

func (p *progressSink) Request(*datasets.Request) error {
	p.done++
	if p.done%512 == 0 {
		p.f(p.done)
	}
	return nil
}

// asDecode records the decode requests of a benchmark step at their
// coordinate: each computes one token over its KV context. On the
// admission step those requests are new, so vLLM's classification (and
// Dynamo's FPM) would call them prefill; the benchmark point is a decode
// point whichever step measures it, as Dynamo's artifact records it. The
// new-request and payload columns still show that the step admitted them.
// isDecode says which rows are the point's decodes (a mixed point's chunk
// stays prefill).
func asDecode(s *datasets.Step, rows []datasets.StepRequest, isDecode func(*datasets.StepRequest) bool) {
	if s.NumPrefillRequests == 0 {
		return
	}
	var b features.Batch
	for i := range rows {
		if isDecode(&rows[i]) {
			rows[i].IsPrefill = false
		}
		b.Add(&rows[i])
	}
	shipped := s.NewReqTokens // the admission still shipped them in full
	b.Fill(s)
	s.NewReqTokens = shipped
	s.Kind = features.Of(s).Kind()
}

// RunBenchmark runs a self-benchmark grid on the engine, one point at a
// time with the engine idle for the gap in between (1 ms when none),
// tagging each step: the step the policy measures is "measured", the
// others "scaffolding". It ends with ErrInterrupted once stop is closed
// (nil never closes).
func RunBenchmark(e *Engine, b Bench, stop <-chan struct{}) error {
	points, err := workload.BuildGrid(b.Grid)
	if err != nil {
		return fmt.Errorf("benchmark: %w", err)
	}
	gap := b.GapNs
	if gap <= 0 {
		gap = 1_000_000
	}
	var cur *workload.Point
	var ordinal int
	var replica bool
	isDecode := func(r *datasets.StepRequest) bool { return !strings.HasSuffix(r.ReqID, workload.ChunkID) }
	e.Tag = func(s *datasets.Step, rows []datasets.StepRequest, _ *sched.Output) {
		s.Role = datasets.RoleScaffolding
		s.BenchmarkID = cur.BenchmarkID
		s.SampleReason = strings.Join(cur.SampleReasons, ",")
		switch {
		case cur.Warmup:
			s.SampleReason = workload.ReasonWarmup
		case replica:
			s.SampleReason = "eager_warmup"
		case ordinal == cur.Plan.MeasuredStep:
			s.Role = datasets.RoleMeasured
		}
		if cur.Type != workload.PointPrefill {
			asDecode(s, rows, isDecode)
		}
		ordinal++
	}
	defer func() { e.Tag = nil }()
	t := e.Now()
	for i := range points {
		select {
		case <-stop:
			return ErrInterrupted
		default:
		}
		cur = &points[i]
		runs := 1
		if cur.EagerWarmup {
			runs = 2
		}
		for r := 0; r < runs; r++ {
			replica = r < runs-1
			ordinal = 0
			prefix := fmt.Sprintf("bench-%d-%d-", i, r)
			arr := cur.Arrivals(prefix, t)
			late := arr[len(arr)-cur.Plan.Deferred:]
			for _, a := range arr[:len(arr)-cur.Plan.Deferred] {
				if err := e.Add(a); err != nil {
					return err
				}
			}
			first := e.Scheduled()
			for {
				w, err := e.Run(t)
				if err != nil {
					return err
				}
				if len(late) > 0 && e.Scheduled() > first {
					// The first step is scheduled: the deferred requests
					// join the next one.
					for _, a := range late {
						a.AtNs = e.Now()
						if err := e.Add(a); err != nil {
							return err
						}
					}
					late = nil
				}
				if w == NoWake {
					break
				}
				t = w
			}
			if e.Busy() {
				return fmt.Errorf("benchmark point %d (%s, B=%d) could not run: the engine cannot schedule its requests (KV blocks or budget too small)",
					cur.BenchmarkID, cur.Type, cur.BatchSize)
			}
			t = e.Now() + gap
		}
	}
	return nil
}

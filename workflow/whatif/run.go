package whatif

import (
	"fmt"
	"math"
	"slices"

	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/internal/pool"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/rng"
	"github.com/steplab/steplab/workflow"
)

// Options tune Run.
type Options struct {
	// Jobs is the number of runs simulated at once (0 = GOMAXPROCS). The
	// results do not depend on it.
	Jobs int
	// Progress, when set, is called after each finished run with the
	// number done and the total (from one goroutine at a time).
	Progress func(done, total int)
	// Level is the coverage of the prediction intervals of engine FPMs
	// that have them (0: the model's own, fpm.LevelOf; negative: none).
	// With one, every run is repeated with each engine step at the lower
	// and at the upper edge of its interval, and the audit's latencies get
	// an interval (PlacementAudit.Interval).
	Level float64
}

// RunResult is one repetition of one placement.
type RunResult struct {
	Placement string
	Rep       int
	// Seed of the repetition's stream (provenance).
	Seed   uint64
	Result *workflow.Result
}

// Output is what Run produced.
type Output struct {
	Scenario *Scenario
	Runs     []RunResult // placement-major, then repetition
	Audit    Audit
}

// RepStream is the random stream of repetition rep: every placement of a
// repetition draws the same arrivals, lengths and service times (common
// random numbers), so placements differ only by placement.
func RepStream(seed uint64, rep int) *rng.Stream {
	return rng.New(seed, "whatif").DeriveN(rep)
}

// Run simulates every placement × repetition, each on a fresh server.
func Run(sc *Scenario, opts Options) (*Output, error) {
	runs, err := runAll(sc, sc.Placements, opts)
	if err != nil {
		return nil, err
	}
	out := &Output{Scenario: sc, Runs: runs}
	out.Audit = audit(sc, runs)
	level := intervalLevel(sc, opts.Level)
	if level <= 0 {
		if opts.Level >= 0 {
			out.Audit.NoUncertainty = noUncertainty(sc)
		}
		return out, nil
	}
	var edges [2]Audit
	for i := range edges {
		pls := make([]Placement, len(sc.Placements))
		for k, pl := range sc.Placements {
			g, err := boundGraph(pl.Graph, level, i == 1)
			if err != nil {
				return nil, fmt.Errorf("placement %s: %w", pl.Name, err)
			}
			pls[k] = Placement{Name: pl.Name, Graph: g}
		}
		r, err := runAll(sc, pls, Options{Jobs: opts.Jobs})
		if err != nil {
			return nil, fmt.Errorf("interval edge: %w", err)
		}
		edges[i] = audit(sc, r)
	}
	out.Audit.IntervalLevel, out.Audit.IntervalMethod = level, sim.BoundsMethod
	for k := range out.Audit.Placements {
		lo, hi := &edges[0].Placements[k], &edges[1].Placements[k]
		pi := &PlacementInterval{E2E: latencyBounds(lo.E2E, hi.E2E)}
		for j := range lo.Stages {
			pi.Stages = append(pi.Stages, StageBounds{Stage: lo.Stages[j].Stage, LatencyBounds: latencyBounds(lo.Stages[j].Latency, hi.Stages[j].Latency)})
		}
		out.Audit.Placements[k].Interval = pi
	}
	return out, nil
}

// runAll simulates every placement × repetition of pls.
func runAll(sc *Scenario, pls []Placement, opts Options) ([]RunResult, error) {
	reps := sc.File.Load.Repetitions
	type job struct{ p, r int }
	var jobs []job
	for p := range pls {
		for r := 0; r < reps; r++ {
			jobs = append(jobs, job{p, r})
		}
	}
	runs := make([]RunResult, len(jobs))
	err := pool.Run(len(jobs), opts.Jobs, func(k int) error {
		j := jobs[k]
		pl := pls[j.p]
		st := RepStream(sc.File.Seed, j.r)
		res, err := workflow.Run(pl.Graph, sc.Load, st)
		runs[k] = RunResult{Placement: pl.Name, Rep: j.r, Seed: st.Seed(), Result: res}
		if err != nil {
			return fmt.Errorf("placement %s, repetition %d: %w", pl.Name, j.r, err)
		}
		return nil
	}, opts.Progress)
	return runs, err
}

// intervalLevel is the interval coverage the scenario's engines are
// re-simulated at: that of the first engine FPM with intervals (0: none).
func intervalLevel(sc *Scenario, requested float64) float64 {
	for _, pl := range sc.Placements {
		for _, st := range pl.Graph.Stages {
			if st.Engine != nil {
				if l := st.Engine.IntervalLevel(requested); l > 0 {
					return l
				}
			}
		}
	}
	return 0
}

// noUncertainty says why the first engine of the scenario has no
// latency interval (fpm.NoUncertainty; "" without an engine).
func noUncertainty(sc *Scenario) string {
	for _, pl := range sc.Placements {
		for _, st := range pl.Graph.Stages {
			if st.Engine != nil {
				e := st.Engine.Pools[0].Engine
				return fpm.NoUncertainty(e.FPM, e.FPMName)
			}
		}
	}
	return ""
}

// boundGraph is g with every engine stage whose FPM has intervals pricing
// its steps at one edge of the interval (cluster.Plan.Bound).
func boundGraph(g *workflow.Graph, level float64, upper bool) (*workflow.Graph, error) {
	out := &workflow.Graph{Network: g.Network, Stages: slices.Clone(g.Stages)}
	for i := range out.Stages {
		e := out.Stages[i].Engine
		if e == nil || e.IntervalLevel(level) == 0 {
			continue
		}
		b, err := e.Bound(level, upper)
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", out.Stages[i].Name, err)
		}
		out.Stages[i].Engine = b
	}
	return out, nil
}

// PlacementInterval is a placement's latencies when every engine step
// takes the lower, or the upper, edge of its prediction interval.
type PlacementInterval struct {
	E2E    LatencyBounds `json:"e2e"`
	Stages []StageBounds `json:"stages"`
}

// LatencyBounds is a latency at the two edges of an interval: each
// statistic's lesser and greater over the two re-simulations.
type LatencyBounds struct {
	Lo Latency `json:"lo"`
	Hi Latency `json:"hi"`
}

// StageBounds is a stage's LatencyBounds.
type StageBounds struct {
	Stage string `json:"stage"`
	LatencyBounds
}

func latencyBounds(a, b Latency) LatencyBounds {
	return LatencyBounds{
		Lo: Latency{N: min(a.N, b.N), MeanMs: min(a.MeanMs, b.MeanMs), P50Ms: min(a.P50Ms, b.P50Ms), P90Ms: min(a.P90Ms, b.P90Ms),
			P99Ms: min(a.P99Ms, b.P99Ms), MaxMs: min(a.MaxMs, b.MaxMs)},
		Hi: Latency{N: max(a.N, b.N), MeanMs: max(a.MeanMs, b.MeanMs), P50Ms: max(a.P50Ms, b.P50Ms), P90Ms: max(a.P90Ms, b.P90Ms),
			P99Ms: max(a.P99Ms, b.P99Ms), MaxMs: max(a.MaxMs, b.MaxMs)},
	}
}

// Audit is the qualification table.
type Audit struct {
	Scenario    string  `json:"scenario"`
	Seed        uint64  `json:"seed"`
	Load        string  `json:"load"`
	OfferedRPS  float64 `json:"offered_rps"` // 0 for a closed loop
	Users       int     `json:"users,omitempty"`
	Requests    int     `json:"measured_requests"`
	Warmup      int     `json:"warmup_requests"`
	Repetitions int     `json:"repetitions"`
	StartupS    float64 `json:"startup_s"`
	DrainS      float64 `json:"drain_s"`
	TimeoutS    float64 `json:"timeout_s"`
	// SLO is the scenario's objective; goodput counts requests meeting it.
	SLO *SLOSpec `json:"slo,omitempty"`
	// GPUs is the GPUs of the engine stages (the same in every placement).
	GPUs int `json:"gpus,omitempty"`
	// Stages in document order (latency tables follow it).
	Stages     []string         `json:"stages"`
	Placements []PlacementAudit `json:"placements"`
	// IntervalLevel and IntervalMethod describe the placements' latency
	// intervals (engines whose FPM has prediction intervals; 0 without).
	IntervalLevel  float64 `json:"interval_level,omitempty"`
	IntervalMethod string  `json:"interval_method,omitempty"`
	// NoUncertainty, without an interval, says why the latencies carry
	// none: a zero-width interval is never reported as one.
	NoUncertainty string `json:"no_uncertainty,omitempty"`
}

// PlacementAudit summarises a placement's repetitions.
type PlacementAudit struct {
	Placement string     `json:"placement"`
	Runs      []RunAudit `json:"runs"`
	// WindowMeanRPS is the mean request-window throughput over repetitions.
	WindowMeanRPS float64 `json:"window_mean_rps"`
	// AchievedOverOffered is WindowMeanRPS / offered rate (open loop).
	AchievedOverOffered float64 `json:"achieved_over_offered"`
	// FullProcessMeanRPS is the mean of the runs' full-process throughput;
	// FullProcessFromMeanWallRPS is mean valid requests / mean process wall.
	FullProcessMeanRPS         float64 `json:"full_process_mean_rps"`
	FullProcessFromMeanWallRPS float64 `json:"full_process_from_mean_wall_rps"`
	// WindowDeltaPct is the change of WindowMeanRPS against the first
	// placement, percent (0 for the first).
	WindowDeltaPct float64 `json:"window_delta_vs_first_pct"`
	// GoodputMeanRPS is the mean of the runs' goodput, and GoodputPerGPU
	// it over the engine stages' GPUs: nil (JSON null) without an SLO,
	// where goodput means nothing, so that 0 only ever says none met it.
	GoodputMeanRPS *float64 `json:"goodput_mean_rps"`
	GoodputPerGPU  *float64 `json:"goodput_per_gpu_rps"`
	Valid          int      `json:"valid"`
	Errors         int      `json:"errors"`
	Cancelled      int      `json:"cancelled"`
	// Latencies of the valid measured requests of all repetitions.
	E2E    Latency        `json:"e2e"`
	Stages []StageLatency `json:"stages"`
	// Interval is the latencies at the edges of the engines' prediction
	// intervals (Options.Level).
	Interval *PlacementInterval `json:"interval,omitempty"`
}

// RunAudit is one repetition.
type RunAudit struct {
	Rep  int    `json:"rep"`
	Seed uint64 `json:"seed"`
	// Measured requests sent; Valid answered; Errors rejected or never
	// answered; Cancelled timed out at the client.
	Measured  int `json:"measured"`
	Valid     int `json:"valid"`
	Errors    int `json:"errors"`
	Cancelled int `json:"cancelled"`
	// The request window: first measured request sent to last measured
	// response received (valid requests), and its throughput.
	FirstRequestNs int64   `json:"first_request_ns"`
	LastResponseNs int64   `json:"last_response_ns"`
	WindowRPS      float64 `json:"window_rps"`
	// Goodput is the valid measured requests meeting the SLO (TTFT from
	// the client's send to the first engine stage's first token; ITL
	// (finish − first token)/(outputs − 1) there), GoodputRPS them over
	// the request window.
	Goodput    int     `json:"goodput,omitempty"`
	GoodputRPS float64 `json:"goodput_rps,omitempty"`
	// ProcessWallNs: process start (0) to the end of the drain;
	// FullProcessRPS = Valid / wall.
	ProcessWallNs  int64          `json:"process_wall_ns"`
	FullProcessRPS float64        `json:"full_process_rps"`
	E2E            Latency        `json:"e2e"`
	Stages         []StageLatency `json:"stages"`
	Events         uint64         `json:"events"`
}

// Latency summarises durations in ms.
type Latency struct {
	N      int     `json:"n"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// StageLatency is a stage's latency: from its input's arrival (the last
// input for a join) to the end of its work, queueing included.
type StageLatency struct {
	Stage string `json:"stage"`
	Latency
}

func summarize(ns []int64) Latency {
	if len(ns) == 0 {
		return Latency{}
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	sum := 0.0
	for _, v := range s {
		sum += float64(v)
	}
	q := func(p float64) float64 { // nearest rank
		k := int(math.Ceil(p*float64(len(s)))) - 1
		return float64(s[max(0, min(k, len(s)-1))]) / 1e6
	}
	return Latency{N: len(s), MeanMs: round(sum/float64(len(s))/1e6, 6), P50Ms: q(0.5), P90Ms: q(0.9), P99Ms: q(0.99),
		MaxMs: float64(s[len(s)-1]) / 1e6}
}

// round keeps JSON output short and stable.
func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

type lat struct {
	e2e    []int64
	stages [][]int64
}

func (l *lat) add(q *workflow.Request) {
	l.e2e = append(l.e2e, q.E2ENs())
	for i, st := range q.Stages {
		if d := st.LatencyNs(); d >= 0 {
			l.stages[i] = append(l.stages[i], d)
		}
	}
}

func (l *lat) summary(names []string) (Latency, []StageLatency) {
	out := make([]StageLatency, len(names))
	for i, n := range names {
		out[i] = StageLatency{Stage: n, Latency: summarize(l.stages[i])}
	}
	return summarize(l.e2e), out
}

func audit(sc *Scenario, runs []RunResult) Audit {
	l := sc.File.Load
	a := Audit{Scenario: sc.File.Name, Seed: sc.File.Seed, Load: l.Kind, OfferedRPS: sc.Offered(), Requests: l.Requests,
		Warmup: l.Warmup, Repetitions: l.Repetitions, StartupS: l.StartupS, DrainS: l.DrainS, TimeoutS: l.TimeoutS,
		Stages: sc.StageNames, GPUs: sc.GPUs()}
	slo := sc.File.SLO
	if slo.TTFTMs > 0 || slo.ITLMs > 0 {
		a.SLO = &slo
	}
	engine := -1
	if len(sc.Placements) > 0 {
		for i := range sc.Placements[0].Graph.Stages {
			if engine < 0 && sc.Placements[0].Graph.Stages[i].Kind == workflow.KindEngine {
				engine = i
			}
		}
	}
	if l.Kind == workflow.LoadClosed {
		a.Users = l.Users
	}
	names := sc.StageNames
	for _, pl := range sc.Placements {
		pa := PlacementAudit{Placement: pl.Name}
		all := lat{stages: make([][]int64, len(names))}
		var sumWall, sumValid, goodput float64
		for _, r := range runs {
			if r.Placement != pl.Name {
				continue
			}
			ra := RunAudit{Rep: r.Rep, Seed: r.Seed, FirstRequestNs: -1, LastResponseNs: -1, Events: r.Result.Events}
			one := lat{stages: make([][]int64, len(names))}
			for i := range r.Result.Requests {
				q := &r.Result.Requests[i]
				if q.Warmup {
					continue
				}
				ra.Measured++
				switch q.Status {
				case workflow.StatusOK:
					ra.Valid++
					if a.SLO != nil && engine >= 0 && slo.met(q, engine) {
						ra.Goodput++
					}
					if ra.FirstRequestNs < 0 || q.ArrivalNs < ra.FirstRequestNs {
						ra.FirstRequestNs = q.ArrivalNs
					}
					ra.LastResponseNs = max(ra.LastResponseNs, q.ResponseNs)
					one.add(q)
					all.add(q)
				case workflow.StatusTimeout:
					ra.Cancelled++
				default:
					ra.Errors++
				}
			}
			if w := ra.LastResponseNs - ra.FirstRequestNs; ra.Valid > 0 && w > 0 {
				ra.WindowRPS = round(float64(ra.Valid)/(float64(w)/1e9), 6)
				ra.GoodputRPS = round(float64(ra.Goodput)/(float64(w)/1e9), 6)
			}
			ra.ProcessWallNs = r.Result.ProcessEndNs
			if ra.ProcessWallNs > 0 {
				ra.FullProcessRPS = round(float64(ra.Valid)/(float64(ra.ProcessWallNs)/1e9), 6)
			}
			ra.E2E, ra.Stages = one.summary(names)
			pa.Runs = append(pa.Runs, ra)
			pa.Valid += ra.Valid
			pa.Errors += ra.Errors
			pa.Cancelled += ra.Cancelled
			pa.WindowMeanRPS += ra.WindowRPS
			goodput += ra.GoodputRPS
			pa.FullProcessMeanRPS += ra.FullProcessRPS
			sumWall += float64(ra.ProcessWallNs) / 1e9
			sumValid += float64(ra.Valid)
		}
		if k := float64(len(pa.Runs)); k > 0 {
			pa.WindowMeanRPS = round(pa.WindowMeanRPS/k, 6)
			if a.SLO != nil {
				mean := round(goodput/k, 6)
				pa.GoodputMeanRPS = &mean
				if a.GPUs > 0 {
					perGPU := round(mean/float64(a.GPUs), 6)
					pa.GoodputPerGPU = &perGPU
				}
			}
			pa.FullProcessMeanRPS = round(pa.FullProcessMeanRPS/k, 6)
			if sumWall > 0 {
				pa.FullProcessFromMeanWallRPS = round(sumValid/sumWall, 6)
			}
		}
		if a.OfferedRPS > 0 {
			pa.AchievedOverOffered = round(pa.WindowMeanRPS/a.OfferedRPS, 8)
		}
		pa.E2E, pa.Stages = all.summary(names)
		a.Placements = append(a.Placements, pa)
	}
	if len(a.Placements) > 0 && a.Placements[0].WindowMeanRPS > 0 {
		for i := range a.Placements {
			a.Placements[i].WindowDeltaPct = round((a.Placements[i].WindowMeanRPS/a.Placements[0].WindowMeanRPS-1)*100, 6)
		}
	}
	return a
}

// met reports whether request q's latencies at stage e meet the SLO.
func (s SLOSpec) met(q *workflow.Request, e int) bool {
	st := q.Stages[e]
	if st.FirstTokenNs < 0 || st.EndNs < 0 {
		return false
	}
	if s.TTFTMs > 0 && float64(st.FirstTokenNs-q.ArrivalNs) > s.TTFTMs*1e6 {
		return false
	}
	if s.ITLMs > 0 && q.OutputTokens > 1 && float64(st.EndNs-st.FirstTokenNs)/float64(q.OutputTokens-1) > s.ITLMs*1e6 {
		return false
	}
	return true
}

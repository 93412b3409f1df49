package sim

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim/workload"
)

// ErrInterrupted ends a run whose stop channel closed: what ran so far is
// kept (the dataset is left partial with every recorded row).
var ErrInterrupted = errors.New("interrupted")

// RunOptions tune a run (package sim/cluster's Run).
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
// or, when Source is nil, a self-benchmark grid (Bench, its Source run
// point by point); the dataset's manifest, and whether it holds step_requests.
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

// Backend is what runs an engine's steps: the plan's simulated executor
// on a virtual clock (the zero Backend), or a real worker on the wall
// clock (package capture, whose engine package sim/cluster runs as a
// cluster of one).
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

// LatencyInterval is what a plan's latencies become when every step takes
// the lower, or the upper, edge of its FPM's prediction interval: the
// workload re-simulated twice (package sim/cluster's Bounds). Each statistic's Lo and Hi are the
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

// BoundsMethod says how an interval is propagated to the latencies.
const BoundsMethod = "re-simulated with every step at the lower and at the upper edge of its interval"

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

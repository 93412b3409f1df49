package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/embedded"
	"github.com/steplab/steplab/datasets/importers"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/rng"
	"github.com/steplab/steplab/sim/workload"
)

// Source builds the plan's workload; nil for a benchmark grid, which the
// runner injects point by point. The first pool's engine maps a trace's
// prefix hashes to the block size all pools share. cleanup removes
// temporary imports.
func (p *Plan) Source() (src workload.Peeker, inputSHA string, cleanup func(), err error) {
	sc, e := p.Scenario, p.Engine()
	cleanup = func() {}
	switch sc.Workload.Kind {
	case "trace":
		return OpenTrace(sc.Workload, e.Sched.BlockSize, e.Sched.MaxModelLen)
	case "benchmark":
		return nil, "", cleanup, nil
	default:
		s, err := generator(sc)
		return s, "", cleanup, err
	}
}

// OpenTrace opens a trace workload (kind trace: a dataset directory or an
// embedded trace, imported into a temporary directory that cleanup
// removes), its prefix hashes mapped to an engine block of engineBlock
// tokens. inputSHA is the trace's source SHA-256.
func OpenTrace(w WorkloadSpec, engineBlock, maxModelLen int) (src workload.Peeker, inputSHA string, cleanup func(), err error) {
	d, sha, done, err := traceDataset(w.Trace)
	if err != nil {
		return nil, "", func() {}, err
	}
	ts, err := workload.NewTrace(workload.TraceConfig{Dir: d, Limit: w.Limit, RateRPS: w.RateRPS,
		StartNs: int64(w.StartS * 1e9), EndNs: int64(w.EndS * 1e9), Rebase: true, BlockSize: w.BlockSize,
		WarmupRequests: w.Warmup, MaxModelLen: maxModelLen})
	if err != nil {
		done()
		return nil, "", func() {}, err
	}
	return &rehash{TraceSource: ts, engineBlock: engineBlock}, sha, func() { ts.Close(); done() }, nil
}

// traceDataset resolves a trace reference to a dataset directory: a
// directory as it is, or an embedded trace imported into a temporary one.
func traceDataset(ref string) (dir, sha string, cleanup func(), err error) {
	if !strings.HasPrefix(ref, embedded.Prefix) {
		if _, err := datasets.Open(ref); err != nil {
			return "", "", nil, fmt.Errorf("workload.trace: %w", err)
		}
		sha := ""
		if d, _ := datasets.Open(ref); d != nil && d.Manifest != nil {
			sha = d.Manifest.Source.SHA256
		}
		return ref, sha, func() {}, nil
	}
	e, err := embedded.Lookup(ref)
	if err != nil {
		return "", "", nil, fmt.Errorf("workload.trace: %w", err)
	}
	tmp, err := os.MkdirTemp("", "steplab-trace-*")
	if err != nil {
		return "", "", nil, err
	}
	out := filepath.Join(tmp, e.Name)
	res, err := importers.Import(e.Format, ref, out, importers.Options{})
	if err != nil {
		os.RemoveAll(tmp)
		return "", "", nil, err
	}
	return out, res.SHA256, func() { os.RemoveAll(tmp) }, nil
}

// rehash maps a trace's prefix hash chain to the engine's block size.
type rehash struct {
	*workload.TraceSource
	engineBlock int
}

func (r *rehash) Next() (workload.Arrival, bool) {
	a, ok := r.TraceSource.Next()
	if ok && len(a.PrefixHashes) > 0 {
		a.PrefixHashes = workload.EngineBlockHashes(a.PrefixHashes, r.BlockSize(), r.engineBlock, a.PromptTokens, nil)
	}
	return a, ok
}

func generator(sc Scenario) (workload.Peeker, error) {
	w := sc.Workload
	var lengths workload.Lengths
	if w.LengthsFrom != "" {
		e, err := workload.LoadEmpirical(w.LengthsFrom)
		if err != nil {
			return nil, err
		}
		lengths.Joint = e
	} else {
		var err error
		if lengths.Prompt, err = w.Prompt.dist("workload.prompt"); err != nil {
			return nil, err
		}
		if lengths.Output, err = w.Output.dist("workload.output"); err != nil {
			return nil, err
		}
	}
	root := rng.New(sc.Seed, "workload")
	switch w.Kind {
	case "closed":
		think := w.Think
		if think == "" {
			think = "fixed"
		}
		return workload.NewClosedLoop(workload.ClosedLoopConfig{Users: w.Users, Think: think, ThinkNs: int64(w.ThinkS * 1e9),
			Requests: w.Requests, WarmupRequests: w.Warmup, DurationNs: int64(w.DurationS * 1e9), Lengths: lengths, Rand: root})
	default:
		return workload.NewOpenLoop(workload.OpenLoopConfig{Process: w.Kind, RateRPS: w.RateRPS, RateCurve: w.rateCurve(), CV: w.CV, Requests: w.Requests,
			DurationNs: int64(w.DurationS * 1e9), WarmupRequests: w.Warmup, Lengths: lengths, Rand: root})
	}
}

// Bench is the scenario's benchmark grid over the limits of the plan's
// engine, and the idle time between its points.
func (p *Plan) Bench() sim.Bench {
	b, e := p.Scenario.Workload.Benchmark, p.Engine()
	g := workload.GridConfig{Mode: b.Mode, Policy: b.Policy, DecodeBatchSizes: b.DecodeBatchSizes, DecodeContexts: b.DecodeContexts,
		PrefillTokens: b.PrefillTokens, PrefillBatchSizes: b.PrefillBatchSizes, Warmups: 5,
		MaxModelLen: e.Sched.MaxModelLen, MaxNumSeqs: e.Sched.MaxNumSeqs, MaxNumBatchedTokens: e.Sched.MaxNumBatchedTokens,
		BlockSize: e.Sched.BlockSize, NumGPUBlocks: e.Sched.NumGPUBlocks - 1, CaptureSizes: e.Graphs} // block 0 is the null block
	if b.Warmups != nil {
		g.Warmups = *b.Warmups
	}
	g.Ragged = workload.RaggedPoints{BatchSizes: b.RaggedBatchSizes, Contexts: b.RaggedContexts}
	for _, s := range b.RaggedSpreads {
		g.Ragged.Spreads = append(g.Ragged.Spreads, workload.Spread{Shape: s.Shape, MaxRatio: s.MaxRatio})
	}
	g.Mixed = workload.MixedPoints{PrefillTokens: b.MixedPrefillTokens, PrefillContexts: b.MixedPrefillContexts,
		DecodeBatchSizes: b.MixedDecodeBatchSizes, DecodeContexts: b.MixedDecodeContexts}
	if g.Policy == "" {
		g.Policy = workload.PolicySteadyStateSecondStep
	}
	return sim.Bench{Grid: g, GapNs: int64(b.GapS * 1e9)}
}

package sweep

import (
	"fmt"
	"path/filepath"

	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/planner"
	"github.com/steplab/steplab/replay"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/workflow/whatif"
)

// Sweep kinds: what a point runs.
const (
	// KindWhatif points run a what-if scenario (steplab whatif).
	KindWhatif = "whatif"
	// KindSimulate points run a simulate scenario, with its cluster
	// (steplab simulate, reporting without writing a dataset).
	KindSimulate = "simulate"
	// KindCalibrate points run a calibration (steplab calibrate).
	KindCalibrate = "calibrate"
	// KindPlan points are a plan's candidates (steplab plan, package
	// planner): each pruned or bisected to its goodput.
	KindPlan = "plan"
)

// Kinds lists the sweep kinds.
var Kinds = []string{KindWhatif, KindSimulate, KindCalibrate, KindPlan}

// KindOf tells a sweep document's kind from its keys: a what-if scenario
// has stages, a calibration datasets, a plan a plan block; anything else
// is a simulate scenario.
func KindOf(d *whatif.Doc) string {
	switch {
	case d.Has("stages"):
		return KindWhatif
	case d.Has("datasets"):
		return KindCalibrate
	case d.Has("plan"):
		return KindPlan
	}
	return KindSimulate
}

// SimPoint is a simulate point's report.
type SimPoint struct {
	sim.Report
	PrefixCacheHitRate float64 `json:"prefix_cache_hit_rate"`
	GPUs               int     `json:"gpus"`
	Engines            int     `json:"engines"`
	// Interval is the latencies at the edges of the FPM's prediction
	// interval (scenario.Bounds); NoUncertainty, instead, says why there is
	// none (fpm.NoUncertainty).
	Interval      *sim.LatencyInterval `json:"interval,omitempty"`
	NoUncertainty string               `json:"no_uncertainty,omitempty"`
}

// compiled is one point, ready to run.
type compiled struct {
	kind string
	wi   *whatif.Scenario
	sim  *scenario.Plan
	cal  *replay.CalibSpec
	plan *planner.Doc
	doc  *whatif.Doc
	name string
	seed uint64
}

// compileKind reads a point's document (its values set) by its kind.
func compileKind(d *whatif.Doc, i int) (compiled, error) {
	switch k := KindOf(d); k {
	case KindSimulate:
		sc := scenario.Default()
		if err := d.Decode(&sc); err != nil {
			return compiled{}, err
		}
		sc.Seed = PointSeed(sc.Seed, i)
		p, err := sc.Plan()
		if err != nil {
			return compiled{}, err
		}
		return compiled{kind: k, sim: p, name: sc.Name, seed: sc.Seed}, nil
	case KindPlan:
		// Every candidate keeps the scenario's seed: the same arrivals.
		pd, err := planner.Compile(d)
		if err != nil {
			return compiled{}, err
		}
		return compiled{kind: k, plan: pd, doc: d, name: pd.Name, seed: pd.Seed}, nil
	case KindCalibrate:
		var s replay.CalibSpec
		if err := d.Decode(&s); err != nil {
			return compiled{}, err
		}
		if len(s.Datasets) == 0 {
			return compiled{}, fmt.Errorf("%s: datasets: name at least one dataset to calibrate on", d.Path)
		}
		s = s.Resolve(filepath.Dir(d.Path))
		return compiled{kind: k, cal: &s, name: filepath.Base(d.Path)}, nil
	default:
		sc, err := whatif.Compile(d)
		if err != nil {
			return compiled{}, err
		}
		sc.File.Seed = PointSeed(sc.File.Seed, i)
		return compiled{kind: KindWhatif, wi: sc, name: sc.File.Name, seed: sc.File.Seed}, nil
	}
}

// limitSteps bounds every cluster the point runs to n steps.
func (c compiled) limitSteps(n int64) error {
	switch c.kind {
	case KindSimulate:
		c.sim.Plan.MaxSteps = n
	case KindWhatif:
		for _, pl := range c.wi.Placements {
			for _, st := range pl.Graph.Stages {
				if st.Engine != nil {
					st.Engine.MaxSteps = n
				}
			}
		}
	default:
		return fmt.Errorf("a %s point's steps cannot be bounded (its search runs simulations not known in advance): run it without a step limit", c.kind)
	}
	return nil
}

// run simulates (or calibrates) the point.
func (c compiled) run() (PointResult, error) {
	var pr PointResult
	switch c.kind {
	case KindSimulate:
		res, err := scenario.Simulate(c.sim)
		if err != nil {
			return pr, err
		}
		pr.Simulate = &SimPoint{Report: res.Report, PrefixCacheHitRate: res.PrefixCacheHitRate, GPUs: c.sim.GPUs(),
			Engines: c.sim.Engines()}
		if l := c.sim.IntervalLevel(0); l > 0 {
			if pr.Simulate.Interval, err = scenario.Bounds(c.sim, l); err != nil {
				return pr, err
			}
		} else {
			e := c.sim.Pools[0].Engine
			pr.Simulate.NoUncertainty = fpm.NoUncertainty(e.FPM, e.FPMName)
		}
	case KindPlan:
		cand, err := planner.Evaluate(c.doc, c.plan)
		if err != nil {
			return pr, err
		}
		pr.Plan = cand
	case KindCalibrate:
		run, err := c.cal.Setup()
		if err != nil {
			return pr, err
		}
		res, err := replay.Calibrate(run.Sets, run.Opts)
		if err != nil {
			return pr, err
		}
		pr.Calibrate = res
	default:
		out, err := whatif.Run(c.wi, whatif.Options{Jobs: 1})
		if err != nil {
			return pr, err
		}
		pr.Audit = &out.Audit
	}
	return pr, nil
}

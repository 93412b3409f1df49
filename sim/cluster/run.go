package cluster

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/workload"
)

// Drive runs the cluster over a workload until the workload is exhausted
// and every request has finished, and returns the time of the last event.
// A source that is a Completer (closed loop) hears of each finished
// request. An arrival fires before an event at the same time, so an
// engine's loop sees every request that arrived by then.
func Drive(c *Cluster, src workload.Peeker) (int64, error) { return DriveUntil(c, src, nil) }

// DriveUntil is Drive that also ends, with sim.ErrInterrupted, once stop
// is closed (a nil stop never closes): a signal ends a run cleanly.
func DriveUntil(c *Cluster, src workload.Peeker, stop <-chan struct{}) (int64, error) {
	if completer, ok := src.(workload.Completer); ok {
		c.OnFinish = completer.Complete
		defer func() { c.OnFinish = nil }()
	}
	_, closed := src.(*workload.ClosedLoop)
	pace := pacer{side: c.side, on: c.side.jobs > 1 && !closed && c.plan.SequentialReason() == ""}
	defer func() {
		if c.par != nil {
			c.exit()
		}
	}()
	var t int64
	for {
		select {
		case <-stop:
			// Side by side, the replay first catches up with what the
			// engines kept: nothing recorded is lost.
			if c.par == nil || c.par.quiet() {
				return t, sim.ErrInterrupted
			}
			c.par.stopping = true
		default:
		}
		at, st := src.NextAt()
		next := c.NextAt()
		if st == workload.Ready && (next == sim.NoWake || at <= next) {
			pace.arrival(c)
			a, _ := src.Next()
			t = max(t, a.AtNs)
			if err := c.Add(a); err != nil {
				return t, err
			}
			continue
		}
		if err := src.Err(); err != nil {
			return t, fmt.Errorf("workload: %w", err)
		}
		if next == sim.NoWake {
			switch {
			case st == workload.Waiting:
				return t, fmt.Errorf("workload waits for completions but no request is running (closed loop stalled at %d ns)", t)
			case c.Busy():
				return t, fmt.Errorf("engines idle with unfinished requests at %d ns (a request the KV cache can never hold?)", t)
			}
			return t, nil
		}
		t = next
		c.arrivalsAhead = st == workload.Ready
		pace.events++
		if c.par != nil {
			c.barrier(horizon(at, st == workload.Ready))
		}
		if err := c.Step(); err != nil {
			return t, err
		}
	}
}

// Run runs the job on the plan's engines and writes its dataset to dir:
// the engines' steps, step_requests (when the job asks) and requests,
// with routes when a router chose among engines and transfers when
// prefill and decode are disaggregated. One engine writes exactly the
// dataset of sim.Execute. The same plan and job give a byte-identical
// dataset; on failure, or when opts.Stop closes (sim.ErrInterrupted), the
// dataset is left partial with every completed part and every live
// request recorded unfinished.
func Run(p *Plan, job sim.Job, dir string, opts sim.RunOptions) (*sim.Result, error) {
	return runOn(p, job, dir, opts, defaultSide())
}

// runOn is Run stepping the engines side by side as n allows.
func runOn(p *Plan, job sim.Job, dir string, opts sim.RunOptions, n side) (*sim.Result, error) {
	if job.Source == nil && !p.Single() {
		return nil, errors.New("workload.kind benchmark runs one engine: remove the cluster block")
	}
	return sim.WriteDataset(dir, job.Manifest, opts.Overwrite, func(w *datasets.Writer) (*sim.Result, error) {
		res, err := runInto(p, w, job, opts, n)
		if err == nil && res.Service != nil && len(res.Service.Autoscaled) > 0 {
			err = w.UpdateManifest(func(m *datasets.Manifest) { recordScaling(m, res.Service.Autoscaled) })
		}
		return res, err
	})
}

func runInto(p *Plan, w *datasets.Writer, job sim.Job, opts sim.RunOptions, n side) (*sim.Result, error) {
	routes := false
	for _, pp := range p.Pools {
		routes = routes || pp.maxReplicas() > 1
	}
	ds, err := NewDatasetSink(w, job.StepRequests, routes, p.Disaggregated())
	if err != nil {
		return nil, err
	}
	res, err := simulate(p, job, ds, opts, n)
	if cerr := ds.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// Simulate runs the job's workload and reports it, writing nothing: Run
// without the dataset (a sweep point). It steps one event at a time: a
// sweep already runs its points side by side, one a processor.
func Simulate(p *Plan, job sim.Job) (*sim.Result, error) {
	if job.Source == nil {
		return nil, errors.New("workload.kind benchmark writes a dataset: use steplab simulate")
	}
	return simulate(p, job, nil, sim.RunOptions{}, side{})
}

// simulate drives the cluster over the job's source (or its benchmark
// grid) recording into out (nil: nowhere) and the run's metrics, stepping
// the engines side by side as n and the plan allow.
func simulate(p *Plan, job sim.Job, out Sink, opts sim.RunOptions, n side) (*sim.Result, error) {
	metrics := sim.NewRunMetrics()
	tee := Tee{metrics}
	if out != nil {
		tee = Tee{out, metrics}
	}
	if opts.Progress != nil {
		tee = append(tee, sim.NewProgressSink(opts.Progress))
	}
	var slo *sloSink
	if o := p.SLO; o.TTFTMs > 0 || o.ITLMs > 0 {
		slo = &sloSink{slo: o}
		tee = append(tee, slo)
	}
	c, err := p.New(tee, nil)
	if err != nil {
		return nil, err
	}
	var t int64
	if job.Source != nil {
		c.side = sideBySide(p, n)
		t, err = DriveUntil(c, job.Source, opts.Stop)
	} else {
		eng := c.Engines()[0]
		err = sim.RunBenchmark(eng, job.Bench, opts.Stop)
		t = eng.Now()
	}
	// Even after a failure, record every live request (unfinished): what
	// was measured stays.
	end := lastTime(c, t)
	if ferr := c.Finish(end); err == nil {
		err = ferr
	}
	if err != nil {
		return nil, err
	}
	st := c.Stats()
	res := &sim.Result{Report: metrics.Report(), Engine: st, PrefixCacheHitRate: st.PrefixHitRate(), ExtrapolatedOps: st.ExtrapolatedOps}
	if slo != nil || p.Elastic() {
		// The GPUs are held until the last engine's end, not the planner's
		// last decision.
		res.Service = c.Service(lastTime(c, 0))
		if slo != nil {
			res.Service.SLO = slo.attainment()
		}
	}
	return res, nil
}

// Bounds re-simulates the plan's workload with every step of every pool
// at the lower, then at the upper edge of its FPM's interval at level
// (Plan.Bound), writing nothing: sim.Bounds for a cluster; open makes
// each run's job afresh. The experts of an expert-parallel pool keep
// their point price in both runs.
func Bounds(p *Plan, level float64, open func() (sim.Job, func(), error)) (*sim.LatencyInterval, error) {
	if p.Single() {
		return sim.Bounds(p.Pools[0].Engine, level, open) // a benchmark workload too
	}
	return sim.BoundsOf(level, func(upper bool) (sim.Report, error) {
		q, err := p.Bound(level, upper)
		if err != nil {
			return sim.Report{}, err
		}
		job, cleanup, err := open()
		if err != nil {
			return sim.Report{}, err
		}
		defer cleanup()
		res, err := Simulate(q, job)
		if err != nil {
			return sim.Report{}, err
		}
		return res.Report, nil
	})
}

// sideBySide is how a run of p may step its engines side by side, given
// n, saying why when the plan keeps them to one event at a time.
func sideBySide(p *Plan, n side) side {
	if p.Single() || n.jobs <= 1 {
		return side{}
	}
	if why := p.SequentialReason(); why != "" {
		slog.Info("cluster engines simulated one event at a time", "reason", why)
		return side{}
	}
	slog.Debug("cluster engines may step side by side between routing decisions", "goroutines", n.jobs)
	return n
}

// lastTime is the latest host clock of the engines and t.
func lastTime(c *Cluster, t int64) int64 {
	for _, e := range c.Engines() {
		t = max(t, e.Now())
	}
	return t
}

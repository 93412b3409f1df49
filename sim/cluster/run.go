package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/workload"
)

// Drive runs the cluster over a workload until the workload is exhausted
// and every request has finished, and returns the time of the last event.
// A source that is a Completer (closed loop) hears of each finished
// request. An arrival fires before an event at the same time, so an
// engine's loop sees every request that arrived by then.
//
// It is steplab's one drive loop: a simulation of any placement, a
// capture's engine on its GPU worker (a cluster of one on a backend) and
// a benchmark grid (sim.Bench.Source) all run through it, and only here
// are arrivals handed to engines and a run's end, a stall or an idle
// cluster decided.
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
	var t int64
	// Side by side, going back to one event at a time first waits for the
	// merger to write what the units kept: nothing recorded is lost.
	sequential := func() error {
		if c.par != nil {
			t = max(t, c.leave())
		}
		return c.err
	}
	defer sequential()
	for {
		select {
		case <-stop:
			sequential()
			return t, sim.ErrInterrupted
		default:
		}
		at, st := src.NextAt()
		if c.par != nil && st != workload.Ready {
			if st == workload.Exhausted && src.Err() == nil {
				c.par.round(c, math.MaxInt64, nil) // the engines' tail after the last arrival, side by side too
			}
			if err := sequential(); err != nil {
				return t, err
			}
			continue
		}
		next := sim.NoWake
		if c.par == nil {
			next = c.NextAt()
		}
		if st == workload.Ready && (c.par != nil || next == sim.NoWake || at <= next) {
			if pace.sideBySide(c.par != nil) {
				if c.par == nil {
					c.enter(pace.side.jobs, pace.side.kept)
				}
				if err := arriveSide(c, src, &pace, &t); err != nil {
					return t, err
				}
				continue
			}
			if c.par != nil {
				// Back to one event at a time from this arrival: the
				// units step to it first.
				c.par.round(c, at, nil)
				if err := sequential(); err != nil {
					return t, err
				}
			}
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
		if c.solo != nil && c.clock == nil && st != workload.Waiting {
			// One engine on a virtual clock: its loop runs on until the
			// next arrival without coming back here each event (nothing
			// else can fire in between; a closed loop's next arrival waits
			// on a finish, so it comes back every event).
			h := int64(math.MaxInt64)
			if st == workload.Ready {
				h = at
			}
			if t = c.runSolo(h); c.err != nil {
				return t, c.err
			}
			continue
		}
		c.arrivalsAhead = st == workload.Ready
		if ev, _ := c.q.Peek(); c.entryEvent(ev) {
			pace.events++ // what side by side would spread
		}
		if err := c.Step(); err != nil {
			return t, err
		}
	}
}

// arriveSide places the source's next arrival with the engines side by
// side; an error ends the run, once the merger has written everything
// before it.
func arriveSide(c *Cluster, src workload.Peeker, pace *pacer, t *int64) error {
	a, _ := src.Next()
	*t = max(*t, a.AtNs)
	n, err := c.par.arrive(c, a)
	pace.events += n
	if err == nil {
		return nil
	}
	*t = max(*t, c.leave())
	if c.err == nil {
		c.err = err
	}
	return c.err
}

// Run runs the job on the plan's engines and writes its dataset to dir:
// the engines' steps, step_requests (when the job asks) and requests,
// with routes when a router chose among engines and transfers when
// prefill and decode are disaggregated. The same plan and job give a
// byte-identical dataset; on failure, or when opts.Stop closes
// (sim.ErrInterrupted), the dataset is left partial with every completed
// part and every live request recorded unfinished.
func Run(p *Plan, job sim.Job, dir string, opts sim.RunOptions) (*sim.Result, error) {
	return Execute(p, job, dir, sim.Backend{}, opts)
}

// Execute is Run on a backend: a plan of one engine runs its steps on b
// (a capture's GPU worker, on the wall clock), through the same drive
// loop and into the same tables; b amends the manifest and brackets the
// run. The zero Backend is Run's: every engine on its simulated executor
// and a virtual clock.
func Execute(p *Plan, job sim.Job, dir string, b sim.Backend, opts sim.RunOptions) (*sim.Result, error) {
	return runOn(p, job, dir, b, opts, defaultSide())
}

// runOn is Execute stepping the engines side by side as n allows.
func runOn(p *Plan, job sim.Job, dir string, b sim.Backend, opts sim.RunOptions, n side) (*sim.Result, error) {
	if err := runnable(p, job, b); err != nil {
		return nil, err
	}
	m := job.Manifest
	if b.Manifest != nil {
		b.Manifest(&m)
	}
	return sim.WriteDataset(dir, m, opts.Overwrite, func(w *datasets.Writer) (*sim.Result, error) {
		if b.Started != nil {
			if err := b.Started(w); err != nil {
				return nil, err
			}
		}
		res, err := runInto(p, w, job, b, opts, n)
		if b.Stopping != nil {
			if serr := b.Stopping(); err == nil && serr != nil {
				err = serr
			}
		}
		if err == nil && res.Service != nil && len(res.Service.Autoscaled) > 0 {
			err = w.UpdateManifest(func(m *datasets.Manifest) { recordScaling(m, res.Service.Autoscaled) })
		}
		return res, err
	})
}

// runnable refuses a job the plan's engines cannot run: a benchmark grid
// or a backend of other than one engine.
func runnable(p *Plan, job sim.Job, b sim.Backend) error {
	switch {
	case p.Single():
		return nil
	case job.Source == nil:
		return errors.New("workload.kind benchmark runs one engine: remove the cluster block")
	case b.Exec != nil:
		return errors.New("a backend runs the steps of one engine: remove the cluster block")
	}
	return nil
}

func runInto(p *Plan, w *datasets.Writer, job sim.Job, b sim.Backend, opts sim.RunOptions, n side) (*sim.Result, error) {
	routes := false
	for _, pp := range p.Pools {
		routes = routes || pp.maxReplicas() > 1
	}
	ds, err := NewDatasetSink(w, job.StepRequests, routes, p.Disaggregated())
	if err != nil {
		return nil, err
	}
	ds.CheckpointSteps = b.CheckpointSteps
	res, err := simulate(p, job, b, ds, opts, n)
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
	return simulate(p, job, sim.Backend{}, nil, sim.RunOptions{}, side{})
}

// simulate drives the cluster, its one engine on b when b has an
// executor, over the job's source (or its benchmark grid) recording into
// out (nil: nowhere) and the run's metrics, stepping the engines side by
// side as n and the plan allow.
func simulate(p *Plan, job sim.Job, b sim.Backend, out Sink, opts sim.RunOptions, n side) (*sim.Result, error) {
	if err := runnable(p, job, b); err != nil {
		return nil, err
	}
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
	c, err := p.newOn(b, tee, nil)
	if err != nil {
		return nil, err
	}
	src := job.Source
	if src == nil {
		if src, err = job.Bench.Source(c.Engines()[0]); err != nil {
			return nil, err
		}
	}
	c.side = sideBySide(p, n)
	t, err := DriveUntil(c, src, opts.Stop)
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

// Bounds re-simulates the plan's workload (a benchmark grid too) with
// every step of every pool at the lower, then at the upper edge of its
// FPM's interval at level (Plan.Bound), writing nothing, and returns the
// latencies of both; open makes each run's job afresh (and what to clean
// up after it). The two runs are deterministic. They bound the systematic
// error of the model, which compounds through queueing; independent
// per-step draws would average it away. The experts of an
// expert-parallel pool keep their point price in both runs.
func Bounds(p *Plan, level float64, open func() (sim.Job, func(), error)) (*sim.LatencyInterval, error) {
	var reps [2]sim.Report
	for i := range reps {
		r, err := boundRun(p, level, i == 1, open)
		if err != nil {
			return nil, fmt.Errorf("bounds: %w", err)
		}
		reps[i] = r
	}
	return &sim.LatencyInterval{Level: level, Method: sim.BoundsMethod, TTFT: bounded(reps[0].TTFT, reps[1].TTFT),
		ITL: bounded(reps[0].ITL, reps[1].ITL), E2E: bounded(reps[0].E2E, reps[1].E2E)}, nil
}

// boundRun is one run of Bounds: at the upper edge of the interval, or
// the lower one.
func boundRun(p *Plan, level float64, upper bool, open func() (sim.Job, func(), error)) (sim.Report, error) {
	q, err := p.Bound(level, upper)
	if err != nil {
		return sim.Report{}, err
	}
	job, cleanup, err := open()
	if err != nil {
		return sim.Report{}, err
	}
	defer cleanup()
	res, err := simulate(q, job, sim.Backend{}, nil, sim.RunOptions{}, side{})
	if err != nil {
		return sim.Report{}, err
	}
	return res.Report, nil
}

// bounded pairs two runs' summaries: each statistic's lesser and greater.
func bounded(a, b sim.Summary) sim.Bounded {
	lo := sim.Summary{Count: min(a.Count, b.Count), Mean: min(a.Mean, b.Mean), P50: min(a.P50, b.P50), P90: min(a.P90, b.P90),
		P99: min(a.P99, b.P99), Max: min(a.Max, b.Max)}
	hi := sim.Summary{Count: max(a.Count, b.Count), Mean: max(a.Mean, b.Mean), P50: max(a.P50, b.P50), P90: max(a.P90, b.P90),
		P99: max(a.P99, b.P99), Max: max(a.Max, b.Max)}
	return sim.Bounded{Lo: lo, Hi: hi}
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

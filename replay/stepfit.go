package replay

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm"
)

// StepFit is what a run's recorded step times (gpu_time_ns) say about the
// start model's parts: a multiplier on each fitted term, fitted before the
// request metrics are matched and then the point the request-level search
// is pulled back to (CalibOptions.StepRidge).
//
// Request metrics mix every part of every step into a few latencies; a
// steps table prices each step on its own, and its steps differ in what
// they hold (decode-only steps are GEMM plus decode attention, steps with
// a prefill chunk add prefill attention), so it separates the parts that
// the requests leave to trade against each other.
type StepFit struct {
	Datasets []string `json:"datasets"`
	Steps    int      `json:"steps"`
	// Terms and Multipliers: the fitted terms (the prior's parts) and
	// their multipliers on the start model's values.
	Terms       []string  `json:"terms"`
	Multipliers []float64 `json:"multipliers"`
	// DecodeStepNs and PrefillStepNs are the per-step costs added to a
	// decode-only step and to a step with prefill work, where the start
	// model carries such costs (fpm.StepCoster: the ops prior's engine).
	DecodeStepNs  float64 `json:"decode_step_ns,omitempty"`
	PrefillStepNs float64 `json:"prefill_step_ns,omitempty"`
	// MAPE of the device time over the steps, start and step-fitted.
	MAPEBefore float64 `json:"mape_before"`
	MAPEAfter  float64 `json:"mape_after"`
	// Warnings say which terms the steps could not identify.
	Warnings []string `json:"warnings,omitempty"`

	model fpm.Scalable
}

// StepCorrLimit is the correlation between two terms' step times (relative
// to the step) above which the steps are said not to separate them.
const StepCorrLimit = 0.95

// fitSteps fits the start model's terms (indices into its ScaleTerms) on
// the recorded device time of every step of the datasets that have one,
// by non-negative least squares in relative error:
//
//	gpu_time − rest = Σ m_i·part_i + d·[decode-only] + p·[with prefill]
//
// over each step's part times under the start (fpm.TermTimes; rest is
// what the fitted terms leave), the last two columns only for a
// fpm.StepCoster. A term the steps do not exercise keeps multiplier 1. It
// returns nil, with the reason, when no dataset records step times.
func fitSteps(dirs []string, start fpm.Scalable, terms []int) (*StepFit, string, error) {
	var timed []string
	for _, dir := range dirs {
		d, err := datasets.Open(dir)
		if err != nil {
			return nil, "", err
		}
		if stepTimed(d) {
			timed = append(timed, dir)
		}
	}
	if len(timed) == 0 {
		return nil, "no dataset records step times (a steps table with gpu_time_ns)", nil
	}
	l, err := fit.LoadDatasets(timed, fit.LoadOptions{Target: fit.TargetGPU})
	if err != nil {
		return nil, "", fmt.Errorf("calibrate: step fit: %w (--no-step-fit calibrates on the requests alone)", err)
	}
	names := start.ScaleTerms()
	sf := &StepFit{Datasets: timed, Steps: l.Data.Len()}
	for _, i := range terms {
		sf.Terms = append(sf.Terms, names[i])
	}
	tt, err := fpm.NewTermTimes(start, terms)
	if err != nil {
		return nil, "", err
	}
	_, costs := start.(fpm.StepCoster)
	ds := stepDesign(l.Data, tt, sf.Terms, costs)
	coef, used := solveSteps(ds, sf)
	sf.Multipliers = make([]float64, len(terms))
	for k := range terms {
		sf.Multipliers[k] = 1
		if used[k] {
			sf.Multipliers[k] = coef[k]
		}
	}
	mult := make([]float64, len(names))
	for i := range mult {
		mult[i] = 1
	}
	for k, i := range terms {
		mult[i] = sf.Multipliers[k]
	}
	m, err := start.Scaled(mult)
	if err != nil {
		return nil, "", fmt.Errorf("calibrate: step fit: %w", err)
	}
	if costs {
		sf.DecodeStepNs, sf.PrefillStepNs = coef[len(terms)]*stepUnit, coef[len(terms)+1]*stepUnit
		if m, err = m.(fpm.StepCoster).AddStepCosts(sf.DecodeStepNs, sf.PrefillStepNs); err != nil {
			return nil, "", fmt.Errorf("calibrate: step fit: %w", err)
		}
	}
	sf.model = m
	sf.MAPEBefore, sf.MAPEAfter = stepMAPE(l.Data, start), stepMAPE(l.Data, m)
	return sf, "", nil
}

// stepTimed says whether a dataset records its steps' device time (on
// any of its first rows: a source records it on every row or on none).
func stepTimed(d *datasets.Dataset) bool {
	if !d.Has(datasets.TableSteps) {
		return false
	}
	s, err := datasets.Scan[struct {
		GPUTimeNs int64 `parquet:"gpu_time_ns"`
	}](d, datasets.TableSteps)
	if err != nil {
		return false
	}
	defer s.Close()
	buf := make([]struct {
		GPUTimeNs int64 `parquet:"gpu_time_ns"`
	}, 256)
	n, _ := s.Read(buf)
	for _, r := range buf[:n] {
		if r.GPUTimeNs > 0 {
			return true
		}
	}
	return false
}

// stepUnit is the per-step cost columns' unit (ms), which keeps them on
// the scale of the part times.
const stepUnit = 1e6

// stepDesign is the step fit's design: a row per step, the fitted terms'
// times then (with costs) the decode-only and with-prefill indicators, the
// target the step's time less what the fitted terms leave, weighted 1/y²
// (relative error).
func stepDesign(d *fit.Data, tt *fpm.TermTimes, terms []string, costs bool) *fit.Design {
	p := len(terms)
	ds := &fit.Design{Terms: slices.Clone(terms), StepIDs: d.StepIDs}
	if costs {
		ds.Terms = append(ds.Terms, "decode_step", "prefill_step")
	}
	parts := make([]float64, p)
	for i, f := range d.Features {
		total := tt.Of(f, parts)
		rest := total
		for _, v := range parts {
			rest -= v
		}
		ds.X = append(ds.X, parts...)
		if costs {
			pre := 0.0
			if f.PrefillTokens > 0 {
				pre = 1
			}
			ds.X = append(ds.X, (1-pre)*stepUnit, pre*stepUnit)
		}
		y := d.Y[i]
		ds.Y = append(ds.Y, y-rest)
		ds.W = append(ds.W, 1/(y*y))
	}
	return ds
}

// solveSteps solves the design over the columns the steps exercise and
// records in sf what they could not identify: a term zero on every step,
// one the solver prices at zero, two whose columns are nearly collinear.
func solveSteps(ds *fit.Design, sf *StepFit) (coef []float64, used []bool) {
	p := ds.P()
	used = make([]bool, p)
	for i := 0; i < ds.N(); i++ {
		for j, v := range ds.Row(i) {
			used[j] = used[j] || v != 0
		}
	}
	for j, t := range ds.Terms {
		if !used[j] {
			sf.Warnings = append(sf.Warnings, fmt.Sprintf("step fit: no recorded step exercises %s: it keeps the start's value", t))
		}
	}
	for _, pr := range correlatedTerms(ds, used) {
		sf.Warnings = append(sf.Warnings, fmt.Sprintf("step fit: %s and %s are not identifiable from these steps: their step times correlate at %.3f (over %.2f)", ds.Terms[pr.a], ds.Terms[pr.b], pr.r, StepCorrLimit))
	}
	keep := &fit.Design{Y: ds.Y, W: ds.W, StepIDs: ds.StepIDs}
	var idx []int
	for j, u := range used {
		if u {
			idx = append(idx, j)
			keep.Terms = append(keep.Terms, ds.Terms[j])
		}
	}
	for i := 0; i < ds.N(); i++ {
		row := ds.Row(i)
		for _, j := range idx {
			keep.X = append(keep.X, row[j])
		}
	}
	coef = make([]float64, p)
	c, err := fit.NNLS(keep)
	if err != nil {
		sf.Warnings = append(sf.Warnings, "step fit: "+err.Error()+": every term keeps the start's value")
		return coef, make([]bool, p)
	}
	for k, j := range idx {
		coef[j] = c[k]
		if c[k] == 0 && j < len(sf.Terms) {
			used[j] = false
			sf.Warnings = append(sf.Warnings, fmt.Sprintf("step fit: the steps price %s at zero: it keeps the start's value", ds.Terms[j]))
		}
	}
	return coef, used
}

type corrPair struct {
	a, b int
	r    float64
}

// correlatedTerms are the pairs of used columns whose weighted values
// (each step's part time over its recorded time) correlate above
// StepCorrLimit: the steps cannot tell those parts apart.
func correlatedTerms(ds *fit.Design, used []bool) []corrPair {
	p, n := ds.P(), ds.N()
	col := func(j int) []float64 {
		c := make([]float64, n)
		for i := range c {
			c[i] = ds.Row(i)[j] * math.Sqrt(ds.W[i])
		}
		return c
	}
	var out []corrPair
	for a := 0; a < p; a++ {
		for b := a + 1; b < p; b++ {
			if !used[a] || !used[b] {
				continue
			}
			if r := correlation(col(a), col(b)); math.Abs(r) > StepCorrLimit {
				out = append(out, corrPair{a, b, r})
			}
		}
	}
	return out
}

// correlation is Pearson's r of x and y (0 when either is constant).
func correlation(x, y []float64) float64 {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i] / n
		my += y[i] / n
	}
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}

// stepMAPE is the model's mean absolute percentage error over the steps.
func stepMAPE(d *fit.Data, m fpm.FPM) float64 {
	var s float64
	for i, f := range d.Features {
		s += math.Abs(m.PredictNs(f)-d.Y[i]) / d.Y[i]
	}
	return 100 * s / float64(max(1, d.Len()))
}

// fitHostSteps fits the host model's phases on the host windows the
// fitted runs' steps record (fit.FitHostSteps: the worker's receive and
// input preparation, schedule(), update_from_output() and, for a serial
// worker, its output path), starting from prior: what the runs measured
// replaces the prior's guess before the request search scales it. It
// returns nil, with the reason in the note, when no run records them or
// the runs' workers differ (serial and not).
func fitHostSteps(sets []CalibSet, prior fpm.HostModel) (*fit.HostFit, string, error) {
	var runs fit.StepTables
	var used []string
	serial := false
	for i, s := range sets {
		if s.Dir == "" {
			continue
		}
		d, err := datasets.Open(s.Dir)
		if err != nil {
			return nil, "", err
		}
		if !d.Has(datasets.TableSteps) {
			continue
		}
		st, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
		if err != nil {
			return nil, "", fmt.Errorf("calibrate: host fit: %s: %w", s.Dir, err)
		}
		if !hostTimed(st) {
			continue
		}
		ser := s.Plan.Pools[0].Engine.SerialWorker
		if len(used) > 0 && ser != serial {
			return nil, fmt.Sprintf("no host fit: %s ran a serial worker and %s did not (or the reverse): fit them apart", sets[0].Dir, s.Dir), nil
		}
		serial = ser
		if err := runs.Add(d, st); err != nil {
			return nil, "", fmt.Errorf("calibrate: host fit: %s: %w", s.Dir, err)
		}
		used = append(used, sets[i].Dir)
	}
	if len(used) == 0 {
		return nil, "no host fit: no fitted run records its steps' host windows (host_prep_ns, worker_recv_ns): the host model is the prior", nil
	}
	hf, err := fit.FitHostSteps(runs.Steps, runs.Reqs, prior, fit.HostStepsOptions{Serial: serial})
	if err != nil {
		return nil, "", fmt.Errorf("calibrate: host fit: %w", err)
	}
	var ws []string
	for _, f := range hf.Fits {
		ws = append(ws, f.Window)
	}
	how := "its receive, preparation and output path hidden behind the device under async scheduling"
	if serial {
		how = "a serial worker: its receive, preparation and output path add to every step"
	}
	kept := ""
	if len(hf.Unfitted) > 0 {
		kept = "; the prior's kept for " + strings.Join(hf.Unfitted, "; ")
	}
	return hf, fmt.Sprintf("host fit on %d recorded steps of %s (%s): %s%s; the request search scales it",
		len(runs.Steps), strings.Join(used, ", "), how, strings.Join(ws, ", "), kept), nil
}

// hostTimed says whether steps record the worker's host windows.
func hostTimed(steps []datasets.Step) bool {
	for i := range steps {
		if steps[i].HostPrepNs > 0 || steps[i].WorkerRecvNs > 0 {
			return true
		}
	}
	return false
}

package replay

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/sim/cluster"
)

// Host parameters calibrate can fit: multipliers on the host model's fixed
// costs per step (the inter-step overhead the peers find to be the largest
// error source).
const (
	// HostSchedUpdate scales schedule() and update_from_output() fixed
	// costs (scheduler side, between steps).
	HostSchedUpdate = "host.sched_update_fixed"
	// HostPrep scales the worker's input preparation fixed cost.
	HostPrep = "host.prep_fixed"
)

// Expert-parallel parameters calibrate fits on a mixture of experts:
// multipliers on the busiest GPU's expert compute and expert weight
// streaming (the two sides of the experts' roofline) and on the
// all-to-all.
const (
	MoEExpertCompute = "moe.expert_compute"
	MoEExpertStream  = "moe.expert_stream"
	MoEA2A           = "moe.a2a"
)

// MoEParams lists the expert-parallel parameters.
var MoEParams = []string{MoEExpertCompute, MoEExpertStream, MoEA2A}

// CalibSet is one recorded run to calibrate on.
type CalibSet struct {
	Name  string
	Trace *Trace
	// Plan is the run's engines (scenario.PlanFromManifest); calibration
	// replaces their forward-pass and host models and, for a mixture of
	// experts, scales their expert-parallel parts.
	Plan *cluster.Plan
	// FittedOn is the setting the set's manifest records.
	FittedOn catalog.FittedOn
	// Dir is the dataset directory, whose steps table the step fit reads
	// ("": the set has no steps to fit).
	Dir string
}

// CalibOptions tune Calibrate.
type CalibOptions struct {
	// Start is the FPM whose terms are scaled: the run's prior (its parts,
	// fpm.PriorTerm*) or a linear model (its coefficients).
	Start fpm.Scalable
	// StartName names Start in the report.
	StartName string
	// Fixed, when set, is the device model used as it is: only host
	// parameters are fitted (Start and Terms are ignored).
	Fixed fpm.FPM
	// Host is the starting host model; HostFit says it is the prior, which
	// the host windows the fitted runs record replace (fitHostSteps)
	// unless NoStepFit.
	Host    fpm.HostModel
	HostFit bool
	// Terms are the FPM terms that get a multiplier (nil: every term of
	// Start, Start.ScaleTerms).
	Terms []string
	// HostParams are the host multipliers fitted (nil: HostSchedUpdate and
	// HostPrep; empty non-nil: none).
	HostParams []string
	// MoEParams are the expert-parallel multipliers fitted (nil: all of
	// MoEParams when the first set ran expert-parallel instances, else
	// none).
	MoEParams []string
	// Holdout is the fraction of each run's requests, the last by arrival,
	// held out of the fit and scored after it (0: none).
	Holdout float64
	// HoldoutSets are whole runs scored after the fit (held-out runs).
	HoldoutSets []CalibSet
	// MaxEvals bounds the number of objective evaluations (one replay of
	// every set each); 0 means 60 per parameter, at least 150.
	MaxEvals int
	// Prior is the weight of a ridge on the host and expert-parallel
	// log-multipliers that keeps parameters the record cannot identify
	// near the start (0: 1e-3).
	Prior float64
	// NoStepFit skips the step fit and the host fit: the search starts
	// from Start and Host, and its ridge pulls toward Start.
	NoStepFit bool
	// Ridge is the weight of the ridge on the FPM terms' log-multipliers
	// toward their anchor: the step fit's values where the fitted runs
	// record step times, else the start's (0: RidgeStepFit, RidgeStart).
	Ridge float64
	// Progress, when set, hears each evaluation's objective.
	Progress func(eval int, objective float64)
}

// ParamValue is one fitted parameter.
type ParamValue struct {
	Name string `json:"name"`
	// Multiplier is Value over Start: what the calibration moved the
	// start's value by, step fit and request search together.
	Multiplier float64 `json:"multiplier"`
	// StepFit is the step fit's multiplier on an FPM term (0: none).
	StepFit float64 `json:"step_fit,omitempty"`
	Start   float64 `json:"start"`
	Value   float64 `json:"value"`
}

// MetricErrors are the relative errors (pred − rec)/rec of the calibrated
// request metrics on one run, with the recorded and predicted values (ms).
type MetricErrors struct {
	Dataset  string             `json:"dataset"`
	Split    string             `json:"split"` // train | holdout-requests | holdout-run
	Requests int                `json:"requests"`
	RelErr   map[string]float64 `json:"rel_err"`
	Rec      map[string]float64 `json:"recorded_ms"`
	Pred     map[string]float64 `json:"predicted_ms"`

	// itlResid are the requests' relative ITL residuals (rec − pred)/pred.
	itlResid []float64
}

// MeanAbs is the mean |relative error| over the metrics.
func (m MetricErrors) MeanAbs() float64 {
	var s float64
	for _, v := range m.RelErr {
		s += math.Abs(v)
	}
	return s / float64(max(1, len(m.RelErr)))
}

// CalibResult is what Calibrate returns.
type CalibResult struct {
	// Start names the start model, whose replay is Before.
	Start  string          `json:"start,omitempty"`
	Params []ParamValue    `json:"params"`
	Model  fpm.Scalable    `json:"-"` // the calibrated FPM; nil when the device model was Fixed
	Host   fpm.HostModel   `json:"host"`
	MoE    *cluster.Scales `json:"moe,omitempty"`
	Evals  int             `json:"evaluations"`
	// Objective is the fit's Σ log(pred/rec)² plus its ridge.
	Objective float64        `json:"objective"`
	Before    []MetricErrors `json:"before"` // the start model on the fit data
	Train     []MetricErrors `json:"train"`
	Holdout   []MetricErrors `json:"holdout,omitempty"`
	// Status is StatusConverged or StatusEvalLimit; Reason says why the
	// search stopped there.
	Status string `json:"status"`
	Reason string `json:"reason"`
	// Uncertainty says how the calibrated model's step-time residuals
	// were made ("" when too few fitted requests had an ITL).
	Uncertainty string `json:"uncertainty,omitempty"`
	// StepFit is the fit on the runs' recorded steps the search started
	// from and was pulled back to (nil: none; Notes say why), StepFitted
	// its replay of the fit data.
	StepFit    *StepFit       `json:"step_fit,omitempty"`
	StepFitted []MetricErrors `json:"step_fitted,omitempty"`
	// HostFit is the host model fitted on the runs' recorded host windows
	// that the search started from (nil: none), replayed in StepFitted.
	HostFit *fit.HostFit `json:"host_fit,omitempty"`
	// Ridge is the weight of the FPM terms' ridge toward their anchor.
	Ridge float64 `json:"ridge"`
	// Notes say how the calibration was made; Warnings where its result
	// should not be trusted as it stands (a multiplier outside
	// PlausibleBand, parts the data do not separate, a search stopped at
	// its evaluation limit).
	Notes    []string `json:"notes,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// PlausibleBand bounds a multiplier on a prior's part that a calibration
// reports without a warning: a prior whose part is off by more than a
// factor of two prices another kernel or another engine than the one
// that ran, or the fit is trading that part against another.
var PlausibleBand = [2]float64{0.5, 2}

// The FPM terms' ridge weights (CalibOptions.Ridge) on Σ(θ−θ₀)², in the
// objective's units (Σ log² of the request metrics' ratios; a weight of
// 0.1 makes a 10% move from θ₀ cost what a 3% error of one request metric
// does). Each was chosen on runs other than those docs/replay.md scores
// it on:
//
//   - RidgeStepFit, toward the step fit: on the Mistral-Nemo and
//     Qwen2.5-7B H200 captures, fitted at 5 req/s and scored on their
//     12 req/s runs, among 0.1 to 1e6 (the two shapes' summed error
//     lowest at 1e6). Weaker weights let the terms chase the fitted run's
//     request metrics (its ITL, which the step fit leaves 8-9% short:
//     per-step time that neither the device time nor the simulator's
//     hidden host phases carry) and the other rate came out worse; so the
//     step fit holds the terms and the request search moves the host
//     costs.
//   - RidgeStart, toward the start where no step is timed: on the last
//     30% of LLMServingSim's Llama run on the RTX PRO 6000, among 1e-4
//     to 0.1 (0.01 and 0.1 tied; the stronger kept).
const (
	RidgeStepFit = 1e6
	RidgeStart   = 0.1
)

// CalibMinResiduals is the fewest fitted requests with an ITL whose
// residuals calibrate the model's interval.
const CalibMinResiduals = 20

// CalibResidualSource describes the calibrated model's residuals.
const CalibResidualSource = "calibrate: relative ITL residuals (recorded − re-simulated)/re-simulated of the fitted requests, " +
	"the step-time error each request's decode steps carried"

// calibMetrics are the request metrics the fit matches.
var calibMetrics = []string{"ttft_mean", "ttft_p50", "ttft_p90", "itl_mean", "itl_p50", "itl_p90", "e2e_mean"}

func metricsOf(s *RequestSummary) (rec, pred map[string]float64) {
	rec, pred = map[string]float64{}, map[string]float64{}
	put := func(prefix string, d DistCompare) {
		rec[prefix+"_mean"], pred[prefix+"_mean"] = d.Recorded.Mean, d.Predicted.Mean
		rec[prefix+"_p50"], pred[prefix+"_p50"] = d.Recorded.P50, d.Predicted.P50
		rec[prefix+"_p90"], pred[prefix+"_p90"] = d.Recorded.P90, d.Predicted.P90
	}
	put("ttft", s.TTFT)
	put("itl", s.ITL)
	put("e2e", s.E2E)
	return rec, pred
}

type calibProblem struct {
	opts CalibOptions
	// anchor is the FPM the terms' multipliers scale: Start, or the step
	// fit's model.
	anchor    fpm.Scalable
	terms     []int // indices into Start.ScaleTerms()
	startTerm []string
	hostNames []string
	moeNames  []string
	// ridge weighs the terms' log-multipliers, prior the others'.
	ridge, prior float64
}

// calibModel is one point of the search: the models and scales it prices
// with.
type calibModel struct {
	fpModel fpm.FPM
	scaled  fpm.Scalable // fpModel, when it is Start scaled
	host    fpm.HostModel
	scales  cluster.Scales
}

func (p *calibProblem) build(theta []float64) (calibModel, error) {
	var sc fpm.Scalable
	var fpModel fpm.FPM = p.opts.Fixed
	if fpModel == nil {
		mult := make([]float64, len(p.startTerm))
		for i := range mult {
			mult[i] = 1
		}
		for i, ti := range p.terms {
			mult[ti] = math.Exp(theta[i])
		}
		var err error
		if sc, err = p.anchor.Scaled(mult); err != nil {
			return calibModel{}, err
		}
		fpModel = sc
	}
	h := p.opts.Host
	for j, name := range p.hostNames {
		m := math.Exp(theta[len(p.terms)+j])
		switch name {
		case HostSchedUpdate:
			h.ScheduleFixedNs *= m
			h.UpdateFixedNs *= m
		case HostPrep:
			h.PrepFixedNs *= m
		}
	}
	ms := cluster.Scales{ExpertCompute: 1, ExpertStream: 1, A2A: 1}
	for j, name := range p.moeNames {
		m := math.Exp(theta[len(p.terms)+len(p.hostNames)+j])
		switch name {
		case MoEExpertCompute:
			ms.ExpertCompute = m
		case MoEExpertStream:
			ms.ExpertStream = m
		case MoEA2A:
			ms.A2A = m
		}
	}
	return calibModel{fpModel: fpModel, scaled: sc, host: h, scales: ms}, nil
}

// withModels is the plan priced with another forward-pass and host model
// and expert-parallel scales: what each calibration step replays.
func withModels(p *cluster.Plan, m calibModel) *cluster.Plan {
	q := p.WithModels(m.fpModel, m.host)
	if p.ExpertParallel() {
		q = q.WithScales(m.scales)
	}
	return q
}

// score replays one set with the model and compares the requests of rec
// (all of the set's requests when rec is nil).
func score(set CalibSet, tr *Trace, rec []datasets.Request, m calibModel, split string) (MetricErrors, error) {
	reqs, _, err := Simulate(tr, withModels(set.Plan, m))
	if err != nil {
		return MetricErrors{}, err
	}
	if rec == nil {
		rec = tr.Rec
	}
	me := MetricErrors{Dataset: set.Name, Split: split, Requests: len(rec), RelErr: map[string]float64{}, Rec: map[string]float64{}, Pred: map[string]float64{}}
	s, err := CompareRequests(rec, reqs, func(r *RequestRow) error {
		if r.RecITL > 0 && r.PredITL > 0 {
			me.itlResid = append(me.itlResid, float64(r.RecITL-r.PredITL)/float64(r.PredITL))
		}
		return nil
	})
	if err != nil {
		return MetricErrors{}, err
	}
	r, p := metricsOf(s)
	for _, k := range append(calibMetrics, "ttft_p99", "itl_p99", "e2e_p50", "e2e_p90") {
		rv, pv := r[k], p[k]
		if k == "ttft_p99" {
			rv, pv = s.TTFT.Recorded.P99, s.TTFT.Predicted.P99
		}
		if k == "itl_p99" {
			rv, pv = s.ITL.Recorded.P99, s.ITL.Predicted.P99
		}
		me.Rec[k], me.Pred[k] = rv, pv
		if rv > 0 {
			me.RelErr[k] = (pv - rv) / rv
		}
	}
	return me, nil
}

// Calibration statuses: where the search stopped.
const (
	StatusConverged = "converged"
	StatusEvalLimit = "evaluation limit"
)

// calibTol is how closely the search pins the parameters: it has
// converged when its simplex spans less than this in every
// log-multiplier (0.1% on every multiplier), or when the objective is the
// same at every vertex (a plateau: the request metrics do not tell the
// points apart).
const calibTol = 1e-3

// Calibrate fits multipliers on the start model's terms (a prior's parts,
// a linear model's coefficients), on the host model's fixed costs and, for
// an expert-parallel run, on its expert parts, so that re-simulated request
// metrics (mean, p50 and p90 of TTFT and ITL, mean E2E) match the record.
//
// Where the fitted runs record step times, the FPM terms are first fitted
// on the steps (fitSteps), which separate the parts the request metrics
// cannot; the request-level search then starts there and its ridge pulls
// the terms back toward it. It minimises Σ log(pred/rec)² over the metrics
// and runs, plus Ridge·Σ(θ−θ₀)² over the terms' log-multipliers (θ₀ the
// step fit's, else 0) and Prior·Σθ² over the others (deterministic; at
// most MaxEvals replays of every run). At θ = 0 without a step fit the
// models are the start's, so Before is always the start's replay. With
// Holdout > 0 the last fraction of each run's requests is left out of the
// fit and scored after it by replaying the whole run.
func Calibrate(sets []CalibSet, opts CalibOptions) (*CalibResult, error) {
	p, err := newCalibProblem(sets, opts)
	if err != nil {
		return nil, err
	}
	dim := len(p.terms) + len(p.hostNames) + len(p.moeNames)
	maxEvals := opts.MaxEvals
	if maxEvals <= 0 {
		maxEvals = max(300, 200*dim)
	}
	// The fit windows.
	train := make([]fitWindow, len(sets))
	for i, s := range sets {
		k := HoldoutStart(len(s.Trace.Arrivals), opts.Holdout)
		if k < 1 {
			return nil, fmt.Errorf("calibrate: %s: holdout leaves no request to fit", s.Name)
		}
		train[i] = fitWindowOf(s.Trace, k)
	}
	res := &CalibResult{Start: opts.StartName}
	if res.Before, err = p.scoreTrain(sets, train, make([]float64, dim), "start"); err != nil {
		return nil, err
	}
	if err := p.stepFit(sets, res); err != nil {
		return nil, err
	}
	if res.StepFit != nil || res.HostFit != nil {
		if res.StepFitted, err = p.scoreTrain(sets, train, make([]float64, dim), "step-fit"); err != nil {
			return nil, err
		}
	}
	evals := 0
	objective := func(theta []float64) float64 {
		evals++
		obj := p.objective(sets, train, theta)
		if opts.Progress != nil {
			opts.Progress(evals, obj)
		}
		return obj
	}
	theta, nm := search(objective, dim, maxEvals, &evals)
	res.Status, res.Reason = nm.status(maxEvals)
	res.Objective, res.Evals = nm.f, evals
	if err := p.finish(res, sets, train, theta, opts); err != nil {
		return nil, err
	}
	res.warn()
	return res, nil
}

// scoreTrain replays each run's fit window at theta (split names the row).
func (p *calibProblem) scoreTrain(sets []CalibSet, train []fitWindow, theta []float64, split string) ([]MetricErrors, error) {
	m, err := p.build(theta)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %s model: %w", split, err)
	}
	var out []MetricErrors
	for i, s := range sets {
		me, err := score(s, train[i].replay, train[i].fit, m, "train")
		if err != nil {
			return nil, fmt.Errorf("calibrate: %s: %s model: %w", s.Name, split, err)
		}
		out = append(out, me)
	}
	return out, nil
}

// stepFit fits the FPM terms on the runs' recorded steps (unless there are
// none, or the options say not to) and makes the result the search's
// anchor; it sets the terms' ridge weight.
func (p *calibProblem) stepFit(sets []CalibSet, res *CalibResult) error {
	p.ridge = p.opts.Ridge
	defer func() { res.Ridge = p.ridge }()
	if p.opts.HostFit && !p.opts.NoStepFit {
		hf, note, err := fitHostSteps(sets, p.opts.Host)
		if err != nil {
			return err
		}
		if hf != nil {
			res.HostFit, p.opts.Host = hf, hf.Model
		}
		res.Notes = append(res.Notes, note)
	}
	why := ""
	switch {
	case len(p.terms) == 0:
		return nil
	case p.opts.NoStepFit:
		why = "not asked for"
	default:
		var dirs []string
		for _, s := range sets {
			if s.Dir != "" {
				dirs = append(dirs, s.Dir)
			}
		}
		var sf *StepFit
		var err error
		if len(dirs) == 0 {
			why = "no fitted run is a dataset directory"
		} else if sf, why, err = fitSteps(dirs, p.opts.Start, p.terms); err != nil {
			return err
		}
		if sf != nil {
			res.StepFit, p.anchor = sf, sf.model
			p.ridge = cmp.Or(p.ridge, RidgeStepFit)
			res.Notes = append(res.Notes, fmt.Sprintf("step fit on %d recorded steps of %s: device-time MAPE %.1f%% → %.1f%%; the request search starts there, its ridge (weight %g) pulling the FPM terms back toward it",
				sf.Steps, strings.Join(sf.Datasets, ", "), sf.MAPEBefore, sf.MAPEAfter, p.ridge))
			return nil
		}
	}
	p.ridge = cmp.Or(p.ridge, RidgeStart)
	res.Notes = append(res.Notes, fmt.Sprintf("no step fit (%s): the FPM terms' ridge (weight %g) pulls toward the start's values", why, p.ridge))
	return nil
}

// newCalibProblem checks the options against the runs and names the
// parameters fitted.
func newCalibProblem(sets []CalibSet, opts CalibOptions) (*calibProblem, error) {
	if len(sets) == 0 {
		return nil, errors.New("calibrate: no datasets")
	}
	if opts.Start == nil && opts.Fixed == nil {
		return nil, errors.New("calibrate: no start model")
	}
	if opts.Holdout < 0 || opts.Holdout >= 1 {
		return nil, fmt.Errorf("calibrate: holdout fraction %g: want [0, 1)", opts.Holdout)
	}
	p := &calibProblem{opts: opts, anchor: opts.Start, prior: opts.Prior}
	if p.prior == 0 {
		p.prior = 1e-3
	}
	terms := opts.Terms
	if opts.Fixed != nil {
		terms = nil
	} else {
		p.startTerm = opts.Start.ScaleTerms()
		if terms == nil {
			terms = p.startTerm
		}
	}
	for _, t := range terms {
		i := slices.Index(p.startTerm, t)
		if i < 0 {
			return nil, fmt.Errorf("calibrate: term %q is not in the start model (%v)", t, p.startTerm)
		}
		p.terms = append(p.terms, i)
	}
	p.hostNames = opts.HostParams
	if p.hostNames == nil {
		p.hostNames = []string{HostSchedUpdate, HostPrep}
	}
	for _, h := range p.hostNames {
		if h != HostSchedUpdate && h != HostPrep {
			return nil, fmt.Errorf("calibrate: unknown host parameter %q (want %s or %s)", h, HostSchedUpdate, HostPrep)
		}
	}
	p.moeNames = opts.MoEParams
	if p.moeNames == nil && sets[0].Plan.ExpertParallel() {
		p.moeNames = MoEParams
	}
	for _, h := range p.moeNames {
		if !slices.Contains(MoEParams, h) {
			return nil, fmt.Errorf("calibrate: unknown expert parameter %q (want %s)", h, strings.Join(MoEParams, ", "))
		}
		if !sets[0].Plan.ExpertParallel() {
			return nil, fmt.Errorf("calibrate: %s: %s ran no expert-parallel instance", h, sets[0].Name)
		}
	}
	if len(p.terms)+len(p.hostNames)+len(p.moeNames) == 0 {
		return nil, errors.New("calibrate: no parameters to fit")
	}
	return p, nil
}

// objective is the fit's loss at theta: Σ over runs and metrics of
// log(pred/rec)² on the fitted requests, plus the ridges (theta is
// relative to the anchor: the terms' ridge pulls toward it).
func (p *calibProblem) objective(sets []CalibSet, train []fitWindow, theta []float64) float64 {
	m, err := p.build(theta)
	if err != nil {
		return 1e6
	}
	var obj float64
	for i, s := range sets {
		me, err := score(s, train[i].replay, train[i].fit, m, "train")
		if err != nil {
			return 1e6
		}
		for _, k := range calibMetrics {
			rv, pv := me.Rec[k], me.Pred[k]
			if rv > 0 && pv > 0 {
				d := math.Log(pv / rv)
				obj += d * d
			}
		}
	}
	for i, t := range theta {
		w := p.prior
		if i < len(p.terms) {
			w = p.ridge
		}
		obj += w * t * t
	}
	return obj
}

// search minimises f over dim log-multipliers from 0 within maxEvals
// calls (counted in *evals). TTFT metrics are rugged in the parameters (a
// small change moves an arrival across a step boundary), so a simplex
// alone stalls in local minima: first a coarse coordinate search
// (multipliers ¼..4 around the current value, 8 points per parameter),
// repeated with half the step while a pass improves and half the budget
// lasts (parameters couple: one moved in a late pass re-opens an earlier
// one), then Nelder-Mead from the best point until it converges or uses
// two thirds of what is left, then a restart with a small simplex, which
// must converge where the first one did too.
func search(f func([]float64) float64, dim, maxEvals int, evals *int) ([]float64, nmResult) {
	theta := make([]float64, dim)
	best := f(theta)
	step := math.Ln2 / 2
	for pass := 0; pass < 4 && *evals < maxEvals/2; pass++ {
		start := best
		for i := 0; i < dim && *evals < maxEvals/2; i++ {
			bi := theta[i]
			for k := -4; k <= 4; k++ {
				if k == 0 {
					continue
				}
				x := append([]float64(nil), theta...)
				x[i] = theta[i] + float64(k)*step
				if v := f(x); v < best {
					best, bi = v, x[i]
				}
			}
			theta[i] = bi
		}
		if best >= start {
			break
		}
		step /= 2
	}
	left := maxEvals - *evals
	nm := nelderMead(f, theta, 0.2, *evals+left*2/3, calibTol, evals)
	if *evals+dim+1 < maxEvals { // room for the restart's simplex and a move
		nm = nelderMead(f, nm.x, 0.03, maxEvals, calibTol, evals)
	}
	return nm.x, nm
}

// finish fills the result with the fitted models, their parameters and
// their errors on the fitted, held-out requests and held-out runs.
func (p *calibProblem) finish(res *CalibResult, sets []CalibSet, train []fitWindow, theta []float64, opts CalibOptions) error {
	fit, err := p.build(theta)
	if err != nil {
		return fmt.Errorf("calibrate: fitted model: %w", err)
	}
	res.Model, res.Host = fit.scaled, fit.host
	if len(p.moeNames) > 0 {
		res.MoE = &fit.scales
	}
	res.Params = p.params(theta, res)
	for i, s := range sets {
		me, err := score(s, train[i].replay, train[i].fit, fit, "train")
		if err != nil {
			return err
		}
		res.Train = append(res.Train, me)
		if k := len(train[i].fit); k < len(s.Trace.Arrivals) {
			me, err := score(s, s.Trace, s.Trace.Rec[k:], fit, "holdout-requests")
			if err != nil {
				return err
			}
			res.Holdout = append(res.Holdout, me)
		}
	}
	if err := res.residuals(); err != nil {
		return err
	}
	for _, s := range opts.HoldoutSets {
		me, err := score(s, s.Trace, nil, fit, "holdout-run")
		if err != nil {
			return err
		}
		res.Holdout = append(res.Holdout, me)
	}
	return nil
}

// params reports each fitted parameter: its multiplier and the value it
// moved (a prior's term multiplier, a linear coefficient, a host cost).
func (p *calibProblem) params(theta []float64, res *CalibResult) []ParamValue {
	var out []ParamValue
	if len(p.terms) > 0 {
		start, now := p.opts.Start.ScaleValues(), res.Model.ScaleValues()
		for i, ti := range p.terms {
			pv := ParamValue{Name: "fpm." + p.startTerm[ti], Multiplier: math.Exp(theta[i]), Start: start[ti], Value: now[ti]}
			if start[ti] != 0 {
				pv.Multiplier = now[ti] / start[ti]
			}
			if sf := res.StepFit; sf != nil {
				pv.StepFit = sf.Multipliers[i]
			}
			out = append(out, pv)
		}
	}
	h0 := p.opts.Host
	for j, name := range p.hostNames {
		pv := ParamValue{Name: name, Multiplier: math.Exp(theta[len(p.terms)+j])}
		switch name {
		case HostSchedUpdate:
			pv.Start, pv.Value = h0.ScheduleFixedNs+h0.UpdateFixedNs, res.Host.ScheduleFixedNs+res.Host.UpdateFixedNs
		case HostPrep:
			pv.Start, pv.Value = h0.PrepFixedNs, res.Host.PrepFixedNs
		}
		out = append(out, pv)
	}
	for j, name := range p.moeNames {
		mult := math.Exp(theta[len(p.terms)+len(p.hostNames)+j])
		out = append(out, ParamValue{Name: name, Multiplier: mult, Start: 1, Value: mult})
	}
	return out
}

// HoldoutStart is the index of the first of n requests (by arrival) that a
// hold-out fraction f leaves out of the fit: the last f of them.
func HoldoutStart(n int, f float64) int { return n - int(math.Round(float64(n)*f)) }

// residuals gives the calibrated model the residual quantiles of
// the fitted requests' ITL: the decode step time a request saw, recorded
// against re-simulated, so that the model's interval, re-simulated at its
// edges (RequestIntervals), spreads latencies as the calibration's own fit
// erred. They come from the fitted requests only; the held-out ones test
// them (replay requests reports their coverage).
func (r *CalibResult) residuals() error {
	if r.Model == nil {
		return nil
	}
	var rs []float64
	for _, me := range r.Train {
		rs = append(rs, me.itlResid...)
	}
	if len(rs) < CalibMinResiduals {
		return nil
	}
	q, err := fpm.NewResidualQuantiles(fpm.ScaleRelative, rs, nil, CalibResidualSource)
	if err != nil {
		return err
	}
	r.Model = r.Model.WithResiduals(q)
	r.Uncertainty = fmt.Sprintf("%s (%d requests)", CalibResidualSource, len(rs))
	return nil
}

// Artifact is the calibrated model as an artifact of its start's form
// (roofline or ops for a prior, linear for a linear start); params.host
// holds the fitted host model (read back by pricing.Price), params.moe the
// expert-parallel multipliers.
func (r *CalibResult) Artifact(datasetsUsed []fpm.DatasetRef, fittedOn []catalog.FittedOn, command string) (*fpm.Artifact, error) {
	if r.Model == nil {
		return nil, errors.New("calibrate: the device model was fixed: no model to save")
	}
	a, err := r.Model.Artifact()
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	a.Training = fpm.Training{Datasets: datasetsUsed, Target: "request metrics (ttft, itl, e2e)",
		Method:   "calibrate: multipliers on the start model's terms (fitted first on the recorded steps where the runs have them) and the host's fixed costs, coordinate search then nelder-mead over their logarithms, re-simulated requests",
		FittedOn: fittedOn}
	a.CreatedBy = command
	a.Notes = append(a.Notes, r.Notes...)
	for _, w := range r.Warnings {
		a.Notes = append(a.Notes, "warning: "+w)
	}
	if err := pricing.WithHost(a, r.Host); err != nil {
		return nil, err
	}
	if r.MoE != nil {
		if err := cluster.WithScalesParam(a, *r.MoE); err != nil {
			return nil, err
		}
	}
	m, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	a.Metrics = m
	return a, nil
}

// fitWindow is what the fit replays of a run and the requests it scores.
type fitWindow struct {
	replay *Trace
	fit    []datasets.Request
}

// fitWindowOf fits the first k requests by arrival. It replays them with
// every request that arrived before the last of them finished: the load
// they shared the engines with. The later requests' arrivals and lengths
// are that load; their latencies are never read.
func fitWindowOf(t *Trace, k int) fitWindow {
	var end int64
	for _, r := range t.Rec[:k] {
		end = max(end, r.FinishNs, r.ArrivalNs)
	}
	j := k
	for j < len(t.Arrivals) && t.Arrivals[j].AtNs <= end {
		j++
	}
	return fitWindow{replay: t.Window(0, j), fit: t.Rec[:k]}
}

// nmResult is where a Nelder-Mead search stopped: its best point and
// value, whether it converged, and the simplex's width there (the largest
// spread of a coordinate over its vertices) and the spread of its values.
type nmResult struct {
	x             []float64
	f             float64
	converged     bool
	width, spread float64
}

// status says whether the search converged and why it stopped there.
func (r nmResult) status(maxEvals int) (string, string) {
	if r.converged && r.spread == 0 {
		return StatusConverged, fmt.Sprintf("the objective is the same at every vertex of the simplex (%.2g wide in log-multiplier): the request metrics cannot tell those parameters apart", r.width)
	}
	if r.converged {
		return StatusConverged, fmt.Sprintf("the simplex spans %.2g in every log-multiplier (under %.2g: each multiplier known to %.1f%%), the objective %.2g across it",
			r.width, calibTol, 100*calibTol, r.spread)
	}
	return StatusEvalLimit, fmt.Sprintf("stopped at the evaluation limit (%d replays) with the simplex still %.2g wide in log-multiplier (%.1f%% on a multiplier; converged is under %.2g): raise --max-evals",
		maxEvals, r.width, 100*(math.Exp(r.width)-1), calibTol)
}

// nelderMead minimises f (which increments *counter per call) from x0 with
// the standard Nelder-Mead simplex (reflection 1, expansion 2, contraction
// 0.5, shrink 0.5), an initial simplex of x0 and x0 + step·e_i, stopping
// when *counter reaches maxEvals, or converged when the simplex spans less
// than xtol in every coordinate or the function is the same at every
// vertex. It is deterministic. (gonum's optimize.NelderMead is the same
// method; its package pulls a module this repository does not carry.)
func nelderMead(f func([]float64) float64, x0 []float64, step float64, maxEvals int, xtol float64, counter *int) nmResult {
	n := len(x0)
	pts := make([][]float64, n+1)
	vals := make([]float64, n+1)
	for i := range pts {
		pts[i] = append([]float64(nil), x0...)
		if i > 0 {
			pts[i][i-1] += step
		}
		vals[i] = f(pts[i])
	}
	order := func() {
		// insertion sort by value (stable: deterministic ties)
		for i := 1; i <= n; i++ {
			for j := i; j > 0 && vals[j] < vals[j-1]; j-- {
				vals[j], vals[j-1] = vals[j-1], vals[j]
				pts[j], pts[j-1] = pts[j-1], pts[j]
			}
		}
	}
	at := func(c []float64, w []float64, t float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = c[i] + t*(w[i]-c[i])
		}
		return x
	}
	r := nmResult{}
	for *counter+2 <= maxEvals { // an iteration evaluates up to twice before a shrink
		order()
		r.width, r.spread = simplexWidth(pts), vals[n]-vals[0]
		if r.width < xtol || r.spread == 0 {
			r.converged = true
			break
		}
		c := make([]float64, n)
		for _, p := range pts[:n] {
			for i := range c {
				c[i] += p[i] / float64(n)
			}
		}
		xr := at(c, pts[n], -1)
		fr := f(xr)
		switch {
		case fr < vals[0]:
			xe := at(c, pts[n], -2)
			if fe := f(xe); fe < fr {
				pts[n], vals[n] = xe, fe
			} else {
				pts[n], vals[n] = xr, fr
			}
		case fr < vals[n-1]:
			pts[n], vals[n] = xr, fr
		default:
			var xc []float64
			if fr < vals[n] {
				xc = at(c, xr, 0.5)
			} else {
				xc = at(c, pts[n], 0.5)
			}
			if fc := f(xc); fc < math.Min(fr, vals[n]) {
				pts[n], vals[n] = xc, fc
				continue
			}
			for k := 1; k <= n && *counter < maxEvals; k++ {
				pts[k] = at(pts[0], pts[k], 0.5)
				vals[k] = f(pts[k])
			}
		}
	}
	order()
	if !r.converged {
		r.width, r.spread = simplexWidth(pts), vals[n]-vals[0]
		r.converged = r.width < xtol || r.spread == 0
	}
	r.x, r.f = pts[0], vals[0]
	return r
}

// simplexWidth is the largest spread of one coordinate over the vertices.
func simplexWidth(pts [][]float64) float64 {
	var w float64
	for i := range pts[0] {
		lo, hi := pts[0][i], pts[0][i]
		for _, p := range pts[1:] {
			lo, hi = math.Min(lo, p[i]), math.Max(hi, p[i])
		}
		w = math.Max(w, hi-lo)
	}
	return w
}

// warn says where the result should not be trusted as it stands: a
// multiplier outside PlausibleBand, parts that neither the steps nor the
// request metrics separate, a search stopped at its evaluation limit.
func (r *CalibResult) warn() {
	for _, p := range r.Params {
		if p.Multiplier < PlausibleBand[0] || p.Multiplier > PlausibleBand[1] {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: fitted multiplier %.3g is outside the plausible band [%g, %g]: the start misprices this part by more than that, or the fit traded it against another part",
				p.Name, p.Multiplier, PlausibleBand[0], PlausibleBand[1]))
		}
	}
	if r.StepFit != nil {
		r.Warnings = append(r.Warnings, r.StepFit.Warnings...)
	} else if n := countFPM(r.Params); n > 1 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d FPM terms fitted to request metrics alone, which do not separate them: their split is what the ridge left, not a measurement", n))
	}
	if r.Status == StatusEvalLimit {
		r.Warnings = append(r.Warnings, "the search did not converge: "+r.Reason)
	}
}

func countFPM(ps []ParamValue) int {
	n := 0
	for _, p := range ps {
		if strings.HasPrefix(p.Name, "fpm.") {
			n++
		}
	}
	return n
}

package fit

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/internal/yamldoc"
	"github.com/steplab/steplab/pricing"

	"github.com/steplab/steplab/datasets"
)

// BoundsVersion is the version of the bounds file format this build reads.
const BoundsVersion = 1

// BoundsFile is a regression gate over datasets, in one YAML file:
// for each model and dataset pair, the metrics and their bounds.
//
//	version: 1
//	checks:
//	  - name: recipe-decode
//	    model: {fit: {datasets: [bench], kinds: [decode], target: wall_time_ns}}
//	    data: [traffic-a, traffic-b]
//	    kinds: [decode]
//	    bounds:
//	      - {metric: mape_pct, scope: kind=decode, max: 6, target: 3}
//	      - {metric: coverage_pct, scope: kind=decode, min: 55, target: [85, 95]}
//
// Paths are relative to the file. max and min are the gate (what the data
// meets today); target is where the metric is meant to go, reported but
// not gated.
type BoundsFile struct {
	Version int           `yaml:"version"`
	Checks  []BoundsCheck `yaml:"checks"`
	dir     string
}

// BoundsCheck is one model evaluated on one set of datasets.
type BoundsCheck struct {
	Name  string    `yaml:"name"`
	About string    `yaml:"about"`
	Model ModelSpec `yaml:"model"`
	// Data are the datasets evaluated; Kinds, Target and Half select their
	// rows as eval's flags do (Target defaults to the model's).
	Data   []string `yaml:"data"`
	Kinds  []string `yaml:"kinds"`
	Target string   `yaml:"target"`
	Half   int      `yaml:"half"`
	// Level is the nominal coverage of the intervals whose coverage is
	// checked (0: the model's own).
	Level  float64 `yaml:"level"`
	Bounds []Bound `yaml:"bounds"`
}

// ModelSpec names the model of a check: exactly one of an FPM spec as eval
// takes it (artifact: a model artifact, relative to the file, or a prior
// built for the check's first dataset: roofline, ops, ops:NAME, ops:DIR),
// a fit run when the check runs (so the gate checks the fitting code, not
// a stale artifact), or a prior of a named shape.
type ModelSpec struct {
	Artifact string     `yaml:"artifact"`
	Fit      *FitSpec   `yaml:"fit"`
	Prior    *PriorSpec `yaml:"prior"`
}

// FitSpec is a `steplab fit` run (no cross-validation).
type FitSpec struct {
	Datasets      []string `yaml:"datasets"`
	Form          string   `yaml:"form"` // recipe (default), linear or grid
	Kinds         []string `yaml:"kinds"`
	Target        string   `yaml:"target"`
	Terms         []string `yaml:"terms"` // linear form
	Calibrate     []string `yaml:"calibrate"`
	CalibrateHalf int      `yaml:"calibrate_half"`
	Bootstrap     int      `yaml:"bootstrap"` // default 200
	Seed          uint64   `yaml:"seed"`      // default 1
	// Uniform fits the datasets' uniform-benchmark rows only
	// (Selection.Uniform); Policy is fit's --policy (default auto).
	Uniform bool   `yaml:"uniform"`
	Policy  string `yaml:"policy"`
}

// PriorSpec is a prior of a model shape (by catalogue name,
// catalog.LookupModel): the roofline on a Hardware (catalog.LookupHardware),
// or with Ops the measured-operations prior of a database, which was
// measured on one GPU.
type PriorSpec struct {
	Hardware string `yaml:"hardware"`
	Shape    string `yaml:"shape"`
	// Ops is the database of the measured-operations prior: the name of
	// one shipped inside the binary (`steplab eval --help` lists them) or
	// a directory in AIConfigurator's layout (relative to the file); see
	// docs/ops-prior.md.
	Ops string `yaml:"ops"`
	// Engine, with Ops, is an ops model artifact whose engine (how the
	// engine that ran the data departs from the database's framework) the
	// prior takes, on this shape; "" for the database's own framework.
	Engine string `yaml:"engine"`
	// CUDAGraphSizes, with Ops, are the sizes the engine captured CUDA
	// graphs at: a larger step runs eagerly. Empty: the sizes the check's
	// datasets recorded (cuda_graph_capture_sizes in their manifests).
	CUDAGraphSizes []int `yaml:"cuda_graph_sizes"`
}

// Bound is one metric's gate. Metrics: mape_pct, median_ape_pct,
// p90_ape_pct, p99_ape_pct, abs_bias_pct (the evaluation's error, in
// percent) and coverage_pct (the share of steps inside their prediction
// interval). Scope: overall, kind=KIND, or region=REGION (coverage of a
// recipe). Max and Min are the gate; Target (one number, an upper bound,
// or [lo, hi]) is reported, not gated.
type Bound struct {
	Metric string      `yaml:"metric"`
	Scope  string      `yaml:"scope"`
	Max    *float64    `yaml:"max"`
	Min    *float64    `yaml:"min"`
	Target TargetRange `yaml:"target"`
}

// TargetRange is a bound's target: one number (an upper bound) or a
// [lo, hi] range.
type TargetRange []float64

// UnmarshalYAML accepts one number or a [lo, hi] pair.
func (t *TargetRange) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var v float64
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: target: %w", n.Line, err)
		}
		*t = TargetRange{v}
		return nil
	}
	var v []float64
	if err := n.Decode(&v); err != nil || len(v) != 2 || v[0] > v[1] {
		return fmt.Errorf("line %d: target: want a number or [lo, hi]", n.Line)
	}
	*t = v
	return nil
}

// Bound metrics.
var boundMetrics = []string{"mape_pct", "median_ape_pct", "p90_ape_pct", "p99_ape_pct", "abs_bias_pct", "coverage_pct"}

// LoadBounds reads and checks a bounds file: the version, a name and a
// model of exactly one kind per check, data, known metrics and scopes, and
// a max or a min on every bound.
func LoadBounds(path string) (*BoundsFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bounds file: %w", err)
	}
	f, err := ParseBounds(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("bounds file %s: %w", path, err)
	}
	return f, nil
}

// ParseBounds decodes and checks a bounds file; its relative paths are
// taken from dir.
func ParseBounds(b []byte, dir string) (*BoundsFile, error) {
	d, err := yamldoc.New("", b)
	if err != nil {
		return nil, err
	}
	f := &BoundsFile{dir: dir}
	if err := d.Decode(f); err != nil {
		return nil, err
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *BoundsFile) validate() error {
	if f.Version != BoundsVersion {
		return fmt.Errorf("version %d: this build reads version %d", f.Version, BoundsVersion)
	}
	if len(f.Checks) == 0 {
		return fmt.Errorf("no checks")
	}
	names := map[string]bool{}
	for i, c := range f.Checks {
		if c.Name == "" || names[c.Name] {
			return fmt.Errorf("check %d: a name, unique in the file, is required", i+1)
		}
		names[c.Name] = true
		m := c.Model
		n := 0
		for _, set := range []bool{m.Artifact != "", m.Fit != nil, m.Prior != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("check %s: model: give exactly one of artifact, fit or prior", c.Name)
		}
		if m.Fit != nil && len(m.Fit.Datasets) == 0 {
			return fmt.Errorf("check %s: model.fit: no datasets", c.Name)
		}
		if p := m.Prior; p != nil {
			switch {
			case p.Ops != "" && p.Hardware != "":
				return fmt.Errorf("check %s: model.prior: an ops prior's GPU is its database's: leave hardware out", c.Name)
			case p.Shape == "" || p.Ops == "" && p.Hardware == "":
				return fmt.Errorf("check %s: model.prior: name the hardware and the shape (or an ops database and the shape)", c.Name)
			case p.Engine != "" && p.Ops == "":
				return fmt.Errorf("check %s: model.prior.engine applies to an ops prior: set ops", c.Name)
			}
		}
		if len(c.Data) == 0 {
			return fmt.Errorf("check %s: no data to evaluate on", c.Name)
		}
		if len(c.Bounds) == 0 {
			return fmt.Errorf("check %s: no bounds", c.Name)
		}
		for _, b := range c.Bounds {
			if !slices.Contains(boundMetrics, b.Metric) {
				return fmt.Errorf("check %s: metric %q: want one of %v", c.Name, b.Metric, boundMetrics)
			}
			if b.Scope != "overall" && !strings.HasPrefix(b.Scope, "kind=") && !strings.HasPrefix(b.Scope, "region=") {
				return fmt.Errorf("check %s: %s scope %q: want overall, kind=KIND or region=REGION", c.Name, b.Metric, b.Scope)
			}
			if strings.HasPrefix(b.Scope, "region=") && b.Metric != "coverage_pct" {
				return fmt.Errorf("check %s: %s: a region scope applies to coverage_pct only", c.Name, b.Metric)
			}
			if b.Max == nil && b.Min == nil {
				return fmt.Errorf("check %s: %s %s: give max, min or both", c.Name, b.Metric, b.Scope)
			}
		}
	}
	return nil
}

func (f *BoundsFile) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(f.dir, p)
}

func (f *BoundsFile) paths(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = f.path(p)
	}
	return out
}

// BoundsEval is one check's evaluation: the error report and, for a model
// with intervals, their coverage.
type BoundsEval struct {
	Name      string           `json:"name"`
	About     string           `json:"about,omitempty"`
	Model     string           `json:"model"`
	Datasets  []fpm.DatasetRef `json:"datasets"`
	Report    Report           `json:"report"`
	Intervals *IntervalReport  `json:"intervals,omitempty"`
}

// BoundsReport is the outcome of a bounds file: every bound as a check,
// and the evaluations behind them.
type BoundsReport struct {
	File        string        `json:"file"`
	Passed      bool          `json:"passed"`
	Checks      []CheckResult `json:"checks"`
	Evaluations []BoundsEval  `json:"evaluations"`
	Warnings    []string      `json:"warnings,omitempty"`
}

// Err is nil when every bound held, else a *CheckFailedError.
func (r *BoundsReport) Err() error { return checksErr(r.Checks) }

// Failures returns the breached bounds.
func (r *BoundsReport) Failures() []CheckResult { return failures(r.Checks) }

// WriteTable prints the bounds as check does.
func (r *BoundsReport) WriteTable(w io.Writer, failedOnly bool) { writeChecks(w, r.Checks, failedOnly) }

// WriteJUnit writes one JUnit testcase per bound.
func (r *BoundsReport) WriteJUnit(w io.Writer) error { return writeJUnit(w, junitOf(r.File, r.Checks)) }

// CheckBounds runs every check of the bounds file at path. The error is
// about input only (a missing dataset, a fit that cannot run); breached
// bounds are a report with Passed false.
func CheckBounds(path string) (*BoundsReport, error) {
	f, err := LoadBounds(path)
	if err != nil {
		return nil, err
	}
	r := &BoundsReport{File: path, Passed: true}
	for _, c := range f.Checks {
		ev, warn, err := f.evaluate(c)
		if err != nil {
			return nil, fmt.Errorf("bounds file %s: check %s: %w", path, c.Name, err)
		}
		r.Warnings = append(r.Warnings, warn...)
		r.Evaluations = append(r.Evaluations, *ev)
		for _, b := range c.Bounds {
			for _, res := range boundResult(c.Name, b, ev) {
				r.Passed = r.Passed && res.Passed
				r.Checks = append(r.Checks, res)
			}
		}
	}
	return r, nil
}

// evaluate builds the check's model and evaluates it on the data.
func (f *BoundsFile) evaluate(c BoundsCheck) (*BoundsEval, []string, error) {
	m, a, name, fittedOn, notes, err := f.model(c.Model, f.paths(c.Data))
	if err != nil {
		return nil, nil, err
	}
	if p := c.Model.Prior; p != nil {
		if m, err = WithGraphs(m, p.CUDAGraphSizes, f.paths(c.Data)); err != nil {
			return nil, nil, err
		}
	}
	load := LoadOptions{Selection: Selection{Kinds: c.Kinds, Half: c.Half}, Target: c.Target}
	if load.Target == "" {
		load.Target = fittedOn
	}
	l, err := LoadDatasets(f.paths(c.Data), load)
	if err != nil {
		return nil, nil, err
	}
	ev := &BoundsEval{Name: c.Name, About: c.About, Model: name, Datasets: l.Refs, Report: Evaluate(m, l.Data, 0)}
	if level := fpm.IntervalLevel(m, c.Level); level > 0 {
		ev.Intervals = EvaluateIntervals(m.(fpm.IntervalFPM), l.Data, level)
	}
	return ev, slices.Concat(notes, l.Warnings, l.ProvenanceNotes(name, a)), nil
}

// model builds a check's model for its data, its artifact (nil for a
// prior), a name for it, the target it was fitted on ("" when unknown)
// and notes on how a prior was built.
func (f *BoundsFile) model(s ModelSpec, data []string) (fpm.FPM, *fpm.Artifact, string, string, []string, error) {
	switch {
	case s.Artifact != "":
		spec := s.Artifact
		if !pricing.IsPrior(spec) {
			spec = f.path(spec)
		}
		p, err := pricing.ForDatasets(spec, data)
		if err != nil {
			return nil, nil, "", "", nil, err
		}
		if p.Artifact == nil {
			return p.FPM, nil, pricing.Name(p), TargetGPU, p.Notes, nil
		}
		return p.FPM, p.Artifact, s.Artifact, p.Artifact.Training.Target, nil, nil
	case s.Prior != nil:
		m, name, err := s.Prior.Build(f.dir)
		return m, nil, name, TargetGPU, nil, err
	}
	fs := s.Fit
	form := fs.Form
	if form == "" {
		form = fpm.FormRecipe
	}
	boot := fs.Bootstrap
	if boot == 0 {
		boot = 200
	}
	seed := fs.Seed
	if seed == 0 {
		seed = 1
	}
	cfg := FitConfig{Load: LoadOptions{Selection: Selection{Kinds: fs.Kinds, Uniform: fs.Uniform}, Target: fs.Target, Policy: cmp.Or(fs.Policy, PolicyAuto)}, Form: form,
		Linear: Options{Terms: fs.Terms, Bootstrap: boot}, Recipe: RecipeOptions{Bootstrap: boot},
		Calibrate: f.paths(fs.Calibrate), CalibrateHalf: fs.CalibrateHalf, Seed: seed, CreatedBy: "steplab check --bounds"}
	rep, art, _, err := FitDatasets(f.paths(fs.Datasets), cfg)
	if err != nil {
		return nil, nil, "", "", nil, err
	}
	m, err := pricing.Model(art)
	if err != nil {
		return nil, nil, "", "", nil, err
	}
	return m, art, fmt.Sprintf("%s fitted on %s", form, strings.Join(fs.Datasets, ", ")), rep.Target, nil, nil
}

// Build builds the prior and names it; relative paths (an ops database
// directory, the engine artifact) are taken from dir.
func (p PriorSpec) Build(dir string) (fpm.FPM, string, error) {
	path := func(q string) string {
		if filepath.IsAbs(q) {
			return q
		}
		return filepath.Join(dir, q)
	}
	sh, err := catalog.LookupModel(p.Shape)
	if err != nil {
		return nil, "", err
	}
	if p.Ops == "" {
		hw, err := catalog.LookupHardware(p.Hardware)
		if err != nil {
			return nil, "", err
		}
		pr, err := pricing.Price(pricing.Spec{Hardware: hw, Shape: sh, FPM: pricing.FPMRoofline})
		if err != nil {
			return nil, "", err
		}
		return pr.FPM, pricing.Name(pr), nil
	}
	db := p.Ops
	if _, err := os.Stat(path(db)); err == nil {
		db = path(db) // a directory; otherwise a shipped database's name
	}
	var engine fpm.OpsEngine
	name := fmt.Sprintf("ops(%s, %s)", p.Ops, sh.Name)
	if p.Engine != "" {
		b, err := os.ReadFile(path(p.Engine))
		if err != nil {
			return nil, "", fmt.Errorf("model.prior.engine: %w", err)
		}
		a, err := fpm.ParseArtifact(b)
		var op fpm.OpsParams
		if err != nil || a.Form != fpm.FormOps || json.Unmarshal(a.Params, &op) != nil {
			return nil, "", fmt.Errorf("model.prior.engine %s: want an ops model artifact (form %q)", p.Engine, fpm.FormOps)
		}
		engine = op.Engine
		name += " with the engine of " + p.Engine
	}
	a, err := fpm.OpsArtifact(db, sh, engine)
	if err != nil {
		return nil, "", err
	}
	m, err := pricing.Model(a)
	if err != nil {
		return nil, "", fmt.Errorf("model.prior.ops %s: %w", p.Ops, err)
	}
	return m, name, nil
}

// WithGraphs gives an ops prior the CUDA-graph sizes of the engine it
// prices (fpm.Ops.WithGraphs): sizes, or when empty the first sizes the
// datasets' manifests recorded. Any other model is returned as it is.
func WithGraphs(m fpm.FPM, sizes []int, data []string) (fpm.FPM, error) {
	o, ok := m.(*fpm.Ops)
	if !ok {
		return m, nil
	}
	for _, d := range data {
		if len(sizes) > 0 {
			break
		}
		man, err := datasets.ReadManifest(d)
		if err != nil {
			return nil, err
		}
		sizes = man.CUDAGraphSizes
	}
	return o.WithGraphs(sizes), nil
}

// boundResult turns one bound into its checks (one for max, one for min).
func boundResult(check string, b Bound, ev *BoundsEval) []CheckResult {
	v, n := metricValue(b, ev)
	base := CheckResult{Name: check + " " + b.Metric + " " + b.Scope, Metric: b.Metric, Scope: b.Scope, Value: v, Rows: n}
	switch len(b.Target) {
	case 1:
		base.Detail = fmt.Sprintf("target <= %g (%s)", b.Target[0], met(v <= b.Target[0]))
	case 2:
		base.Detail = fmt.Sprintf("target %g..%g (%s)", b.Target[0], b.Target[1], met(v >= b.Target[0] && v <= b.Target[1]))
	}
	if n == 0 {
		base.Detail = strings.TrimSpace("no rows in this scope; " + base.Detail)
	}
	var out []CheckResult
	both := b.Max != nil && b.Min != nil
	if b.Max != nil {
		c := base
		c.Bound, c.Op, c.Passed = *b.Max, "<=", n > 0 && v <= *b.Max
		if both {
			c.Name += " max"
		}
		out = append(out, c)
	}
	if b.Min != nil {
		c := base
		c.Bound, c.Op, c.Passed = *b.Min, ">=", n > 0 && v >= *b.Min
		if both {
			c.Name += " min"
		}
		out = append(out, c)
	}
	return out
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// metricValue reads a bound's metric in its scope (NaN, 0 rows when the
// scope has no rows or the model has no intervals).
func metricValue(b Bound, ev *BoundsEval) (float64, int) {
	if b.Metric == "coverage_pct" {
		if ev.Intervals == nil {
			return math.NaN(), 0
		}
		var c Coverage
		switch {
		case b.Scope == "overall":
			c = ev.Intervals.Overall
		case strings.HasPrefix(b.Scope, "kind="):
			c = ev.Intervals.ByKind[strings.TrimPrefix(b.Scope, "kind=")]
		default:
			c = ev.Intervals.ByRegion[strings.TrimPrefix(b.Scope, "region=")]
		}
		if c.N == 0 {
			return math.NaN(), 0
		}
		return c.Pct, c.N
	}
	m := ev.Report.Overall
	if k, ok := strings.CutPrefix(b.Scope, "kind="); ok {
		m = ev.Report.ByKind[k]
	}
	if m.Count == 0 {
		return math.NaN(), 0
	}
	switch b.Metric {
	case "mape_pct":
		return m.MAPE, m.Count
	case "median_ape_pct":
		return m.MedianAPE, m.Count
	case "p90_ape_pct":
		return m.P90APE, m.Count
	case "p99_ape_pct":
		return m.P99APE, m.Count
	}
	return math.Abs(m.MeanBias), m.Count
}

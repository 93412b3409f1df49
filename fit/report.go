package fit

import (
	"fmt"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// FitReport is what `steplab fit` prints (and writes with --json): the
// fitted coefficients with their intervals, the metrics in sample and
// out of fold, the worst steps, and where the model went.
type FitReport struct {
	Output    string           `json:"output,omitempty"` // artifact path
	Form      string           `json:"form"`
	Method    string           `json:"method,omitempty"`
	Target    string           `json:"target"`
	Datasets  []fpm.DatasetRef `json:"datasets"`
	Selection fpm.Selection    `json:"selection"`
	Rows      int              `json:"rows"`
	// Relabelled rows were admission-step decode points read at their
	// benchmark coordinates (LoadOptions.BenchmarkCoords).
	Relabelled   int               `json:"relabelled_decode_points,omitempty"`
	Warnings     []string          `json:"warnings,omitempty"`
	Dropped      []DroppedTerm     `json:"dropped_terms,omitempty"`
	Coefficients []fpm.Coefficient `json:"coefficients,omitempty"`
	// Grid form: what the build did.
	Grid *GridStats `json:"grid,omitempty"`
	// Recipe form: what was fitted per kind, and the calibration.
	Recipe *RecipeReport `json:"recipe,omitempty"`
	// Training is the in-sample evaluation; CV the k-fold one (nil with
	// --cv 0 or 1). Worst steps carry their dataset in WorstDatasets.
	Training      Report    `json:"training"`
	CV            *CVResult `json:"cross_validation,omitempty"`
	WorstDatasets []string  `json:"worst_datasets,omitempty"`
	Plots         []string  `json:"plots,omitempty"`
}

// RecipeReport is the recipe part of a FitReport.
type RecipeReport struct {
	Level    float64      `json:"level"`
	Kinds    []KindReport `json:"kinds"`
	Warnings []string     `json:"warnings,omitempty"`
	// Calibration: the datasets the residual quantiles were calibrated on
	// (FitConfig.Calibrate) and what changed.
	CalibrationDatasets []fpm.DatasetRef   `json:"calibration_datasets,omitempty"`
	CalibrationHalf     int                `json:"calibration_half,omitempty"`
	Calibration         []CalibratedRegion `json:"calibration,omitempty"`
}

// EvalReport is what `steplab eval` prints: a model evaluated on
// datasets it was (presumably) not fitted on.
type EvalReport struct {
	Model      string           `json:"model"`
	Form       string           `json:"form"`
	Target     string           `json:"target"`
	Datasets   []fpm.DatasetRef `json:"datasets"`
	Selection  fpm.Selection    `json:"selection"`
	Rows       int              `json:"rows"`
	Relabelled int              `json:"relabelled_decode_points,omitempty"`
	Warnings   []string         `json:"warnings,omitempty"`
	Report     Report           `json:"report"`
	// Intervals is the empirical coverage of the model's prediction
	// intervals (models that have them).
	Intervals *IntervalReport `json:"intervals,omitempty"`
	// BeyondGrid counts the steps priced beyond the model's measured grid
	// (nil when none is).
	BeyondGrid    *BeyondGrid `json:"beyond_grid,omitempty"`
	WorstDatasets []string    `json:"worst_datasets,omitempty"`
	Plots         []string    `json:"plots,omitempty"`
}

// WorstDatasetsOf names the dataset of each of r's worst steps.
func WorstDatasetsOf(l *Loaded, r Report) []string {
	if l == nil || len(l.Refs) < 2 {
		return nil
	}
	out := make([]string, len(r.Worst))
	for i, w := range r.Worst {
		out[i] = l.DatasetOf(w.Row)
	}
	return out
}

// WriteCoefficients prints a coefficient table: term, value, interval,
// in the units a perf engineer reads (ns per unit of the term).
func WriteCoefficients(w io.Writer, coefs []fpm.Coefficient) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "term\tcoefficient\tinterval\tunit\t")
	for _, c := range coefs {
		iv := "-"
		if c.Level > 0 {
			iv = fmt.Sprintf("[%s, %s] %.0f%%", num(c.Lo), num(c.Hi), 100*c.Level)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", c.Term, num(c.Value), iv, termUnit(c.Term))
	}
	tw.Flush()
}

func termUnit(t string) string {
	switch t {
	case fpm.TermConst, fpm.TermPrefillStep:
		return "ns/step"
	case fpm.TermPrefillTokens, fpm.TermNewReqTokens:
		return "ns/token"
	case fpm.TermPrefillKVTokens, fpm.TermDecodeKVTokens, fpm.TermDecodeMaxKV, fpm.TermDecodeBatchMaxKV:
		return "ns/KV token"
	case fpm.TermDecodeKVStd:
		return "ns/token of spread"
	case fpm.TermPrefillAttn:
		return "ns/(token·KV)"
	case fpm.TermPaddedBatch:
		return "ns/slot"
	}
	if strings.HasPrefix(t, fpm.TermExpertsReached+"(") {
		return "ns/expert"
	}
	return "ns/request"
}

// num formats a number compactly (4 significant digits).
func num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case x == 0:
		return "0"
	}
	return fmt.Sprintf("%.4g", x)
}

func r2s(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return fmt.Sprintf("%.4f", x)
}

// WriteMetrics prints the metrics table of a report: overall, per kind
// (sorted) and per batch-size bucket; errors in percent, RMSE in ms.
func WriteMetrics(w io.Writer, r Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scope\tn\tMAPE %\tmedian %\tp90 %\tp99 %\tRMSE ms\tR²\tbias %\t")
	row := func(name string, m Metrics) {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%s\t%+.2f\t\n", name, m.Count, m.MAPE, m.MedianAPE, m.P90APE, m.P99APE, m.RMSE/1e6, r2s(m.R2), m.MeanBias)
	}
	row("all", r.Overall)
	kinds := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		row("kind="+k, r.ByKind[k])
	}
	for _, b := range r.ByBucket {
		row("batch "+b.Bucket, b.Metrics)
	}
	tw.Flush()
}

// WriteWorst prints the worst steps (datasets may be nil).
func WriteWorst(w io.Writer, r Report, datasets []string) {
	if len(r.Worst) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "step_id\tkind\tbatch\tactual ms\tpredicted ms\tAPE %\t"
	if datasets != nil {
		head += "dataset\t"
	}
	fmt.Fprintln(tw, head)
	for i, s := range r.Worst {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.3f\t%.3f\t%.1f\t", s.StepID, s.Kind, s.Batch, s.ActualNs/1e6, s.PredictedNs/1e6, s.APE)
		if datasets != nil && i < len(datasets) {
			fmt.Fprintf(tw, "%s\t", datasets[i])
		}
		if len(s.BeyondGrid) > 0 {
			fmt.Fprintf(tw, "beyond grid: %s", strings.Join(s.BeyondGrid, ", "))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// WriteText prints a fit report as `steplab fit` does.
func (r *FitReport) WriteText(w io.Writer) {
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", s)
	}
	fmt.Fprintf(w, "%s model fitted on %d rows of %d dataset(s), target %s", r.Form, r.Rows, len(r.Datasets), r.Target)
	if r.Method != "" {
		fmt.Fprintf(w, ", method %s", r.Method)
	}
	fmt.Fprintln(w)
	if sm := r.Selection.Sample; sm != nil {
		fmt.Fprintf(w, "a uniform sample of %d of the %d selected rows: at most %d per step kind (--max-rows-per-kind), seed %d\n",
			sm.Kept, sm.Selected, sm.PerKind, sm.Seed)
	}
	if r.Relabelled > 0 {
		fmt.Fprintf(w, "%d admission-step decode points read at their benchmark coordinates\n", r.Relabelled)
	}
	for _, d := range r.Dropped {
		fmt.Fprintf(w, "dropped term %s: %s\n", d.Term, d.Reason)
	}
	for _, n := range r.identified() {
		fmt.Fprintln(w, n)
	}
	if len(r.Coefficients) > 0 {
		fmt.Fprintln(w)
		WriteCoefficients(w, r.Coefficients)
	}
	if r.Recipe != nil {
		r.Recipe.WriteText(w)
	}
	if r.Grid != nil {
		fmt.Fprintf(w, "\ngrid: %d decode rows in %d cells (%d missing), %d prefill rows, %d mixed skipped, up to %d repeats per node\n",
			r.Grid.DecodeRows, r.Grid.DecodeCells, r.Grid.MissingCells, r.Grid.PrefillRows, r.Grid.SkippedMixed, r.Grid.MaxRepeats)
	}
	fmt.Fprintln(w, "\nin-sample error:")
	WriteMetrics(w, r.Training)
	if r.CV != nil {
		fmt.Fprintf(w, "\n%d-fold cross-validation (seed %d), out-of-fold error:\n", r.CV.K, r.CV.Seed)
		WriteMetrics(w, r.CV.Report)
		fmt.Fprintln(w, "\nworst steps (out of fold):")
		WriteWorst(w, r.CV.Report, r.WorstDatasets)
	} else {
		fmt.Fprintln(w, "\nworst steps (in sample):")
		WriteWorst(w, r.Training, r.WorstDatasets)
	}
	if r.Output != "" {
		fmt.Fprintf(w, "\nmodel written to %s\n", r.Output)
	}
	for _, p := range r.Plots {
		fmt.Fprintf(w, "plot %s\n", p)
	}
}

// WriteText prints an evaluation report as `steplab eval` does.
func (r *EvalReport) WriteText(w io.Writer) {
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", s)
	}
	fmt.Fprintf(w, "%s model %s on %d rows of %d dataset(s), target %s\n\n", r.Form, r.Model, r.Rows, len(r.Datasets), r.Target)
	WriteMetrics(w, r.Report)
	if r.Intervals != nil {
		fmt.Fprintln(w)
		r.Intervals.WriteText(w)
	}
	fmt.Fprintln(w, "\nworst steps:")
	WriteWorst(w, r.Report, r.WorstDatasets)
	for _, p := range r.Plots {
		fmt.Fprintf(w, "plot %s\n", p)
	}
}

// FitConfig is a whole `steplab fit` run: what to read, how to fit, what
// to report.
type FitConfig struct {
	Load LoadOptions
	// Form is fpm.FormRecipe (default), fpm.FormLinear or
	// fpm.FormGrid.
	Form string
	// Linear options (Terms nil: fpm.DefaultTerms; Method: MethodNNLS).
	Linear Options
	Grid   GridOptions
	Recipe RecipeOptions
	// Calibrate names datasets whose steps (selected as the training rows
	// are, but for CalibrateHalf) calibrate the recipe's residual
	// quantiles (CalibrateRecipe).
	Calibrate     []string
	CalibrateHalf int
	// CV folds (0 or 1: no cross-validation) and the seed of the folds and
	// the bootstrap.
	CV   int
	Seed uint64
	// Worst steps listed (default 10).
	Worst int
	// PlotsDir, when set, receives the figures of WritePlots (out-of-fold
	// predictions with CV, in-sample otherwise).
	PlotsDir string
	// CreatedBy is recorded in the artifact (the command line).
	CreatedBy string
}

// FitDatasets loads the datasets, fits, cross-validates and returns the
// report and the artifact (training record and metrics filled; not yet
// saved).
func FitDatasets(paths []string, cfg FitConfig) (*FitReport, *fpm.Artifact, *Loaded, error) {
	l, err := LoadDatasets(paths, cfg.Load)
	if err != nil {
		return nil, nil, nil, err
	}
	worst := cfg.Worst
	if worst == 0 {
		worst = 10
	}
	d := l.Data
	rep := &FitReport{Form: cfg.Form, Target: d.Target, Datasets: l.Refs, Selection: l.Record(cfg.Load.Selection),
		Rows: d.Len(), Relabelled: l.Relabelled, Warnings: l.Warnings}
	if rep.Form == "" {
		rep.Form = fpm.FormRecipe
	}
	var ff formFit
	switch rep.Form {
	case fpm.FormLinear:
		ff, err = fitLinearForm(d, cfg, rep)
	case fpm.FormRecipe:
		ff, err = fitRecipeForm(d, cfg, rep)
	case fpm.FormGrid:
		ff, err = fitGridForm(d, cfg, rep)
	default:
		err = fmt.Errorf("fit: unknown form %q (want %s, %s or %s)", cfg.Form, fpm.FormRecipe, fpm.FormLinear, fpm.FormGrid)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	rep.Training = Evaluate(ff.model, d, worst)
	pred := make([]float64, d.Len())
	for i, f := range d.Features {
		pred[i] = ff.model.PredictNs(f)
	}
	if cfg.CV > 1 {
		cv, err := CrossValidate(d, cfg.CV, cfg.Seed, ff.refit, worst)
		if err != nil {
			return nil, nil, nil, err
		}
		rep.CV, pred = cv, cv.Predictions
		rep.WorstDatasets = WorstDatasetsOf(l, cv.Report)
	} else {
		rep.WorstDatasets = WorstDatasetsOf(l, rep.Training)
	}
	training := fpm.Training{Datasets: l.Refs, Selection: rep.Selection, Target: d.Target, Method: rep.Method, Rows: d.Len(), Seed: cfg.Seed, FittedOn: l.FittedOn}
	art, err := ff.artifact(rep, cfg, training)
	if err != nil {
		return nil, nil, nil, err
	}
	if cfg.PlotsDir != "" {
		if rep.Plots, err = WritePlots(cfg.PlotsDir, d, pred, ff.model, PlotOptions{Title: rep.Form + " fit"}); err != nil {
			return nil, nil, nil, err
		}
	}
	return rep, art, l, nil
}

// formFit is the model of one form fitted to the training rows, and how
// to refit it to a cross-validation fold.
type formFit struct {
	model fpm.FPM
	refit FitFunc
	// linear is the linear form's result (nil for the other forms), which
	// writes its own artifact.
	linear *Result
}

// fitLinearForm fits the linear form and records its method, dropped terms
// and coefficients in rep; folds refit the terms that survived the drop.
func fitLinearForm(d *Data, cfg FitConfig, rep *FitReport) (formFit, error) {
	opt := cfg.Linear
	opt.Seed = cfg.Seed
	res, err := Linear(d, opt)
	if err != nil {
		return formFit{}, err
	}
	rep.Method = res.Method
	rep.drop("", res.Dropped)
	rep.Coefficients = fpm.LinearArtifact(res.Model).Coefficients
	cvOpt := opt
	cvOpt.Bootstrap = 0
	cvOpt.Terms = res.Model.Terms // the terms that survived the drop
	cvOpt.Degenerate = DegenerateDrop
	refit := func(tr *Data) (fpm.FPM, error) {
		r, err := Linear(tr, cvOpt)
		if err != nil {
			return nil, err
		}
		return r.Model, nil
	}
	return formFit{model: res.Model, refit: refit, linear: res}, nil
}

// fitRecipeForm fits the recipe (calibrated on cfg.Calibrate, if set) and
// records its level, warnings, kinds and dropped terms in rep.
func fitRecipeForm(d *Data, cfg FitConfig, rep *FitReport) (formFit, error) {
	ropt := cfg.Recipe
	ropt.Seed = cfg.Seed
	rr, err := FitRecipe(d, ropt)
	if err != nil {
		return formFit{}, err
	}
	rep.Recipe = &RecipeReport{Level: rr.Model.Level, Warnings: rr.Warnings}
	rep.Warnings = append(rep.Warnings, rr.Warnings...)
	if len(cfg.Calibrate) > 0 {
		if err := calibrateFromDatasets(rr, cfg, d.Target, rep.Recipe); err != nil {
			return formFit{}, err
		}
	}
	rep.Recipe.Kinds = rr.Kinds
	for _, k := range rr.Kinds {
		rep.drop(k.Kind, k.Dropped)
		for _, g := range k.Regimes {
			rep.drop(k.Kind+" ("+g.Range+")", g.Dropped)
		}
	}
	rep.Method = "recipe"
	cvOpt := ropt
	cvOpt.Bootstrap, cvOpt.SkipResiduals = 0, true
	refit := func(tr *Data) (fpm.FPM, error) {
		r, err := FitRecipe(tr, cvOpt)
		if err != nil {
			return nil, err
		}
		return r.Model, nil
	}
	return formFit{model: rr.Model, refit: refit}, nil
}

// fitGridForm builds the grid and records its statistics in rep.
func fitGridForm(d *Data, cfg FitConfig, rep *FitReport) (formFit, error) {
	g, st, err := BuildGrid(d, cfg.Grid)
	if err != nil {
		return formFit{}, err
	}
	rep.Grid, rep.Method = st, "grid"
	refit := func(tr *Data) (fpm.FPM, error) {
		g, _, err := BuildGrid(tr, cfg.Grid)
		return g, err
	}
	return formFit{model: g, refit: refit}, nil
}

// artifact is the fitted model's artifact, with its training record and
// the report's training and cross-validation metrics.
func (ff formFit) artifact(rep *FitReport, cfg FitConfig, training fpm.Training) (*fpm.Artifact, error) {
	metrics := struct {
		Training Report    `json:"training"`
		CV       *CVResult `json:"cross_validation,omitempty"`
	}{rep.Training, rep.CV}
	switch {
	case ff.linear != nil:
		return ff.linear.Artifact(training, metrics, cfg.CreatedBy)
	case rep.Recipe != nil:
		art := &fpm.Artifact{ArtifactVersion: fpm.ArtifactVersion, Form: fpm.FormRecipe, Recipe: ff.model.(*fpm.Recipe)}
		for _, dt := range rep.Dropped {
			art.Notes = append(art.Notes, fmt.Sprintf("term %s dropped: %s", dt.Term, dt.Reason))
		}
		art.Notes = append(art.Notes, rep.identified()...)
		training.Bootstrap = cfg.Recipe.Bootstrap
		return art, finishArtifact(art, training, metrics, cfg.CreatedBy, recipeFeatures(art.Recipe))
	default:
		art := fpm.GridArtifact(ff.model.(*fpm.Grid))
		return art, finishArtifact(art, training, metrics, cfg.CreatedBy, []string{"prefill_tokens", "decode_requests", "decode_kv_tokens"})
	}
}

// drop records terms a fit left out because the data cannot identify them
// (of one step kind's model, for a recipe). The report says so once, in
// its text and its JSON; a log line would say it twice.
// identified lists what the recipe's kinds say of the settings their rows
// identified or it assumed (KindReport.Identified), each after its kind.
func (r *FitReport) identified() []string {
	if r.Recipe == nil {
		return nil
	}
	var out []string
	for _, k := range r.Recipe.Kinds {
		for _, n := range k.Identified {
			out = append(out, k.Kind+" steps: "+n)
		}
	}
	return out
}

func (r *FitReport) drop(kind string, terms []DroppedTerm) {
	for _, dt := range terms {
		if kind != "" {
			dt.Reason = kind + " steps: " + dt.Reason
		}
		r.Dropped = append(r.Dropped, dt)
	}
}

// recipeFeatures lists the coordinates and terms a recipe uses.
func recipeFeatures(r *fpm.Recipe) []string {
	var out []string
	for _, k := range r.Kinds {
		if k.Table != nil {
			out = append(out, k.Table.Coords()...)
		}
		out = append(out, k.Terms...)
		if g := k.Regimes; g != nil {
			out = append(out, g.Coord)
			for _, p := range g.Pieces {
				out = append(out, p.Terms...)
			}
		}
	}
	return out
}

// calibrateFromDatasets loads the calibration datasets with the training
// selection and target, and calibrates the recipe on them.
func calibrateFromDatasets(rr *RecipeResult, cfg FitConfig, target string, rep *RecipeReport) error {
	load := cfg.Load
	load.Target, load.Selection.Half = target, cfg.CalibrateHalf
	l, err := LoadDatasets(cfg.Calibrate, load)
	if err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	ids := make([]string, len(l.Refs))
	for i, r := range l.Refs {
		ids[i] = r.ID
	}
	cal, err := CalibrateRecipe(rr.Model, l.Data, cfg.Recipe.MinRows, SourceCalibration+" on "+strings.Join(ids, ", "))
	if err != nil {
		return err
	}
	rep.CalibrationDatasets, rep.Calibration, rep.CalibrationHalf = l.Refs, cal, cfg.CalibrateHalf
	rr.summarizeResiduals()
	return nil
}

// EvalConfig is a `steplab eval` (or check) run.
type EvalConfig struct {
	Load     LoadOptions
	Worst    int
	PlotsDir string
	// Level is the nominal coverage of the prediction intervals whose
	// empirical coverage is reported (0: the model's own, fpm.LevelOf;
	// negative: none).
	Level float64
}

// EvalTarget is the timing a model is evaluated on: the configured one, or
// under auto the target the model was fitted on (recorded in its
// artifact), or auto.
func EvalTarget(cfg string, a *fpm.Artifact) string {
	if (cfg == "" || cfg == TargetAuto) && a != nil && a.Training.Target != "" {
		return a.Training.Target
	}
	return cfg
}

// EvalDatasets evaluates the model an FPM spec names on the datasets: an
// artifact, or a prior built for the first dataset's manifest
// (pricing.ForDatasets), whose notes become the report's warnings.
func EvalDatasets(spec string, paths []string, cfg EvalConfig) (*EvalReport, *Loaded, error) {
	p, err := pricing.ForDatasets(spec, paths)
	if err != nil {
		return nil, nil, err
	}
	rep, l, err := EvalModel(p.FPM, p.Artifact, pricing.Name(p), paths, cfg)
	if err != nil {
		return nil, nil, err
	}
	rep.Warnings = append(rep.Warnings, p.Notes...)
	return rep, l, nil
}

// EvalModel evaluates a model on the datasets: one loaded from an
// artifact a (its training target is the default), or a prior built
// without one (a nil; named by name, evaluated on device time where the
// data has it).
func EvalModel(m fpm.FPM, a *fpm.Artifact, name string, paths []string, cfg EvalConfig) (*EvalReport, *Loaded, error) {
	cfg.Load.Target = EvalTarget(cfg.Load.Target, a)
	l, err := LoadDatasets(paths, cfg.Load)
	if err != nil {
		return nil, nil, err
	}
	worst := cfg.Worst
	if worst == 0 {
		worst = 10
	}
	d := l.Data
	form := "prior"
	if a != nil {
		form = a.Form
	}
	rep := &EvalReport{Model: name, Form: form, Target: d.Target, Datasets: l.Refs, Selection: l.Record(cfg.Load.Selection),
		Rows: d.Len(), Relabelled: l.Relabelled, Warnings: slices.Concat(l.Warnings, l.ProvenanceNotes(name, a)), Report: Evaluate(m, d, worst)}
	if level := fpm.IntervalLevel(m, cfg.Level); level > 0 {
		rep.Intervals = EvaluateIntervals(m.(fpm.IntervalFPM), d, level)
		if w := rep.Intervals.Warning(); w != "" {
			rep.Warnings = append(rep.Warnings, w)
		}
	} else if note := fpm.NoUncertainty(m, name); note != "" && cfg.Level >= 0 {
		rep.Warnings = append(rep.Warnings, note)
	}
	if rep.BeyondGrid = countBeyond(m, d); rep.BeyondGrid != nil {
		rep.Warnings = append(rep.Warnings, rep.BeyondGrid.Warning(d.Len()))
	}
	for i := range rep.Report.Worst {
		rep.Report.Worst[i].BeyondGrid = BeyondAxes(m, d.Features[rep.Report.Worst[i].Row])
	}
	rep.WorstDatasets = WorstDatasetsOf(l, rep.Report)
	if cfg.PlotsDir != "" {
		pred := make([]float64, d.Len())
		for i, f := range d.Features {
			pred[i] = m.PredictNs(f)
		}
		if rep.Plots, err = WritePlots(cfg.PlotsDir, d, pred, m, PlotOptions{Title: "eval " + filepath.Base(name)}); err != nil {
			return nil, nil, err
		}
	}
	return rep, l, nil
}

// CheckModel evaluates m (loaded from artifact a, or a prior built without
// one: a nil) on the datasets and applies the bounds of opt, whose
// Baseline, when set, is evaluated on the same rows. The returned error is
// about input only: a failed gate is a report with Passed false (and
// Err() wrapping ErrCheckFailed).
func CheckModel(m fpm.FPM, a *fpm.Artifact, name string, paths []string, load LoadOptions, opt CheckOptions) (*CheckReport, error) {
	if opt.Baseline == nil && opt.MaxRegression > 0 {
		return nil, fmt.Errorf("check: a regression bound needs a baseline model")
	}
	load.Target = EvalTarget(load.Target, a)
	l, err := LoadDatasets(paths, load)
	if err != nil {
		return nil, err
	}
	r, err := Check(m, l.Data, opt)
	if err != nil {
		return nil, err
	}
	r.Model, r.Datasets, r.Warnings = name, l.Refs, slices.Concat(l.Warnings, l.ProvenanceNotes(name, a))
	return r, nil
}

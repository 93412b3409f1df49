package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm"
)

func init() { register(newFitCmd) }

// selectionFlags are the row-selection flags shared by fit, eval and check.
type selectionFlags struct {
	roles, kinds    []string
	target          string
	half            int
	allowInvalid    bool
	benchmarkCoords bool
	uniform         bool
}

func (s *selectionFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&s.roles, "roles", nil, "roles to use, comma-separated (default measured,production; scaffolding is never used)")
	cmd.Flags().StringSliceVar(&s.kinds, "kinds", nil, "step kinds to use: prefill, decode, mixed (default all)")
	cmd.Flags().StringVar(&s.target, "target", fit.TargetAuto, "timing to model: auto (gpu_time_ns when every row has it, else wall_time_ns), gpu_time_ns or wall_time_ns")
	cmd.Flags().BoolVar(&s.allowInvalid, "allow-invalid", false, "keep rows marked valid=false")
	cmd.Flags().IntVar(&s.half, "half", 0, "keep half 1 or 2 of the rows (by a hash of step_id; e.g. to test on the half a calibration did not see)")
	cmd.Flags().BoolVar(&s.uniform, "uniform", false, "keep only the rows a uniform B × context benchmark records: prefill steps and decode steps whose requests read one context (no mixed steps, no ragged batches)")
	cmd.Flags().BoolVar(&s.benchmarkCoords, "benchmark-coords", false, "read admission-step decode benchmark points at their benchmark coordinates (B decode requests, their KV), as a benchmark database records them")
}

func (s *selectionFlags) options() fit.LoadOptions {
	return fit.LoadOptions{Selection: fit.Selection{Roles: s.roles, Kinds: s.kinds, AllowInvalid: s.allowInvalid, Half: s.half, Uniform: s.uniform},
		Target: s.target, BenchmarkCoords: s.benchmarkCoords}
}

// fitOpts are fit's flags.
type fitOpts struct {
	sel                                                 selectionFlags
	out, form, terms, solver, plots, degenerate, policy string
	calibrate                                           []string
	cv, boot, worst, calibrateHalf, maxRows             int
	seed                                                uint64
	level                                               float64
	relative, asJSON, force, experts                    bool
}

func newFitCmd() *cobra.Command {
	var o fitOpts
	cmd := &cobra.Command{
		Use:   "fit DATASET... -o FPM.json",
		Short: "Fit a forward-pass model to steps and say how good it is",
		Long: `fit reads the steps tables of one or more datasets, keeps the rows worth
fitting (roles measured and production, valid rows, never scaffolding),
fits a step-time model, cross-validates it and writes a versioned model
artifact: the form, coefficients with bootstrap intervals, the features,
the training datasets (id, path, SHA-256 of their manifests), the row
selection and the metrics.

It prints the coefficients with their intervals, the error table (overall,
per step kind and per batch-size bucket: n, MAPE, median/p90/p99 absolute
percentage error, RMSE, R², mean bias) in sample and out of fold, and the
worst steps. --json prints the same as JSON.

Forms:
  recipe (the default) picks the form per step kind from the data:
    interpolation inside the measured hull of the kind's benchmark grid
    (prefill: prefill tokens × requests × context; decode: batch × context
    per request, uniform batches), a non-negative linear basis outside it
    (the prediction says it extrapolated; decode: the longest context and
    the batch padded to it, split into batch-size regimes where the grid's
    held-out error says so), mixed steps as prefill plus the marginal cost
    of their decode work unless measured mixed steps are priced better by
    a basis of their own. Every prediction
    carries an interval at --level from the coefficient bootstrap and the
    held-out residuals; --calibrate DATASET replaces those residuals by
    the recipe's on DATASET (a calibration split of the traffic to price;
    evaluate on other traffic).
  linear: a non-negative linear basis; --terms picks it: "default",
    "decode" = const,decode_requests,decode_kv_tokens, or a list of
    const, prefill_step, prefill_tokens, prefill_kv_tokens, prefill_attn,
    prefill_requests, decode_requests, decode_kv_tokens, decode_max_kv,
    decode_batch_max_kv, decode_kv_std, padded_batch, new_requests,
    new_req_tokens. Giving --terms, --solver, --relative or
    --degenerate without --form selects it.
  grid: interpolation over benchmark coordinates.
Solvers: nnls (default), huber-nn and huber (robust to outlier steps),
ols (unconstrained reference).

Terms the data cannot identify (zero on every row, constant, or a linear
combination of terms earlier in the basis) are left out of the default
basis with a warning, listed in the report and noted in the artifact: a
decode grid has no prefill KV reads, a trace without prefix hits no cached
prefill. Terms named with --terms are held strictly (the fit is refused,
naming them) unless --degenerate drop; --degenerate error refuses always.
The artifact records the step kinds the selected rows have.

A dataset whose manifest says its decode points were measured on the
admission step gets a loud warning: those timings include admission work
that production decode never pays (docs/architecture.md, R3). Given beside
steady-state or production datasets it is left out and the fit says so
(--policy all pools them, --policy NAME fits one policy). --uniform fits
only what a uniform B × context grid records (docs/fitting.md).

Examples, from the repository root (the committed H200 grid and traffic):
  steplab fit datasets/h200/bench-steady -o out/fit-model.json
  steplab fit datasets/h200/bench-steady --kinds decode --terms decode --target wall_time_ns \
      --cv 5 --bootstrap 200 --plots out/fit-figs/ -o out/fit-decode.json
  steplab fit datasets/h200/traffic-azure-5rps datasets/h200/traffic-azure-12rps --solver huber-nn --json -o out/fit-traffic.json
  steplab fit datasets/h200/bench-steady --form grid -o out/fit-grid.json
  steplab fit datasets/h200/bench-steady --calibrate datasets/h200/traffic-azure-12rps -o out/fit-recipe.json
  steplab fit datasets/h200/bench-steady --calibrate datasets/h200/traffic-azure-5rps --calibrate-half 1 -o out/fit-recipe-half.json
  steplab eval out/fit-recipe-half.json datasets/h200/traffic-azure-5rps --half 2
  steplab fit datasets/h200/qwen2.5-7b/bench-steady --uniform -o out/fit-uniform.json
  steplab fit datasets/h200/bench-admission datasets/h200/bench-steady -o out/fit-policy.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: o.run,
	}
	o.flags(cmd)
	return cmd
}

func (o *fitOpts) flags(cmd *cobra.Command) {
	o.sel.add(cmd)
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "model artifact to write (JSON)")
	cmd.Flags().StringVar(&o.form, "form", fpm.FormRecipe, "model form: recipe, linear or grid")
	cmd.Flags().StringSliceVar(&o.calibrate, "calibrate", nil, "datasets whose steps calibrate the recipe's interval residuals (comma-separated or repeated)")
	cmd.Flags().IntVar(&o.calibrateHalf, "calibrate-half", 0, "calibrate on half 1 or 2 of the calibration rows only (evaluate on the other with --half)")
	cmd.Flags().Float64Var(&o.level, "level", fpm.DefaultLevel, "nominal coverage of the recipe's prediction intervals")
	cmd.Flags().BoolVar(&o.experts, "experts-reached", false, "recipe: price a mixture of experts' decode steps by the experts their tokens reach (from the manifests' routing; docs/fitting.md#mixtures-of-experts)")
	cmd.Flags().StringVar(&o.terms, "terms", "default", "linear terms: default, decode, or a comma-separated list")
	cmd.Flags().StringVar(&o.solver, "solver", fit.MethodNNLS, "solver: nnls, huber-nn, huber or ols")
	cmd.Flags().BoolVar(&o.relative, "relative", false, "minimise relative rather than absolute error (weights 1/y²)")
	cmd.Flags().StringVar(&o.degenerate, "degenerate", fit.DegenerateAuto, "terms the data cannot identify (zero, constant, or a combination of others): drop (leave them out, and say so), error (refuse), or auto (drop unless --terms names them)")
	cmd.Flags().IntVar(&o.cv, "cv", 5, "k-fold cross-validation folds (0: none)")
	forceFlag(cmd, &o.force)
	cmd.Flags().IntVar(&o.boot, "bootstrap", 200, "bootstrap replicates for coefficient intervals (0: none)")
	cmd.Flags().Uint64Var(&o.seed, "seed", 1, "seed of the folds and the bootstrap")
	cmd.Flags().IntVar(&o.worst, "worst", 10, "worst steps to list")
	cmd.Flags().IntVar(&o.maxRows, "max-rows-per-kind", fit.DefaultMaxRowsPerKind, "fit on a uniform sample of at most this many rows of each step kind (0: every row); bounds memory on long datasets")
	cmd.Flags().StringVar(&o.policy, "policy", fit.PolicyAuto, "datasets of different decode measurement policies: auto (fit the steady-state and production ones, leave admission-step ones out and say so), all (pool them), or a policy name (fit the datasets of that policy alone)")
	cmd.Flags().StringVar(&o.plots, "plots", "", "directory for figures (PNG and SVG)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the report as JSON")
}

// run fits the datasets args, writes the artifact and prints the report.
func (o *fitOpts) run(cmd *cobra.Command, args []string) error {
	if err := refuseExisting("fit", o.out, o.force); err != nil {
		return err
	}
	cfg, err := o.config(cmd)
	if err != nil {
		return err
	}
	stop := spin(cmd, "fitting")
	rep, art, _, err := fit.FitDatasets(args, cfg)
	stop()
	if err != nil {
		return inputError("fit", err)
	}
	if err := art.Save(o.out); err != nil {
		return err
	}
	rep.Output = o.out
	if o.asJSON {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	rep.WriteText(cmd.OutOrStdout())
	return nil
}

// config checks the flags (bad ones exit 2) and makes the fit's
// configuration of them: the linear-only flags select the linear form.
func (o *fitOpts) config(cmd *cobra.Command) (fit.FitConfig, error) {
	if o.boot < 0 || o.cv < 0 || o.cv == 1 || o.worst < 0 {
		return fit.FitConfig{}, &exitError{code: 2, msg: fmt.Sprintf("fit: --bootstrap %d, --cv %d, --worst %d: use --bootstrap 0 or more, --cv 0 (none) or 2 or more, --worst 0 or more", o.boot, o.cv, o.worst)}
	}
	ts, err := fit.ResolveTerms(o.terms)
	if err != nil {
		return fit.FitConfig{}, inputError("fit", err)
	}
	if !cmd.Flags().Changed("terms") {
		ts = nil // the default basis: terms the data cannot identify are dropped under --degenerate auto
	}
	linearFlags := false
	for _, f := range []string{"terms", "solver", "relative", "degenerate"} {
		linearFlags = linearFlags || cmd.Flags().Changed(f)
	}
	if !cmd.Flags().Changed("form") && linearFlags {
		o.form = fpm.FormLinear
	}
	if o.form != fpm.FormLinear && linearFlags {
		return fit.FitConfig{}, &exitError{code: 2, msg: "fit: --terms, --solver, --relative and --degenerate apply to the linear form only"}
	}
	if o.form != fpm.FormRecipe && (len(o.calibrate) > 0 || cmd.Flags().Changed("level") || o.experts) {
		return fit.FitConfig{}, &exitError{code: 2, msg: "fit: --calibrate, --level and --experts-reached apply to the recipe form only"}
	}
	if o.calibrateHalf != 0 && len(o.calibrate) == 0 {
		return fit.FitConfig{}, &exitError{code: 2, msg: "fit: --calibrate-half needs --calibrate DATASET"}
	}
	if !(o.level > 0 && o.level < 1) {
		return fit.FitConfig{}, &exitError{code: 2, msg: fmt.Sprintf("fit: --level %v: want a coverage in (0, 1), e.g. 0.9", o.level)}
	}
	cfg := fit.FitConfig{
		Load: o.sel.options(), Form: o.form,
		Linear:    fit.Options{Terms: ts, Method: o.solver, Relative: o.relative, Degenerate: o.degenerate, Bootstrap: o.boot},
		Recipe:    fit.RecipeOptions{Bootstrap: o.boot, Level: o.level},
		Calibrate: o.calibrate, CalibrateHalf: o.calibrateHalf,
		CV: o.cv, Seed: o.seed, Worst: o.worst, PlotsDir: o.plots,
		CreatedBy: strings.Join(append([]string{"steplab"}, os.Args[1:]...), " "),
	}
	cfg.Load.MaxRowsPerKind, cfg.Load.SampleSeed, cfg.Load.Policy = o.maxRows, o.seed, o.policy
	if o.experts {
		cfg.Recipe.Kinds = fit.ExpertsKindSpecs()
	}
	if o.maxRows < 0 {
		return fit.FitConfig{}, &exitError{code: 2, msg: fmt.Sprintf("fit: --max-rows-per-kind %d: want 0 (every row) or a positive bound", o.maxRows)}
	}
	if o.cv == 1 || o.cv < 0 {
		return fit.FitConfig{}, &exitError{code: 2, msg: fmt.Sprintf("fit: --cv %d: want 0 (none) or at least 2 folds", o.cv)}
	}
	return cfg, nil
}

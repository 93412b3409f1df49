package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/model"
)

func init() { register(newFitCmd) }

// selectionFlags are the row-selection flags shared by fit, eval and check.
type selectionFlags struct {
	roles, kinds    []string
	target          string
	allowInvalid    bool
	benchmarkCoords bool
}

func (s *selectionFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&s.roles, "roles", nil, "roles to use, comma-separated (default measured,production; scaffolding is never used)")
	cmd.Flags().StringSliceVar(&s.kinds, "kinds", nil, "step kinds to use: prefill, decode, mixed (default all)")
	cmd.Flags().StringVar(&s.target, "target", fit.TargetAuto, "timing to model: auto (gpu_time_ns when every row has it, else wall_time_ns), gpu_time_ns or wall_time_ns")
	cmd.Flags().BoolVar(&s.allowInvalid, "allow-invalid", false, "keep rows marked valid=false")
	cmd.Flags().BoolVar(&s.benchmarkCoords, "benchmark-coords", false, "read admission-step decode benchmark points at their benchmark coordinates (B decode requests, their KV), as a benchmark database records them")
}

func (s *selectionFlags) options() fit.LoadOptions {
	return fit.LoadOptions{Selection: fit.Selection{Roles: s.roles, Kinds: s.kinds, AllowInvalid: s.allowInvalid},
		Target: s.target, BenchmarkCoords: s.benchmarkCoords}
}

// inputError wraps a library error as exit status 2 (usage or input),
// prefixed with the command unless the library named it already.
func inputError(cmd string, err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, cmd+": ") {
		msg = cmd + ": " + msg
	}
	return &exitError{code: 2, msg: msg}
}

func newFitCmd() *cobra.Command {
	var sel selectionFlags
	var out, form, terms, solver, plots, degenerate string
	var cv, boot, worst int
	var seed uint64
	var relative, asJSON bool
	cmd := &cobra.Command{
		Use:   "fit DATASET... -o MODEL.json",
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

Forms: linear (a non-negative linear basis; --terms picks it: "default",
"decode" = const,decode_requests,decode_kv_tokens, or a list of
const, prefill_step, prefill_tokens, prefill_kv_tokens, prefill_attn,
prefill_requests, decode_requests, decode_kv_tokens, padded_batch,
new_requests, new_req_tokens) or grid (interpolation over benchmark
coordinates). Solvers: nnls (default), huber-nn and huber (robust to
outlier steps), ols (unconstrained reference).

A dataset whose manifest says its decode points were measured on the
admission step gets a loud warning: those timings include admission work
that production decode never pays (DESIGN.md §8 R3).

Examples:
  steplab fit runs/bench -o model.json
  steplab fit runs/bench --kinds decode --terms decode --target wall_time_ns \
      --cv 5 --bootstrap 200 --plots figs/ -o decode.json
  steplab fit runs/trace-a runs/trace-b --solver huber-nn --json -o model.json
  steplab fit runs/bench --form grid -o grid.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &exitError{code: 2, msg: "fit: no output file: use -o MODEL.json"}
			}
			ts, err := fit.ResolveTerms(terms)
			if err != nil {
				return inputError("fit", err)
			}
			if form == "grid" && cmd.Flags().Changed("terms") {
				return &exitError{code: 2, msg: "fit: --terms applies to the linear form only"}
			}
			cfg := fit.FitConfig{
				Load: sel.options(), Form: form,
				Linear: fit.Options{Terms: ts, Method: solver, Relative: relative, Degenerate: degenerate, Bootstrap: boot},
				CV:     cv, Seed: seed, Worst: worst, PlotsDir: plots,
				CreatedBy: strings.Join(append([]string{"steplab"}, os.Args[1:]...), " "),
			}
			if cv == 1 || cv < 0 {
				return &exitError{code: 2, msg: fmt.Sprintf("fit: --cv %d: want 0 (none) or at least 2 folds", cv)}
			}
			rep, art, _, err := fit.FitDatasets(args, cfg)
			if err != nil {
				return inputError("fit", err)
			}
			if err := art.Save(out); err != nil {
				return err
			}
			rep.Output = out
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			rep.WriteText(cmd.OutOrStdout())
			return nil
		},
	}
	sel.add(cmd)
	cmd.Flags().StringVarP(&out, "output", "o", "", "model artifact to write (JSON)")
	cmd.Flags().StringVar(&form, "form", model.FormLinear, "model form: linear or grid")
	cmd.Flags().StringVar(&terms, "terms", "default", "linear terms: default, decode, or a comma-separated list")
	cmd.Flags().StringVar(&solver, "solver", fit.MethodNNLS, "solver: nnls, huber-nn, huber or ols")
	cmd.Flags().BoolVar(&relative, "relative", false, "minimise relative rather than absolute error (weights 1/y²)")
	cmd.Flags().StringVar(&degenerate, "degenerate", fit.DegenerateError, "terms the data does not vary: error (refuse) or drop (leave them out, and say so)")
	cmd.Flags().IntVar(&cv, "cv", 5, "k-fold cross-validation folds (0: none)")
	cmd.Flags().IntVar(&boot, "bootstrap", 200, "bootstrap replicates for coefficient intervals (0: none)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the folds and the bootstrap")
	cmd.Flags().IntVar(&worst, "worst", 10, "worst steps to list")
	cmd.Flags().StringVar(&plots, "plots", "", "directory for figures (PNG and SVG)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

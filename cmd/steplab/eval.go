package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm/opdb"
)

func init() { register(newEvalCmd) }

func newEvalCmd() *cobra.Command {
	var sel selectionFlags
	var plots string
	var worst int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "eval FPM DATASET...",
		Short: "Evaluate a model on held-out datasets",
		Long: `eval predicts every selected step of the datasets with a model and reports
the error: overall, per step kind and per batch-size bucket (n, MAPE,
median/p90/p99 absolute percentage error, RMSE, R², mean bias), and the worst
steps. Use datasets the model was not fitted on: that is the error a planner
will see on new traffic.

FPM is a forward-pass model: a model artifact, or a prior built for the first dataset's hardware
and model shape (its manifest): "roofline", or the measured-operations prior
"ops" (the kernel database shipped for the GPU), "ops:NAME" (a shipped
database: ` + strings.Join(opdb.Names(), ", ") + `) or "ops:DIR" (a database directory
in AIConfigurator's layout; see docs/ops-prior.md).

The timing evaluated is the one the model was fitted on (recorded in the
artifact; device time for a prior) unless --target says otherwise. Row
selection is as in fit.

For a model with prediction intervals it reports their coverage, and warns
(in --json too) when the overall coverage is outside the nominal level ± 5
points. Steps beyond the largest batch or context the model's grid
measured are flagged in the worst steps ("beyond grid") and counted
(beyond_grid). A model that records no uncertainty says so instead of
reporting intervals of zero width.

Examples, from the repository root (the committed H200 models and traffic):
  steplab eval datasets/h200/models/steady-decode.json datasets/h200/traffic-azure-12rps
  steplab eval datasets/h200/models/steady-decode.json datasets/h200/traffic-azure-5rps \
      datasets/h200/traffic-azure-12rps --kinds decode --json
  steplab eval ops datasets/h200/traffic-azure-5rps
  steplab eval datasets/h200/models/steady-decode.json datasets/h200/traffic-azure-12rps --plots out/eval-figs/`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := fit.EvalConfig{Load: sel.options(), Worst: worst, PlotsDir: plots}
			stop := spin(cmd, "evaluating")
			rep, err := evalSpec(args[0], args[1:], cfg)
			stop()
			if err != nil {
				return inputError("eval", err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			rep.WriteText(cmd.OutOrStdout())
			return nil
		},
	}
	sel.add(cmd)
	cmd.Flags().StringVar(&plots, "plots", "", "directory for figures (PNG and SVG)")
	cmd.Flags().IntVar(&worst, "worst", 10, "worst steps to list")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func evalSpec(spec string, paths []string, cfg fit.EvalConfig) (*fit.EvalReport, error) {
	rep, _, err := fit.EvalDatasets(spec, paths, cfg)
	return rep, err
}

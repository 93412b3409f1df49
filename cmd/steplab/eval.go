package main

import (
	"github.com/spf13/cobra"

	"github.com/steplab/steplab/fit"
)

func init() { register(newEvalCmd) }

func newEvalCmd() *cobra.Command {
	var sel selectionFlags
	var plots string
	var worst int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "eval MODEL DATASET...",
		Short: "Evaluate a model on held-out datasets",
		Long: `eval predicts every selected step of the datasets with a model artifact and
reports the error: overall, per step kind and per batch-size bucket (n, MAPE,
median/p90/p99 absolute percentage error, RMSE, R², mean bias), and the worst
steps. Use datasets the model was not fitted on: that is the error a planner
will see on new traffic.

The timing evaluated is the one the model was fitted on (recorded in the
artifact) unless --target says otherwise. Row selection is as in fit.

Examples:
  steplab eval model.json runs/production
  steplab eval model.json runs/prod-a runs/prod-b --kinds decode --json
  steplab eval model.json runs/production --plots figs/`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, _, err := fit.EvalDatasets(args[0], args[1:], fit.EvalConfig{Load: sel.options(), Worst: worst, PlotsDir: plots})
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

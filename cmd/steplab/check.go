package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/fit"
)

func init() { register(newCheckCmd) }

func newCheckCmd() *cobra.Command {
	var sel selectionFlags
	var baseline, junit string
	var opt fit.CheckOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check MODEL DATASET... --max-mape X [--max-p90 Y] [--baseline OLD.json --max-regression Z]",
		Short: "Gate CI on a model's error: exit 1 when it misses a bound or regresses",
		Long: `check evaluates a model on datasets (held-out steps) and applies bounds, overall
and per step kind:

  --max-mape X        mean absolute percentage error ≤ X %
  --max-p90 Y         90th percentile of the absolute percentage error ≤ Y %
  --baseline OLD.json another model (e.g. the last release) evaluated on the
  --max-regression Z  same rows: fail when MAPE grows by more than Z
                      percentage points (0: any growth fails)

Exit status: 0 when every check passes; 1 when any fails, with a table of
what failed (metric, scope, value, bound); 2 on usage or input errors (a
missing file, an empty selection, bad timings). --junit writes one JUnit
testcase per check for the CI's test report; --json prints the full report.

Examples:
  steplab check model.json runs/heldout --max-mape 8
  steplab check model.json runs/heldout --max-mape 8 --max-p90 15 \
      --baseline release.json --max-regression 1 --junit report.xml
  steplab check model.json runs/heldout --kinds decode --max-mape 5 --json`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opt.MaxMAPE == 0 && opt.MaxP90 == 0 && baseline == "" {
				return &exitError{code: 2, msg: "check: nothing to check: give --max-mape, --max-p90 or --baseline"}
			}
			if cmd.Flags().Changed("max-regression") && baseline == "" {
				return &exitError{code: 2, msg: "check: --max-regression needs --baseline OLD.json"}
			}
			r, err := fit.CheckDatasets(args[0], baseline, args[1:], sel.options(), opt)
			if err != nil {
				return inputError("check", err)
			}
			if junit != "" {
				f, err := os.Create(junit)
				if err != nil {
					return &exitError{code: 2, msg: "check: " + err.Error()}
				}
				werr := r.WriteJUnit(f)
				if cerr := f.Close(); werr == nil {
					werr = cerr
				}
				if werr != nil {
					return &exitError{code: 2, msg: "check: writing " + junit + ": " + werr.Error()}
				}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(w, r); err != nil {
					return err
				}
			} else {
				for _, s := range r.Warnings {
					fmt.Fprintf(w, "WARNING: %s\n", s)
				}
				fmt.Fprintf(w, "%s on %d rows: overall MAPE %.2f%%, p90 %.2f%%\n\n", args[0], r.Report.Overall.Count, r.Report.Overall.MAPE, r.Report.Overall.P90APE)
				r.WriteTable(w, false)
			}
			if err := r.Err(); err != nil {
				if !asJSON {
					fmt.Fprintln(w, "\nFAILED:")
					r.WriteTable(w, true)
				}
				return &exitError{code: 1, msg: err.Error()}
			}
			if !asJSON {
				fmt.Fprintf(w, "\nPASS: %d checks\n", len(r.Checks))
			}
			return nil
		},
	}
	sel.add(cmd)
	cmd.Flags().Float64Var(&opt.MaxMAPE, "max-mape", 0, "bound on MAPE in percent, overall and per kind (0: not checked)")
	cmd.Flags().Float64Var(&opt.MaxP90, "max-p90", 0, "bound on the p90 absolute percentage error in percent (0: not checked)")
	cmd.Flags().StringVar(&baseline, "baseline", "", "baseline model artifact evaluated on the same rows")
	cmd.Flags().Float64Var(&opt.MaxRegression, "max-regression", 0, "allowed MAPE growth over the baseline, percentage points")
	cmd.Flags().StringVar(&junit, "junit", "", "write a JUnit XML report here")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/pricing"
)

func init() { register(newCheckCmd) }

func newCheckCmd() *cobra.Command {
	var sel selectionFlags
	var baseline, junit, bounds string
	var opt fit.CheckOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check FPM DATASET... --max-mape X [--max-p90 Y] [--baseline OLD.json --max-regression Z] | check --bounds FILE",
		Short: "Gate CI on a model's error: exit 1 when it misses a bound or regresses",
		Long: `check evaluates a model on datasets (held-out steps) and applies bounds, overall
and per step kind:

  --max-mape X        mean absolute percentage error ≤ X %
  --max-p90 Y         90th percentile of the absolute percentage error ≤ Y %
  --baseline OLD.json another model (e.g. the last release) evaluated on the
  --max-regression Z  same rows: fail when MAPE grows by more than Z
                      percentage points (0: any growth fails)

--bounds FILE runs a bounds file instead: for each model and dataset pair
it names (a model artifact, a fit run on the spot, or a roofline prior),
the metrics (mape_pct, p90_ape_pct, coverage_pct, ...) per scope (overall,
kind=KIND, region=REGION) and their bounds (max, min), with the target
each metric is meant to reach reported beside it (docs/fitting.md).

Exit status: 0 when every check passes; 1 when any fails, with a table of
what failed (metric, scope, value, bound); 2 on usage or input errors (a
missing file, an empty selection, bad timings). --junit writes one JUnit
testcase per check for the CI's test report; --json prints the full report.

Examples, from the repository root (the committed H200 models and traffic):
  steplab check datasets/h200/models/steady-decode.json datasets/h200/traffic-azure-5rps --kinds decode --max-mape 10
  steplab check datasets/h200/models/steady-decode.json datasets/h200/traffic-azure-12rps --kinds decode \
      --max-mape 10 --max-p90 20 \
      --baseline datasets/h200/models/admission-decode.json --max-regression 1 --junit out/check-report.xml
  steplab check datasets/h200/models/steady-decode.json datasets/h200/traffic-azure-5rps --kinds decode --max-mape 10 --json
  steplab check --bounds checks.yaml --junit out/bounds.xml`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if bounds != "" {
				if len(args) > 0 || opt.MaxMAPE != 0 || opt.MaxP90 != 0 || baseline != "" {
					return &exitError{code: 2, msg: "check: --bounds FILE takes no FPM, DATASET or bound flags: the file names them"}
				}
				return runBounds(cmd, cmd.OutOrStdout(), bounds, junit, asJSON)
			}
			if len(args) < 2 {
				return &exitError{code: 2, msg: "check: give FPM DATASET... with bounds, or --bounds FILE"}
			}
			if opt.MaxMAPE == 0 && opt.MaxP90 == 0 && baseline == "" {
				return &exitError{code: 2, msg: "check: nothing to check: give --max-mape, --max-p90 or --baseline"}
			}
			if cmd.Flags().Changed("max-regression") && baseline == "" {
				return &exitError{code: 2, msg: "check: --max-regression needs --baseline OLD.json"}
			}
			stop := spin(cmd, "checking")
			r, err := checkSpec(args[0], baseline, args[1:], sel.options(), opt)
			stop()
			if err != nil {
				return inputError("check", err)
			}
			if err := writeJUnitFile(junit, r.WriteJUnit); err != nil {
				return err
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
			}
			return gateResult(w, r, len(r.Checks), asJSON)
		},
	}
	sel.add(cmd)
	cmd.Flags().Float64Var(&opt.MaxMAPE, "max-mape", 0, "bound on MAPE in percent, overall and per kind (0: not checked)")
	cmd.Flags().Float64Var(&opt.MaxP90, "max-p90", 0, "bound on the p90 absolute percentage error in percent (0: not checked)")
	cmd.Flags().StringVar(&baseline, "baseline", "", "baseline model artifact evaluated on the same rows")
	cmd.Flags().Float64Var(&opt.MaxRegression, "max-regression", 0, "allowed MAPE growth over the baseline, percentage points")
	cmd.Flags().StringVar(&junit, "junit", "", "write a JUnit XML report here")
	cmd.Flags().StringVar(&bounds, "bounds", "", "run the checks of a bounds file (YAML) instead of FPM DATASET...")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// writeJUnitFile writes a JUnit report to path (nothing when path is
// empty), atomically.
func writeJUnitFile(path string, write func(io.Writer) error) error {
	if path == "" {
		return nil
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return &exitError{code: 2, msg: "check: writing " + path + ": " + err.Error()}
	}
	if err := datasets.WriteFileAtomic(path, buf.Bytes()); err != nil {
		return &exitError{code: 2, msg: "check: writing " + path + ": " + err.Error()}
	}
	return nil
}

// runBounds runs a bounds file: exit status 1 when a bound is breached.
func runBounds(cmd *cobra.Command, w io.Writer, path, junit string, asJSON bool) error {
	stop := spin(cmd, "checking bounds")
	r, err := fit.CheckBounds(path)
	stop()
	if err != nil {
		return inputError("check", err)
	}
	if err := writeJUnitFile(junit, r.WriteJUnit); err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(w, r); err != nil {
			return err
		}
	} else {
		for _, s := range r.Warnings {
			fmt.Fprintf(w, "WARNING: %s\n", s)
		}
		for _, e := range r.Evaluations {
			fmt.Fprintf(w, "%s: %s on %d rows: MAPE %.2f%%, p90 %.2f%%", e.Name, e.Model, e.Report.Overall.Count, e.Report.Overall.MAPE, e.Report.Overall.P90APE)
			if e.Intervals != nil {
				fmt.Fprintf(w, ", %.1f%% inside the %.0f%% intervals", e.Intervals.Overall.Pct, 100*e.Intervals.Level)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
	return gateResult(w, r, len(r.Checks), asJSON)
}

// gate is a check report: a table of checks and whether they all passed.
type gate interface {
	Err() error
	WriteTable(w io.Writer, failedOnly bool)
}

// gateResult prints the table of checks (unless JSON was printed) and the
// verdict: exit status 1 when a check failed.
func gateResult(w io.Writer, g gate, n int, asJSON bool) error {
	if !asJSON {
		g.WriteTable(w, false)
	}
	if err := g.Err(); err != nil {
		if !asJSON {
			fmt.Fprintln(w, "\nFAILED:")
			g.WriteTable(w, true)
		}
		return &exitError{code: 1, msg: "check: " + err.Error()}
	}
	if !asJSON {
		fmt.Fprintf(w, "\nPASS: %d checks\n", n)
	}
	return nil
}

// checkSpec gates the model spec (an artifact or a prior, as eval takes
// it) on the datasets, with a baseline spec ("" for none) on the same rows.
func checkSpec(spec, baseline string, paths []string, load fit.LoadOptions, opt fit.CheckOptions) (*fit.CheckReport, error) {
	p, err := pricing.ForDatasets(spec, paths)
	if err != nil {
		return nil, err
	}
	notes := p.Notes
	if baseline != "" {
		b, err := pricing.ForDatasets(baseline, paths)
		if err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
		opt.Baseline, opt.BaselineName = b.FPM, pricing.Name(b)
		notes = append(notes, b.Notes...)
	}
	r, err := fit.CheckModel(p.FPM, p.Artifact, pricing.Name(p), paths, load, opt)
	if err != nil {
		return nil, err
	}
	r.Warnings = append(r.Warnings, notes...)
	return r, nil
}

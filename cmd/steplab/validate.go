package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/catalog/manifest"
	"github.com/steplab/steplab/datasets/validate"
)

func init() { register(newValidateCmd) }

func newValidateCmd() *cobra.Command {
	var asJSON bool
	var maxV int
	cmd := &cobra.Command{
		Use:   "validate DIR",
		Short: "Check a dataset against the data contract and its timing invariants",
		Long: `validate reads a dataset directory and reports every violation of the data
contract (docs/architecture.md#data-contract) with its table, row (0-based across the table's part
files), part file, field and a message. It exits 1 if any violation is an
error, 0 otherwise; warnings (a partial dataset, what a minimal manifest.json
left to assume, columns absent and read as their defaults) do not fail it. A
directory of tables without manifest.json is not a dataset (exit status 2):
the error says how to write one, or to wrap a table with steplab import table.

It checks:
  manifest     present, schema version readable, status; each listed part
               exists with its rows, size and sha256 (partial datasets: the
               completed parts and rows are listed)
  columns      every required column, in a type that converts, per part
  steps        t_schedule_start <= t_schedule_end <= t_dispatch <= t_output
               <= t_update_end (-1 = unknown, skipped); narrow_time_ns =
               t_output - t_schedule_start; wall_time_ns = t_output(N) -
               t_update_end(N-1) when step N was scheduled before N-1's update
               ended, t_output - t_schedule_start after idle and for a
               worker's first step (Dynamo's FPM definition); no negative ints
               but -1; var_* finite and >= 0 (or -1); kind and role in their enums;
               kind agrees with the prefill/decode counts; step_id increasing
               per (worker_id, dp_rank); valid=false rows carry a reason
  join         the counts of each step against its step_requests rows
               (new, cached, resumed, prefill, decode, scheduled tokens,
               prefill tokens); every row belongs to a step and a request
  requests     req_id unique; arrival <= first scheduled <= first token <=
               finish where known; token counts >= 0; status in its enum

Memory stays bounded by one step's rows, except a set of the req_ids of the
requests table.

Examples, from the repository root:
  steplab validate datasets/h200/traffic-azure-5rps            # human table, exit 1 on errors
  steplab validate datasets/h200/traffic-azure-5rps --max 20   # show the first 20 violations
  steplab validate datasets/h200/traffic-azure-5rps --json | jq '.violations[] | select(.level=="error")'
  steplab validate datasets/h200/bench-steady && steplab fit datasets/h200/bench-steady -o out/validated-model.json   # gate a pipeline on it`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stop := spin(cmd, "validating")
			r, err := validate.Dataset(args[0], validate.Options{Max: maxV, Settings: manifest.Check})
			stop()
			if err != nil {
				return &exitError{code: 2, msg: "validate: " + err.Error()}
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), r); err != nil {
					return err
				}
			} else if err := r.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if !r.OK() {
				msg := ""
				if asJSON {
					msg = fmt.Sprintf("%s: %d errors", args[0], r.Errors)
				}
				return &exitError{code: 1, msg: msg}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().IntVar(&maxV, "max", 100, "show at most N violations (0: all); counts stay exact")
	return cmd
}

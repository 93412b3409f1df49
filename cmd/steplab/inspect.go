package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/datasets/inspect"
)

func init() { register(newInspectCmd) }

func newInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect PATH",
		Short: "Summarise a dataset directory, or describe any Parquet file",
		Long: `inspect summarises what a dataset holds, or describes a single Parquet file
written by any tool (pyarrow, pandas, Spark, DuckDB, steplab).

For a dataset directory it prints: the manifest highlights (status, source and
its sha256, hardware, model, engine limits, measurement policy), rows per
table, the time span of steps and requests, steps per kind and role, the
wall-time distribution in ms (count, mean, p50, p90, p99, max) per kind and
batch-size bucket (batch = num_prefill_requests + num_decode_requests; buckets
1, 2-4, 5-8, ..., 257-512, >512), payload bytes per kind, and the requests'
token percentiles, statuses and arrival rate. Percentiles are exact
(nearest rank); steps whose wall_time_ns is -1 (unknown) are counted apart.

For a Parquet file it prints the schema (column, physical and logical type,
repetition, compression, bytes), the row groups (rows, bytes), the row count
and the key-value metadata keys.

Examples, from the repository root:
  steplab inspect datasets/h200/traffic-azure-5rps
  steplab inspect datasets/h200/traffic-azure-5rps --json | jq '.steps.wall_time'
  steplab inspect datasets/h200/traffic-azure-5rps/steps.parquet/part-000000.parquet
  steplab inspect fpm/opdb/data/h200-sxm-vllm-0.24.0/gemm/gemm_perf.parquet --json | jq '.columns[].name'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			st, err := os.Stat(path)
			if err != nil {
				return &exitError{code: 2, msg: "inspect: " + err.Error()}
			}
			if st.IsDir() {
				s, err := inspect.Dataset(path)
				if err != nil {
					return &exitError{code: 2, msg: "inspect: " + err.Error()}
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), s)
				}
				return s.WriteText(cmd.OutOrStdout())
			}
			fi, err := inspect.File(path)
			if err != nil {
				return &exitError{code: 2, msg: "inspect: " + err.Error()}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), fi)
			}
			return fi.WriteText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON (the same fields as the tables)")
	return cmd
}

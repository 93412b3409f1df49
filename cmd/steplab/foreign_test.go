package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
	"github.com/steplab/steplab/fit"
)

var foreignFixtures = filepath.Join("..", "..", "datasets", "testdata", "foreign")

// foreignCase is one table written by another tool, as a user brings it:
// the file (or folder) as <table>.parquet beside a minimal manifest.
type foreignCase struct {
	writer, file, table string
	// validateErr is a substring of every validate error ("" for a valid
	// dataset); fitErr of fit's error ("" when fit succeeds).
	validateErr, fitErr string
}

// What `steplab validate` and `steplab fit` say of the tables DuckDB and
// pandas/pyarrow wrote: each steps table recovers the generator's
// coefficients (60 ns per prefill token, 25 µs per decode request, 9 ns per
// decode KV token); the bad inputs get errors that name the column.
func TestForeignTablesCLI(t *testing.T) {
	cases := []foreignCase{
		{writer: "duckdb", file: "steps_uncompressed.parquet", table: "steps"},
		{writer: "duckdb", file: "steps_snappy.parquet", table: "steps"},
		{writer: "duckdb", file: "steps_gzip.parquet", table: "steps"},
		{writer: "duckdb", file: "steps_zstd.parquet", table: "steps"},
		{writer: "duckdb", file: "steps_brotli.parquet", table: "steps"},
		{writer: "duckdb", file: "steps_lz4.parquet", table: "steps"},
		{writer: "duckdb", file: "steps_lz4_raw.parquet", table: "steps"},
		{writer: "duckdb", file: "steps_page_v2.parquet", table: "steps"},
		{writer: "duckdb", file: "steps_types.parquet", table: "steps"},
		{writer: "duckdb", file: "steps_row_groups.parquet", table: "steps"},
		{writer: "duckdb", file: "steps_files", table: "steps"},
		{writer: "duckdb", file: "steps_partitioned", table: "steps"},
		{writer: "duckdb", file: "requests.parquet", table: "requests", fitErr: "has no steps table"},
		{writer: "duckdb", file: "steps_float_wall.parquet", table: "steps",
			validateErr: `column "wall_time_ns" has type DOUBLE, steplab reads it as int64`, fitErr: `column "wall_time_ns" has type DOUBLE`},
		{writer: "duckdb", file: "steps_renamed.parquet", table: "steps",
			validateErr: "missing column", fitErr: `missing columns "step_id", "kind"`},
	}
	pyarrow := filepath.Join(foreignFixtures, "pyarrow")
	if _, err := os.Stat(filepath.Join(pyarrow, "fixtures")); err == nil {
		b, err := os.ReadFile(filepath.Join(pyarrow, "FIXTURES"))
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(f[0], "#") {
				c := foreignCase{writer: "pyarrow", file: f[0], table: f[1]}
				if c.table != datasets.TableSteps {
					c.fitErr = "has no steps table"
				}
				cases = append(cases, c)
			}
		}
	} else {
		t.Log("no pyarrow fixtures yet (datasets/testdata/foreign/pyarrow/make_fixtures.py writes them): DuckDB cases only")
	}
	for _, tc := range cases {
		t.Run(tc.writer+"/"+tc.file, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			src := filepath.Join(foreignFixtures, tc.writer, "fixtures", tc.file)
			dst := datasets.TableDir(dir, tc.table)
			if st, err := os.Stat(src); err == nil && st.IsDir() {
				require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
			} else {
				b, err := os.ReadFile(src)
				require.NoError(t, err)
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(dst, b, 0o644))
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, datasets.ManifestFile), []byte(`{"schema_version": 1,
  "hardware": {"gpu_name": "H200"}, "model": {"name": "Llama-3.1-8B"},
  "measurement_policy": {"decode": "production", "prefill": "production"}}`), 0o644))

			out, err := runCLI(t, "validate", dir, "--json")
			var rep validate.Report
			require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
			if tc.validateErr == "" {
				require.NoError(t, err, out)
				require.Zero(t, rep.Errors, out)
				require.Positive(t, rep.RowsChecked[tc.table])
			} else {
				require.Equal(t, 1, exitCode(err))
				require.Positive(t, rep.Errors)
				for _, v := range rep.Violations {
					if v.Level == validate.Error {
						require.Contains(t, v.Message, tc.validateErr)
					}
				}
			}
			warned := 0
			for _, v := range rep.Violations {
				if v.Table == validate.TableManifest && v.Level == validate.Warning {
					warned++
				}
			}
			require.Equal(t, 2, warned, "the minimal manifest's two assumptions are warnings")

			t.Logf("validate: %d errors, %d warnings, rows %v", rep.Errors, rep.Warnings, rep.RowsChecked)

			out, err = runCLI(t, "fit", dir, "-o", filepath.Join(t.TempDir(), "model.json"), "--degenerate", "drop", "--json")
			if tc.fitErr != "" {
				require.ErrorContains(t, err, tc.fitErr)
				require.NotContains(t, err.Error(), "fit: fit:")
				t.Logf("%v", err)
				return
			}
			require.NoError(t, err, out)
			var fr fit.FitReport
			require.NoError(t, json.Unmarshal([]byte(out), &fr), out)
			require.Equal(t, "wall_time_ns", fr.Target, "gpu_time_ns is all null: Unknown, so wall time")
			coef := map[string]float64{}
			for _, c := range fr.Coefficients {
				coef[c.Term] = c.Value
			}
			require.InEpsilon(t, 60, coef["prefill_tokens"], 0.05)
			require.InEpsilon(t, 25000, coef["decode_requests"], 0.02)
			require.InEpsilon(t, 9, coef["decode_kv_tokens"], 0.02)
			t.Logf("fit: %d rows, prefill_tokens %.2f, decode_requests %.0f, decode_kv_tokens %.3f, MAPE %.2f%%",
				fr.Rows, coef["prefill_tokens"], coef["decode_requests"], coef["decode_kv_tokens"], fr.Training.Overall.MAPE)
		})
	}
}

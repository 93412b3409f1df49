package datasets

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// foreignDir is where the fixtures written by other tools live, one folder
// per tool, each with the script that wrote them.
var foreignDir = filepath.Join("testdata", "foreign")

// foreignDataset makes a dataset of one foreign table (a file or a folder
// of files) beside a minimal manifest, as a user would.
func foreignDataset(t *testing.T, src, table string) *Dataset {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	copyTable(t, src, TableDir(dir, table))
	writeMinimalManifest(t, dir)
	d, err := Open(dir)
	require.NoError(t, err)
	return d
}

// copyTable copies a table file or folder to dst.
func copyTable(t *testing.T, src, dst string) {
	t.Helper()
	st, err := os.Stat(src)
	require.NoError(t, err)
	if st.IsDir() {
		require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
		return
	}
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, b, 0o644))
}

// The DuckDB fixtures hold the same steps written every way DuckDB writes
// them: each reads, through steplab, to the rows of the zstd file (the
// narrow, unsigned, float32 and TIMESTAMP columns of steps_types converted
// back to the schema's types), and where node is installed DuckDB agrees on
// the row count and sums.
func TestDuckDBFixtures(t *testing.T) {
	fx := filepath.Join(foreignDir, "duckdb", "fixtures")
	ref, err := ReadAll[Step](foreignDataset(t, filepath.Join(fx, "steps_zstd.parquet"), TableSteps), TableSteps)
	require.NoError(t, err)
	require.Len(t, ref, 600)
	require.Equal(t, Step{
		StepID: 0, WorkerID: "w0", Kind: KindPrefill, Role: RoleProduction, BenchmarkID: -1, Valid: true,
		NumNewReqs: -1, NumCachedReqs: -1, NumResumedReqs: -1, NumPreempted: -1, NumFinished: -1,
		NumPrefillRequests: 1, SumPrefillTokens: 256, VarPrefillLength: -1, VarDecodeKVTokens: -1,
		TotalScheduledTokens: -1, PaddedTokens: -1, PayloadBytes: -1, PayloadNewBytes: -1, PayloadCachedBytes: -1,
		TScheduleStart: 1714521600000000000, TScheduleEnd: 1714521600000040000, TDispatch: 1714521600000090000,
		TOutput: 1714521600002005000, TUpdateEnd: 1714521600002155000, WallTimeNs: 2005000, NarrowTimeNs: 2005000,
		GPUTimeNs: -1, HostPrepNs: -1, WorkerRecvNs: -1, SampleNs: -1, NumWaiting: -1, NumRunning: -1,
		KVBlocksUsed: -1, KVBlocksTotal: -1, MaxDecodeKVTokens: -1, SumPrefillAttn: -1, NewReqTokens: -1, CUDAGraphSize: -1,
	}, ref[0], "defaults fill what the file lacks; the null gpu_time_ns reads Unknown")

	var query func(sql ...string) []map[string]any
	if _, err := os.Stat(filepath.Join(duckDBProject, "node_modules")); err == nil {
		query = duckDB(t)
	}
	for _, name := range []string{
		"steps_uncompressed.parquet", "steps_snappy.parquet", "steps_gzip.parquet", "steps_brotli.parquet",
		"steps_lz4.parquet", "steps_lz4_raw.parquet", "steps_page_v2.parquet", "steps_types.parquet",
		"steps_row_groups.parquet", "steps_files", "steps_partitioned", "steps_by_kind", "steps_decimal.parquet",
	} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(fx, name)
			got, err := ReadAll[Step](foreignDataset(t, src, TableSteps), TableSteps)
			require.NoError(t, err)
			switch name {
			case "steps_types.parquet":
				for i := range got {
					want := ref[i]
					want.TScheduleEnd, want.TDispatch = got[i].TScheduleEnd, got[i].TDispatch // rounded to the ms there
					want.VarPrefillLength, want.TotalScheduledTokens = got[i].VarPrefillLength, got[i].TotalScheduledTokens
					require.Equal(t, want, got[i], "row %d", i)
					require.Equal(t, int64(0), got[i].TScheduleEnd%1e6, "a TIMESTAMP(MILLIS) in ns")
					require.Equal(t, want.SumPrefillTokens+int64(want.NumDecodeRequests), got[i].TotalScheduledTokens)
				}
			case "steps_row_groups.parquet", "steps_files":
				require.Len(t, got, 4200)
				require.Equal(t, ref, got[:600], "the same generator")
			case "steps_partitioned":
				require.Len(t, got, 1200)
				workers := map[string]int{}
				for _, s := range got {
					workers[s.WorkerID]++
					require.Equal(t, "w"+string(rune('0'+s.StepID%2)), s.WorkerID, "worker_id from the key=value directory")
				}
				require.Equal(t, map[string]int{"w0": 600, "w1": 600}, workers)
			case "steps_by_kind":
				require.Len(t, got, 1200)
				for i, s := range got {
					want := map[int64]string{0: "prefill", 5: "mixed"}[s.StepID%10]
					require.Equal(t, cmp.Or(want, "decode"), s.Kind, "row %d: kind from the key=value directory", i)
				}
				require.Equal(t, []string{"decode", "mixed", "prefill"}, []string{got[0].Kind, got[960].Kind, got[1199].Kind}, "kind=... folders in key order")
			default:
				require.Equal(t, ref, got)
			}
			if query == nil {
				return
			}
			glob := src
			if st, _ := os.Stat(src); st.IsDir() {
				glob = filepath.Join(src, "**", "*.parquet")
			}
			var wall, kv int64
			for _, s := range got {
				wall += s.WallTimeNs
				kv += s.SumDecodeKVTokens
			}
			rows := query("SELECT count(*)::BIGINT AS n, sum(wall_time_ns)::BIGINT AS wall, sum(sum_decode_kv_tokens)::BIGINT AS kv FROM read_parquet('" + glob + "')")
			require.Equal(t, int64(len(got)), asInt(t, rows[0]["n"]))
			require.Equal(t, wall, asInt(t, rows[0]["wall"]))
			require.Equal(t, kv, asInt(t, rows[0]["kv"]))
		})
	}

	t.Run("requests.parquet", func(t *testing.T) {
		got, err := ReadAll[Request](foreignDataset(t, filepath.Join(fx, "requests.parquet"), TableRequests), TableRequests)
		require.NoError(t, err)
		require.Len(t, got, 300)
		require.Equal(t, Request{ReqID: "1000", ArrivalNs: 1714521600000000000, PromptTokens: 200, OutputTokens: 20,
			FirstScheduledNs: -1, FirstTokenNs: 1714521600025000000, FinishNs: 1714521600025000000 + 20*9000000,
			Status: StatusFinished}, got[0], "an integer req_id reads as its decimal text")
		require.Equal(t, Unknown, got[3].FinishNs, "a null finish_ns reads Unknown")
		require.Equal(t, int32(0), got[3].NumPreemptions%3)
	})

	t.Run("bad inputs", func(t *testing.T) {
		_, err := ReadAll[Step](foreignDataset(t, filepath.Join(fx, "steps_float_wall.parquet"), TableSteps), TableSteps)
		require.ErrorContains(t, err, `column "wall_time_ns" has type DOUBLE, steplab reads it as int64 (an integer column of any width): cast it to an integer type first`)
		_, err = ReadAll[Step](foreignDataset(t, filepath.Join(fx, "steps_decimal_fraction.parquet"), TableSteps), TableSteps)
		require.ErrorContains(t, err, `column "wall_time_ns": DECIMAL(18,3) value 2.005 is not a whole number, and steplab reads the column as int64: cast it first (DuckDB: CAST(col AS BIGINT)`)
		_, err = ReadAll[Step](foreignDataset(t, filepath.Join(fx, "steps_renamed.parquet"), TableSteps), TableSteps)
		require.ErrorContains(t, err, `missing columns "step_id", "kind", "num_prefill_requests", "sum_prefill_tokens", "sum_prefill_kv_tokens", "num_decode_requests", "sum_decode_kv_tokens", "wall_time_ns"`)
		require.ErrorContains(t, err, `"wall_ns", close to "wall_time_ns"`)
		var missing *MissingColumnsError
		require.ErrorAs(t, err, &missing)
		require.Equal(t, []string{"prefill_reqs"}, missing.Similar[2])
	})
}

// fixtureList reads a FIXTURES file: the file and the table of each
// fixture a script writes.
func fixtureList(t *testing.T, path string) [][2]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out [][2]string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		require.Len(t, f, 2, "%s: %q", path, line)
		out = append(out, [2]string{f[0], f[1]})
	}
	return out
}

// The pyarrow fixtures read to the same rows as the DuckDB ones: the same
// generator, written by pandas.
func TestPyarrowFixtures(t *testing.T) {
	dir := filepath.Join(foreignDir, "pyarrow", "fixtures")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no pyarrow fixtures yet: on a machine with pyarrow and pandas run `python3 datasets/testdata/foreign/pyarrow/make_fixtures.py %s` and commit them", filepath.ToSlash(filepath.Join("datasets", dir)))
	}
	fx := filepath.Join(foreignDir, "duckdb", "fixtures")
	refSteps, err := ReadAll[Step](foreignDataset(t, filepath.Join(fx, "steps_zstd.parquet"), TableSteps), TableSteps)
	require.NoError(t, err)
	refReqs, err := ReadAll[Request](foreignDataset(t, filepath.Join(fx, "requests.parquet"), TableRequests), TableRequests)
	require.NoError(t, err)
	for _, f := range fixtureList(t, filepath.Join(foreignDir, "pyarrow", "FIXTURES")) {
		file, table := f[0], f[1]
		t.Run(file, func(t *testing.T) {
			d := foreignDataset(t, filepath.Join(dir, file), table)
			if table == TableRequests {
				got, err := ReadAll[Request](d, TableRequests)
				require.NoError(t, err)
				require.Equal(t, refReqs, got)
				return
			}
			got, err := ReadAll[Step](d, TableSteps)
			require.NoError(t, err)
			require.Len(t, got, len(refSteps))
			for i := range got {
				want := refSteps[i]
				if strings.Contains(file, "timestamps") {
					// Written in milliseconds, rounded up.
					msUp := func(ns int64) int64 { return (ns + 999_999) / 1_000_000 * 1_000_000 }
					want.TScheduleEnd, want.TDispatch = msUp(want.TScheduleEnd), msUp(want.TDispatch)
				}
				require.Equal(t, want, got[i], "row %d", i)
			}
		})
	}
}

func TestSimilarColumns(t *testing.T) {
	have := []string{"step", "batch_kind", "prefill_reqs", "prefill_tokens", "prefill_kv_tokens", "WallTimeMs", "wall_ns", "host"}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"step_id", []string{"step"}},
		{"wall_time_ns", []string{"WallTimeMs", "wall_ns"}},
		{"num_prefill_requests", []string{"prefill_reqs"}},
		{"sum_prefill_tokens", []string{"prefill_tokens"}},
		{"sum_prefill_kv_tokens", []string{"prefill_kv_tokens"}},
		{"kind", []string{"batch_kind"}},
		{"gpu_time_ns", nil},
		{"host", nil}, // the same name is no suggestion
	} {
		require.Equal(t, tc.want, SimilarColumns(tc.name, have), tc.name)
	}
}

package importers

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

var duckdbFixtures = filepath.Join("..", "testdata", "foreign", "duckdb", "fixtures")

// renamedMap maps the user's names of steps_renamed.{parquet,csv} to the
// schema's.
var renamedMap = map[string]string{
	"step": "step_id", "batch_kind": "kind", "prefill_reqs": "num_prefill_requests", "prefill_tokens": "sum_prefill_tokens",
	"prefill_kv_tokens": "sum_prefill_kv_tokens", "decode_reqs": "num_decode_requests", "decode_kv_tokens": "sum_decode_kv_tokens",
	"wall_ns": "wall_time_ns",
}

func tableOpts(table string, m map[string]string) TableOptions {
	return TableOptions{Table: table, Map: m, Hardware: "H200", Model: "Llama-3.1-8B",
		PolicyDecode: datasets.PolicyProduction, PolicyPrefill: datasets.PolicyProduction}
}

func readSteps(t *testing.T, dir string) []datasets.Step {
	t.Helper()
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	rows, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	return rows
}

func TestImportTable(t *testing.T) {
	out := t.TempDir()
	// The reference: the same steps under the schema's names.
	ref := filepath.Join(out, "ref")
	res, err := ImportTable(filepath.Join(duckdbFixtures, "steps_zstd.parquet"), ref, tableOpts(datasets.TableSteps, nil))
	require.NoError(t, err)
	require.Equal(t, int64(600), res.Rows)
	refRows := readSteps(t, ref)
	require.Equal(t, int64(0), refRows[0].TScheduleStart, "instants start at 0")
	d, err := datasets.Open(ref)
	require.NoError(t, err)
	require.Empty(t, d.Assumptions, "a wrapped table has a full manifest")
	m := d.Manifest
	require.Equal(t, "H200", m.Hardware.GPUName, "names as given: tools look them up in the catalogue")
	require.Equal(t, "Llama-3.1-8B", m.Model.Name)
	require.Equal(t, datasets.PolicyProduction, m.MeasurementPolicy.Decode)
	require.Equal(t, TableFormat, m.Source.Format)
	require.Equal(t, "1714521600000000000", m.Source.Detail["time_origin_ns"])
	require.Len(t, m.Source.SHA256, 64)

	t.Run("keep the clock", func(t *testing.T) {
		o := tableOpts(datasets.TableSteps, nil)
		o.TimeOrigin = OriginKeep
		_, err := ImportTable(filepath.Join(duckdbFixtures, "steps_zstd.parquet"), filepath.Join(out, "abs"), o)
		require.NoError(t, err)
		rows := readSteps(t, filepath.Join(out, "abs"))
		require.Equal(t, int64(1714521600000000000), rows[0].TScheduleStart)
		require.Equal(t, refRows[7].TOutput+1714521600000000000, rows[7].TOutput)
	})
	for _, tc := range []struct{ name, src string }{
		{"renamed Parquet", "steps_renamed.parquet"},
		{"renamed CSV", "steps_renamed.csv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(out, tc.name)
			o := tableOpts(datasets.TableSteps, renamedMap)
			o.Extra = ExtraKeep
			res, err := ImportTable(filepath.Join(duckdbFixtures, tc.src), dir, o)
			require.NoError(t, err)
			require.Contains(t, res.Notes[len(res.Notes)-1], "kept in steps_extra.parquet")
			got := readSteps(t, dir)
			require.Len(t, got, 600)
			for i, r := range got {
				want := refRows[i]
				// the renamed table has no timeline: its times read Unknown
				want.TScheduleStart, want.TScheduleEnd, want.TDispatch, want.TOutput, want.TUpdateEnd, want.NarrowTimeNs = -1, -1, -1, -1, -1, -1
				want.WorkerID = "" // nor a worker
				require.Equal(t, want, r, "row %d", i)
			}
			extra, err := datasets.ScanFiles[struct {
				Host string `parquet:"host"`
				Step int64  `parquet:"step"`
			}]([]string{filepath.Join(dir, "steps_extra.parquet")}).Read(make([]struct {
				Host string `parquet:"host"`
				Step int64  `parquet:"step"`
			}, 1000))
			require.NoError(t, err)
			require.Equal(t, 600, extra)
		})
	}
	t.Run("partitioned folder", func(t *testing.T) {
		dir := filepath.Join(out, "part")
		_, err := ImportTable(filepath.Join(duckdbFixtures, "steps_partitioned"), dir, tableOpts(datasets.TableSteps, nil))
		require.NoError(t, err)
		rows := readSteps(t, dir)
		require.Len(t, rows, 1200)
		require.Equal(t, "w0", rows[0].WorkerID)
		require.Equal(t, "w1", rows[1199].WorkerID)
	})
	t.Run("requests with TIMESTAMP columns", func(t *testing.T) {
		dir := filepath.Join(out, "req")
		_, err := ImportTable(filepath.Join(duckdbFixtures, "requests.parquet"), dir, tableOpts(datasets.TableRequests, nil))
		require.NoError(t, err)
		d, err := datasets.Open(dir)
		require.NoError(t, err)
		rows, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
		require.NoError(t, err)
		require.Equal(t, datasets.Request{ReqID: "1000", ArrivalNs: 0, PromptTokens: 200, OutputTokens: 20, FirstScheduledNs: -1,
			FirstTokenNs: 25_000_000, FinishNs: 205_000_000, Status: datasets.StatusFinished}, rows[0])
		require.Equal(t, datasets.Unknown, rows[3].FinishNs, "Unknown stays Unknown")
	})
}

func TestImportTableErrors(t *testing.T) {
	renamed := filepath.Join(duckdbFixtures, "steps_renamed.parquet")
	bad := filepath.Join(t.TempDir(), "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("step_id,kind\n1,decode\n2\n"), 0o644))
	for _, tc := range []struct {
		name, src string
		opts      TableOptions
		want      string
	}{
		{"no table", renamed, TableOptions{Hardware: "H200", Model: "m"}, "no table: say which table the source holds"},
		{"other table", renamed, TableOptions{Table: "gpu_samples", Hardware: "H200", Model: "m"}, `table "gpu_samples": the wrapper writes steps or requests`},
		{"no hardware", renamed, TableOptions{Table: "steps", Map: renamedMap}, "say what ran: --hardware GPU and --model MODEL"},
		{"bad policy", renamed, TableOptions{Table: "steps", Hardware: "H200", Model: "m", PolicyDecode: "steady"}, `measurement policy "steady": want one of`},
		{"map key the source lacks", renamed, tableOpts("steps", map[string]string{"wall": "wall_time_ns"}), `--map wall=wall_time_ns: the source has no column "wall" (did you mean "wall_ns"?)`},
		{"map onto no column", renamed, tableOpts("steps", map[string]string{"wall_ns": "wall_time"}), `steps has no column "wall_time" (did you mean "wall_time_ns"?)`},
		{"required columns missing", renamed, tableOpts("steps", map[string]string{"step": "step_id"}),
			`steps needs columns the source lacks after the mapping: "kind" (closest: "batch_kind", --map batch_kind=kind)`},
		{"float where an integer goes", filepath.Join(duckdbFixtures, "steps_float_wall.parquet"), tableOpts("steps", nil),
			`column "wall_time_ns" has type DOUBLE, steplab reads it as int64`},
		{"renamed float column named by its own name", renamed, tableOpts("steps", map[string]string{"step": "step_id", "batch_kind": "kind", "prefill_reqs": "num_prefill_requests",
			"prefill_tokens": "sum_prefill_tokens", "prefill_kv_tokens": "sum_prefill_kv_tokens", "decode_reqs": "num_decode_requests",
			"decode_kv_tokens": "sum_decode_kv_tokens", "wall_ns": "wall_time_ns", "host": "worker_id"}), ""},
		{"ragged CSV", bad, tableOpts("steps", nil), "bad.csv"},
		{"not Parquet", bad + ".parquet", tableOpts("steps", nil), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			_, err := ImportTable(tc.src, dir, tc.opts)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			_, serr := os.Stat(dir)
			require.True(t, os.IsNotExist(serr), "a failed import leaves nothing at the final path")
			left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".*"))
			require.Empty(t, left, "nor a temporary dataset")
		})
	}
	t.Run("existing output", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "x"), nil, 0o644))
		_, err := ImportTable(renamed, dir, tableOpts("steps", renamedMap))
		require.ErrorContains(t, err, "already exists and is not empty")
	})
}

package inspect

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/require"
)

func writeDataset(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := datasets.Create(dir, datasets.Manifest{
		Source:            datasets.Source{Kind: "simulate", Format: "sim", SHA256: "abc"},
		Hardware:          &datasets.Hardware{GPUName: "H200", Simulated: true},
		Engine:            &datasets.EngineConfig{MaxNumSeqs: 256, MaxNumBatchedTokens: 8192},
		MeasurementPolicy: &datasets.MeasurementPolicy{Decode: datasets.PolicySteadyStateSecondStep},
	}, datasets.CreateOptions{})
	require.NoError(t, err)
	step := func(kind, role string, prefill, decode int32, wallMs float64, payload int64, tss, tue int64) datasets.Step {
		return datasets.Step{Kind: kind, Role: role, Valid: true, NumPrefillRequests: prefill, NumDecodeRequests: decode,
			WallTimeNs: int64(wallMs * 1e6), PayloadBytes: payload, TScheduleStart: tss, TOutput: tue - 10, TUpdateEnd: tue}
	}
	steps := []datasets.Step{
		step("decode", "production", 0, 1, 1, 100, 1_000, 2_000),
		step("decode", "production", 0, 1, 3, 300, 3_000, 4_000),
		step("decode", "production", 0, 1, 2, 200, 5_000, 6_000),
		step("decode", "measured", 0, 3, 10, 50, 7_000, 8_000),
		step("decode", "measured", 0, 600, 5, 50, 9_000, 10_000),
		step("prefill", "scaffolding", 2, 0, 0, 8000, 500, 900_000),
	}
	steps[5].WallTimeNs = datasets.Unknown
	steps[5].Valid = false
	steps[0].TScheduleStart = datasets.Unknown // unknown times do not start the span
	tw, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{PartRows: 4})
	require.NoError(t, err)
	require.NoError(t, tw.Write(steps))
	require.NoError(t, tw.Close())
	reqs := []datasets.Request{
		{ReqID: "a", ArrivalNs: 0, PromptTokens: 10, OutputTokens: 1, FinishNs: 5e9, Status: "finished"},
		{ReqID: "b", ArrivalNs: 1e9, PromptTokens: 30, OutputTokens: 2, FinishNs: -1, Status: "unfinished"},
		{ReqID: "c", ArrivalNs: 2e9, PromptTokens: 20, OutputTokens: 3, FinishNs: 3e9, Status: "finished"},
	}
	rw, err := datasets.NewTableWriter[datasets.Request](w, datasets.TableRequests, datasets.TableOptions{})
	require.NoError(t, err)
	require.NoError(t, rw.Write(reqs))
	require.NoError(t, rw.Close())
	require.NoError(t, w.Close())
	return dir
}

func TestDataset(t *testing.T) {
	dir := writeDataset(t)
	s, err := Dataset(dir)
	require.NoError(t, err)

	require.Equal(t, "complete", s.Manifest.Status)
	require.Equal(t, "H200", s.Manifest.Hardware.GPUName)
	require.Equal(t, 256, s.Manifest.Engine.MaxNumSeqs)
	require.Equal(t, datasets.PolicySteadyStateSecondStep, s.Manifest.MeasurementPolicy.Decode)
	require.Equal(t, "abc", s.Manifest.Source.SHA256)

	require.Len(t, s.Tables, 2)
	require.Equal(t, TableInfo{Name: "steps", Rows: 6, Parts: 2, Bytes: s.Tables[0].Bytes}, s.Tables[0])
	require.Positive(t, s.Tables[0].Bytes)
	require.Equal(t, int64(3), s.Tables[1].Rows)

	st := s.Steps
	require.Equal(t, int64(6), st.Rows)
	require.Equal(t, int64(1), st.Invalid)
	require.Equal(t, int64(1), st.WallUnknown)
	require.Equal(t, []Count{{"decode", 5}, {"prefill", 1}}, st.ByKind)
	require.Equal(t, []Count{{"production", 3}, {"measured", 2}, {"scaffolding", 1}}, st.ByRole, "most frequent first")
	require.Equal(t, []WallGroup{
		{Kind: "decode", Batch: "1", WallMs: Dist{Count: 3, Mean: 2, P50: 2, P90: 3, P99: 3, Max: 3}},
		{Kind: "decode", Batch: "2-4", WallMs: Dist{Count: 1, Mean: 10, P50: 10, P90: 10, P99: 10, Max: 10}},
		{Kind: "decode", Batch: ">512", WallMs: Dist{Count: 1, Mean: 5, P50: 5, P90: 5, P99: 5, Max: 5}},
	}, st.WallTime)
	require.Equal(t, []PayloadGroup{{Kind: "decode", Count: 5, MeanBytes: 140, MaxBytes: 300}, {Kind: "prefill", Count: 1, MeanBytes: 8000, MaxBytes: 8000}}, st.Payload)

	require.Equal(t, []TimeSpan{
		{Source: "steps", StartNs: 500, EndNs: 900_000, Seconds: 899_500 / 1e9},
		{Source: "requests", StartNs: 0, EndNs: 5e9, Seconds: 5},
	}, s.TimeSpans)

	rq := s.Requests
	require.Equal(t, int64(3), rq.Rows)
	require.Equal(t, []Count{{"finished", 2}, {"unfinished", 1}}, rq.ByStatus)
	require.Equal(t, Dist{Count: 3, Mean: 20, P50: 20, P90: 30, P99: 30, Max: 30}, rq.PromptTokens)
	require.InDelta(t, 1.0, rq.ArrivalRatePerS, 1e-12)
	require.InDelta(t, 2.0, rq.ArrivalSpanS, 1e-12)

	var buf bytes.Buffer
	require.NoError(t, s.WriteText(&buf))
	out := buf.String()
	require.Contains(t, out, "decode  >512")
	require.Contains(t, out, "measurement policy")
	require.Regexp(t, `steps\s+6\s+2\s+\d+`, out)
}

func TestBatchBucket(t *testing.T) {
	cases := map[int64]string{-1: "unknown", 0: "0", 1: "1", 2: "2-4", 4: "2-4", 5: "5-8", 16: "9-16", 17: "17-32",
		64: "33-64", 65: "65-128", 256: "129-256", 512: "257-512", 513: ">512"}
	for b, want := range cases {
		require.Equal(t, want, BatchBucket(b), "batch %d", b)
	}
}

type sparseStep struct {
	StepID int64 `parquet:"step_id"`
}

func TestDatasetMissingColumns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := datasets.Create(dir, datasets.Manifest{}, datasets.CreateOptions{})
	require.NoError(t, err)
	tw, err := datasets.NewTableWriter[sparseStep](w, datasets.TableSteps, datasets.TableOptions{})
	require.NoError(t, err)
	require.NoError(t, tw.Write([]sparseStep{{1}, {2}}))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	s, err := Dataset(dir)
	require.NoError(t, err)
	require.Nil(t, s.Steps)
	require.Equal(t, int64(2), s.Tables[0].Rows)
	require.Len(t, s.Notes, 1)
	require.Contains(t, s.Notes[0], "missing columns: kind, num_prefill_requests, num_decode_requests, wall_time_ns",
		"role, payload_bytes and the timestamps read the schema's defaults")
}

// A minimal manifest's assumptions are warnings of the summary.
func TestDatasetMinimalManifest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := datasets.Create(dir, datasets.Manifest{}, datasets.CreateOptions{})
	require.NoError(t, err)
	tw, err := datasets.NewTableWriter[datasets.Request](w, datasets.TableRequests, datasets.TableOptions{})
	require.NoError(t, err)
	require.NoError(t, tw.Write([]datasets.Request{{ReqID: "a", ArrivalNs: 1, PromptTokens: 3, OutputTokens: 4, Status: datasets.StatusNotRun}}))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, datasets.ManifestFile),
		[]byte(`{"schema_version": 1, "hardware": {"gpu_name": "H200"}, "model": {"name": "Llama-3.1-8B"}}`), 0o644))
	s, err := Dataset(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"no status in manifest.json: read as complete", "no tables listed in manifest.json: read requests (1 file) from disk"}, s.Warnings)
	require.Equal(t, datasets.DatasetComplete, s.Manifest.Status)
	require.Equal(t, int64(1), s.Requests.Rows)
	var b strings.Builder
	require.NoError(t, s.WriteText(&b))
	require.Regexp(t, `(?m)^warning +no status in manifest.json: read as complete$`, b.String())
	require.Regexp(t, `(?m)^model +Llama-3.1-8B$`, b.String(), "a model named without its shape")
	require.NotContains(t, b.String(), "source", "no source recorded")
}

func TestFileSteplabPart(t *testing.T) {
	dir := writeDataset(t)
	fi, err := File(filepath.Join(dir, "steps.parquet", "part-000000.parquet"))
	require.NoError(t, err)
	require.Equal(t, int64(4), fi.Rows)
	require.Equal(t, "steps", fi.SteplabTable)
	require.Equal(t, "1", fi.SteplabSchemaVersion)
	require.Contains(t, fi.KeyValueKeys, "steplab.table")
	byName := map[string]ColumnInfo{}
	for _, c := range fi.Columns {
		byName[c.Name] = c
	}
	require.Equal(t, "INT64", byName["wall_time_ns"].PhysicalType)
	require.Equal(t, "BYTE_ARRAY", byName["kind"].PhysicalType)
	require.Equal(t, "STRING", byName["kind"].LogicalType)
	require.Equal(t, "BOOLEAN", byName["valid"].PhysicalType)
	require.Equal(t, "ZSTD", byName["wall_time_ns"].Compression)
	require.Equal(t, "required", byName["step_id"].Repetition)
	var rows int64
	for _, rg := range fi.RowGroups {
		rows += rg.Rows
		require.Positive(t, rg.CompressedBytes)
	}
	require.Equal(t, int64(4), rows)
}

// A real pyarrow file (an aiconfigurator kernel table, committed with its
// licence) through the generic inspection path.
func TestFilePyarrow(t *testing.T) {
	fi, err := File(filepath.Join("..", "testdata", "foreign", "pyarrow", "aiconfigurator", "custom_allreduce_perf.parquet"))
	require.NoError(t, err)
	require.Equal(t, int64(138), fi.Rows)
	require.Equal(t, []string{"ARROW:schema"}, fi.KeyValueKeys)
	require.Contains(t, fi.CreatedBy, "parquet-cpp-arrow")
	require.Empty(t, fi.SteplabTable)
	require.Len(t, fi.Columns, 10)
	require.Equal(t, ColumnInfo{Name: "latency", PhysicalType: "DOUBLE", Repetition: "optional", Compression: "ZSTD",
		CompressedBytes: fi.Columns[8].CompressedBytes, UncompressedBytes: fi.Columns[8].UncompressedBytes}, fi.Columns[8])
	require.Equal(t, "STRING", fi.Columns[0].LogicalType)
	require.Equal(t, "INT(64,true)", fi.Columns[6].LogicalType)
	require.Equal(t, "INT64", fi.Columns[6].PhysicalType)
	require.Len(t, fi.RowGroups, 1)
	require.Equal(t, int64(138), fi.RowGroups[0].Rows)
}

func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.parquet")
	require.NoError(t, os.WriteFile(bad, []byte("not parquet at all"), 0o644))
	_, err := File(bad)
	require.ErrorContains(t, err, "bad.parquet")
	_, err = File(dir)
	require.ErrorContains(t, err, "directory")
	_, err = File(filepath.Join(dir, "missing.parquet"))
	require.Error(t, err)
}

package datasets

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeMinimalManifest writes the manifest a user writes by hand beside
// their tables: schema version, hardware, model, measurement policy.
func writeMinimalManifest(t testing.TB, dir string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{
  "schema_version": 1,
  "hardware": {"gpu_name": "H200"},
  "model": {"name": "Llama-3.1-8B"},
  "measurement_policy": {"decode": "production", "prefill": "production"}
}
`), 0o644))
}

// writeParquet writes rows of any type as one Parquet file with parquet-go,
// as a foreign tool would, with optional key-value metadata.
func writeParquet[T any](t *testing.T, path string, rows []T, kv ...string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.Create(path)
	require.NoError(t, err)
	var opts []parquet.WriterOption
	for i := 0; i+1 < len(kv); i += 2 {
		opts = append(opts, parquet.KeyValueMetadata(kv[i], kv[i+1]))
	}
	w := parquet.NewGenericWriter[T](f, opts...)
	_, err = w.Write(rows)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
}

func TestSchemaVersions(t *testing.T) {
	t.Run("newer manifest refused", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ds")
		writeTable(t, dir, TableSteps, simSteps(5, 1), TableOptions{}, false)
		m, err := ReadManifest(dir)
		require.NoError(t, err)
		m.SchemaVersion = SchemaVersion + 1
		require.NoError(t, WriteManifest(dir, m))
		_, err = Open(dir)
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrNewerSchema))
		assert.Contains(t, err.Error(), filepath.Join(dir, ManifestFile))
		assert.Contains(t, err.Error(), "schema version 2 is newer than this steplab understands (1)")
	})
	t.Run("invalid manifest version", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ds")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"schema_version": 0}`), 0o644))
		_, err := Open(dir)
		require.ErrorContains(t, err, "invalid schema version 0")
	})
	t.Run("bad manifest JSON", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ds")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"schema_version": `), 0o644))
		_, err := Open(dir)
		require.ErrorContains(t, err, "not a valid manifest")
	})
	type v1Step struct {
		StepID int64 `parquet:"step_id"`
	}
	for _, tc := range []struct {
		version string
		wantErr string
	}{
		{"1", ""},
		{"2", "schema version 2 is newer than this steplab understands (1)"},
		{"two", `bad steplab.schema_version "two"`},
	} {
		t.Run("parquet metadata version "+tc.version, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "steps.parquet")
			writeParquet(t, path, []v1Step{{7}}, KeySchemaVersion, tc.version)
			got, err := readAllFiles[v1Step]([]string{path})
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, []v1Step{{7}}, got)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.ErrorContains(t, err, path)
		})
	}
}

// Files of an older schema lack the columns added since; they read with the
// documented defaults, while a missing required column is named.
func TestAddedColumnsDefaults(t *testing.T) {
	dir := t.TempDir()
	rows := simSteps(50, 8)
	for i := range rows {
		rows[i].WorkerRecvNs, rows[i].SampleNs = 5, 6
	}
	// Write the full table, then rewrite it without the added columns
	// through a projection type.
	writeTable(t, filepath.Join(dir, "full"), TableSteps, rows, TableOptions{}, false)
	var oldRows []stepV1
	for _, r := range rows {
		oldRows = append(oldRows, stepV1FromStep(r))
	}
	writeParquet(t, filepath.Join(dir, "old", "steps.parquet"), oldRows, KeySchemaVersion, "1")
	writeMinimalManifest(t, filepath.Join(dir, "old"))
	d, err := Open(filepath.Join(dir, "old"))
	require.NoError(t, err)
	got, err := ReadAll[Step](d, TableSteps)
	require.NoError(t, err)
	for i := range rows {
		want := rows[i]
		want.WorkerRecvNs, want.SampleNs = Unknown, Unknown
		want.MaxDecodeKVTokens, want.SumPrefillAttn, want.NewReqTokens, want.CUDAGraphSize = Unknown, float64(Unknown), Unknown, int32(Unknown)
		require.Equal(t, want, got[i])
	}

	type oldStepRequest struct {
		StepID int64  `parquet:"step_id"`
		ReqID  string `parquet:"req_id"`
		IsNew  bool   `parquet:"is_new"`
	}
	path := filepath.Join(dir, "sr", "step_requests.parquet")
	writeParquet(t, path, []oldStepRequest{{1, "a", true}})
	_, err = readAllFiles[StepRequest]([]string{path})
	require.ErrorContains(t, err, path+`: missing columns "is_prefill", "num_scheduled_tokens", "num_computed_tokens", "prompt_len"`)
	assert.NotContains(t, err.Error(), "is_resumed", "is_resumed has a default")
	assert.NotContains(t, err.Error(), "payload_bytes", "payload_bytes has a default")

	type noHashes struct {
		ReqID string `parquet:"req_id"`
	}
	type reqHashes struct {
		ReqID         string  `parquet:"req_id"`
		PrefixHashIDs []int64 `parquet:"prefix_hash_ids,list" default:""`
	}
	path = filepath.Join(dir, "rq", "requests.parquet")
	writeParquet(t, path, []noHashes{{"x"}, {"y"}})
	gotReq, err := readAllFiles[reqHashes]([]string{path})
	require.NoError(t, err)
	require.Equal(t, []reqHashes{{ReqID: "x"}, {ReqID: "y"}}, gotReq)

	stepDefaults := DefaultedColumns(TableSteps)
	assert.Contains(t, stepDefaults, ColumnDefault{"worker_recv_ns", "-1"})
	assert.Contains(t, stepDefaults, ColumnDefault{"role", RoleProduction})
	assert.Contains(t, stepDefaults, ColumnDefault{"valid", "true"})
	for _, c := range stepDefaults {
		assert.NotContains(t, []string{"step_id", "kind", "num_prefill_requests", "sum_prefill_tokens", "sum_prefill_kv_tokens",
			"num_decode_requests", "sum_decode_kv_tokens", "wall_time_ns"}, c.Column, "a required column")
	}
	assert.Len(t, stepDefaults, reflect.TypeFor[Step]().NumField()-8)
	assert.Equal(t, []ColumnDefault{{"is_resumed", "false"}, {"payload_bytes", "-1"}}, DefaultedColumns(TableStepRequests))
	assert.Equal(t, []ColumnDefault{{"prefix_hash_ids", ""}, {"first_scheduled_ns", "-1"}, {"first_token_ns", "-1"}, {"finish_ns", "-1"},
		{"num_preemptions", "-1"}, {"status", StatusNotRun}}, DefaultedColumns(TableRequests))
	assert.Empty(t, DefaultedColumns(TableGPUSamples))
	assert.Equal(t, []ColumnDefault{{"dp_rank", "-1"}, {"kv_usage", "-1"}, {"prompt_tokens_per_s", "-1"},
		{"generation_tokens_per_s", "-1"}, {"window_ns", "0"}}, DefaultedColumns(TableEngineSamples))
}

func TestBadFiles(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good")
	writeTable(t, good, TableSteps, simSteps(3000, 1), TableOptions{RowGroupRows: 1000}, false)
	goodParts, err := (&Dataset{Dir: good}).Parts(TableSteps)
	require.NoError(t, err)
	goodBytes, err := os.ReadFile(goodParts[0])
	require.NoError(t, err)

	type stringStepID struct {
		StepID string `parquet:"step_id"`
	}
	type scalarHashes struct {
		ReqID         string `parquet:"req_id"`
		PrefixHashIDs int64  `parquet:"prefix_hash_ids"`
	}
	corrupt := func(b []byte, at int, with byte) []byte {
		c := append([]byte(nil), b...)
		for i := at; i < at+16 && i < len(c); i++ {
			c[i] = with
		}
		return c
	}
	tests := []struct {
		name  string
		write func(t *testing.T, path string)
		read  func(path string) error
		want  string
	}{
		{"empty file", bytesFile(nil), readSteps, "empty file, not Parquet"},
		{"not parquet", bytesFile([]byte("step_id,kind\n1,decode\n")), readSteps, "not a readable Parquet file"},
		{"truncated", bytesFile(goodBytes[:len(goodBytes)/2]), readSteps, "not a readable Parquet file"},
		{"footer cut", bytesFile(goodBytes[:len(goodBytes)-3]), readSteps, "not a readable Parquet file"},
		{"footer corrupted", bytesFile(corrupt(goodBytes, len(goodBytes)-200, 0xff)), readSteps, "not a readable Parquet file"},
		{"page header corrupted", bytesFile(corrupt(goodBytes, 4, 0xff)), readSteps, `column "step_id": corrupt column chunk: page header at 4`},
		{"wrong column type", func(t *testing.T, p string) { writeParquet(t, p, []stringStepID{{"a"}}) }, readSteps, `column "step_id" has type BYTE_ARRAY STRING, steplab reads it as int64 (an integer column of any width)`},
		{"list column is a scalar", func(t *testing.T, p string) { writeParquet(t, p, []scalarHashes{{"a", 1}}) }, readRequests, `column "prefix_hash_ids" is not a list of integers`},
		{"requests file read as steps", func(t *testing.T, p string) { writeParquet(t, p, simRequests(3, 1)) }, readSteps, `missing columns "step_id", "kind", "num_prefill_requests"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "part.parquet")
			tc.write(t, path)
			err := tc.read(path)
			require.Error(t, err)
			require.Contains(t, err.Error(), path, "the error names the file")
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, 1, strings.Count(err.Error(), path), "one error, naming the file once: %v", err)
		})
	}

	t.Run("not a directory", func(t *testing.T) {
		_, err := Open(goodParts[0])
		require.ErrorContains(t, err, "not a dataset directory")
	})
	t.Run("directory without tables", func(t *testing.T) {
		dir := t.TempDir()
		_, err := Open(dir)
		require.ErrorContains(t, err, "not a dataset")
	})
	t.Run("table absent", func(t *testing.T) {
		d, err := Open(good)
		require.NoError(t, err)
		_, err = ReadAll[Request](d, TableRequests)
		require.ErrorContains(t, err, "dataset has no requests table")
	})
}

func bytesFile(b []byte) func(t *testing.T, path string) {
	return func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, b, 0o644)) }
}

func readSteps(path string) error {
	_, err := readAllFiles[Step]([]string{path})
	return err
}

func readRequests(path string) error {
	_, err := readAllFiles[Request]([]string{path})
	return err
}

// A Scanner that failed keeps returning its error.
func TestScannerStickyError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.parquet")
	require.NoError(t, os.WriteFile(path, []byte("nope"), 0o644))
	s := ScanFiles[Step]([]string{path})
	buf := make([]Step, 4)
	_, err1 := s.Read(buf)
	_, err2 := s.Read(buf)
	require.Error(t, err1)
	require.Equal(t, err1, err2)
	n, err := s.Read(nil)
	require.Equal(t, 0, n)
	require.Equal(t, err1, err)
}

// stepV1 is Step without the columns added after version 1.
type stepV1 struct {
	StepID               int64   `parquet:"step_id"`
	WorkerID             string  `parquet:"worker_id"`
	DPRank               int32   `parquet:"dp_rank"`
	Kind                 string  `parquet:"kind"`
	Role                 string  `parquet:"role"`
	BenchmarkID          int64   `parquet:"benchmark_id"`
	SampleReason         string  `parquet:"sample_reason"`
	Valid                bool    `parquet:"valid"`
	InvalidReason        string  `parquet:"invalid_reason"`
	NumNewReqs           int32   `parquet:"num_new_reqs"`
	NumCachedReqs        int32   `parquet:"num_cached_reqs"`
	NumResumedReqs       int32   `parquet:"num_resumed_reqs"`
	NumPreempted         int32   `parquet:"num_preempted"`
	NumFinished          int32   `parquet:"num_finished"`
	NumPrefillRequests   int32   `parquet:"num_prefill_requests"`
	SumPrefillTokens     int64   `parquet:"sum_prefill_tokens"`
	VarPrefillLength     float64 `parquet:"var_prefill_length"`
	SumPrefillKVTokens   int64   `parquet:"sum_prefill_kv_tokens"`
	NumDecodeRequests    int32   `parquet:"num_decode_requests"`
	SumDecodeKVTokens    int64   `parquet:"sum_decode_kv_tokens"`
	VarDecodeKVTokens    float64 `parquet:"var_decode_kv_tokens"`
	TotalScheduledTokens int64   `parquet:"total_scheduled_tokens"`
	PaddedTokens         int64   `parquet:"padded_tokens"`
	PayloadBytes         int64   `parquet:"payload_bytes"`
	PayloadNewBytes      int64   `parquet:"payload_new_bytes"`
	PayloadCachedBytes   int64   `parquet:"payload_cached_bytes"`
	TScheduleStart       int64   `parquet:"t_schedule_start"`
	TScheduleEnd         int64   `parquet:"t_schedule_end"`
	TDispatch            int64   `parquet:"t_dispatch"`
	TOutput              int64   `parquet:"t_output"`
	TUpdateEnd           int64   `parquet:"t_update_end"`
	WallTimeNs           int64   `parquet:"wall_time_ns"`
	NarrowTimeNs         int64   `parquet:"narrow_time_ns"`
	GPUTimeNs            int64   `parquet:"gpu_time_ns"`
	HostPrepNs           int64   `parquet:"host_prep_ns"`
	Overlapped           bool    `parquet:"overlapped"`
	NumWaiting           int32   `parquet:"num_waiting"`
	NumRunning           int32   `parquet:"num_running"`
	KVBlocksUsed         int64   `parquet:"kv_blocks_used"`
	KVBlocksTotal        int64   `parquet:"kv_blocks_total"`
}

func stepV1FromStep(s Step) stepV1 {
	return stepV1{s.StepID, s.WorkerID, s.DPRank, s.Kind, s.Role, s.BenchmarkID, s.SampleReason, s.Valid, s.InvalidReason,
		s.NumNewReqs, s.NumCachedReqs, s.NumResumedReqs, s.NumPreempted, s.NumFinished, s.NumPrefillRequests,
		s.SumPrefillTokens, s.VarPrefillLength, s.SumPrefillKVTokens, s.NumDecodeRequests, s.SumDecodeKVTokens,
		s.VarDecodeKVTokens, s.TotalScheduledTokens, s.PaddedTokens, s.PayloadBytes, s.PayloadNewBytes,
		s.PayloadCachedBytes, s.TScheduleStart, s.TScheduleEnd, s.TDispatch, s.TOutput, s.TUpdateEnd, s.WallTimeNs,
		s.NarrowTimeNs, s.GPUTimeNs, s.HostPrepNs, s.Overlapped, s.NumWaiting, s.NumRunning, s.KVBlocksUsed,
		s.KVBlocksTotal}
}

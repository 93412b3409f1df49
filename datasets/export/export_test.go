package export

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/require"
)

type fixture struct {
	dir   string
	steps []datasets.Step
	srs   []datasets.StepRequest
	reqs  []datasets.Request
}

func writeAll[T any](t *testing.T, w *datasets.Writer, table string, rows []T) {
	t.Helper()
	tw, err := datasets.NewTableWriter[T](w, table, datasets.TableOptions{RowGroupRows: 3, PartRows: 4})
	require.NoError(t, err)
	require.NoError(t, tw.Write(rows))
	require.NoError(t, tw.Close())
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{dir: filepath.Join(t.TempDir(), "ds")}
	for i := 0; i < 11; i++ {
		f.steps = append(f.steps, datasets.Step{
			StepID: int64(i), WorkerID: fmt.Sprintf("w,\"%d\"\n", i%2), DPRank: int32(i % 3), Kind: []string{"prefill", "decode", "mixed"}[i%3],
			Role: "production", BenchmarkID: -1, Valid: i%4 != 0, InvalidReason: map[bool]string{true: "", false: "warm, up"}[i%4 != 0],
			NumPrefillRequests: int32(i), SumPrefillTokens: int64(i) * 1000, VarPrefillLength: float64(i) / 3,
			VarDecodeKVTokens: []float64{0, math.NaN(), math.Inf(1), 1e300, -0.5, 1.0 / 7}[i%6],
			TScheduleStart:    int64(i) * 1_000_000_007, WallTimeNs: math.MaxInt64 - int64(i), GPUTimeNs: -1, Overlapped: i%2 == 1,
			KVBlocksTotal: 1 << 40,
		})
		f.srs = append(f.srs, datasets.StepRequest{StepID: int64(i), ReqID: fmt.Sprintf("req-%d", i), IsNew: i%2 == 0, IsPrefill: i%3 == 0, NumScheduledTokens: int64(i)})
	}
	for i := 0; i < 7; i++ {
		r := datasets.Request{ReqID: fmt.Sprintf("r%d \"quoted\"", i), ArrivalNs: int64(i) * 10, PromptTokens: 100, OutputTokens: int64(i), FirstTokenNs: -1, Status: "finished"}
		switch i % 3 {
		case 1:
			r.PrefixHashIDs = []int64{}
		case 2:
			r.PrefixHashIDs = []int64{int64(i), -5, math.MinInt64, math.MaxInt64}
		}
		f.reqs = append(f.reqs, r)
	}
	w, err := datasets.Create(f.dir, datasets.Manifest{}, datasets.CreateOptions{})
	require.NoError(t, err)
	writeAll(t, w, datasets.TableSteps, f.steps)
	writeAll(t, w, datasets.TableStepRequests, f.srs)
	writeAll(t, w, datasets.TableRequests, f.reqs)
	require.NoError(t, w.Close())
	return f
}

// columns returns the parquet column names of T's fields and, per row, the
// field values, in field order.
func columns[T any](rows []T) ([]string, [][]any) {
	typ := reflect.TypeOf(*new(T))
	var names []string
	for i := 0; i < typ.NumField(); i++ {
		names = append(names, strings.Split(typ.Field(i).Tag.Get("parquet"), ",")[0])
	}
	out := make([][]any, len(rows))
	for r, row := range rows {
		v := reflect.ValueOf(row)
		for i := 0; i < typ.NumField(); i++ {
			out[r] = append(out[r], v.Field(i).Interface())
		}
	}
	return names, out
}

func requireCSV[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	recs, err := csv.NewReader(fh).ReadAll()
	require.NoError(t, err)
	names, want := columns(rows)
	require.Equal(t, names, recs[0], "header")
	require.Len(t, recs, len(rows)+1)
	for r, row := range want {
		for c, v := range row {
			cellv := recs[r+1][c]
			where := fmt.Sprintf("%s row %d column %s", filepath.Base(path), r, names[c])
			switch x := v.(type) {
			case int64:
				require.Equal(t, strconv.FormatInt(x, 10), cellv, where)
			case int32:
				require.Equal(t, strconv.FormatInt(int64(x), 10), cellv, where)
			case bool:
				require.Equal(t, strconv.FormatBool(x), cellv, where)
			case string:
				require.Equal(t, x, cellv, where)
			case float64:
				got, err := strconv.ParseFloat(cellv, 64)
				require.NoError(t, err, where)
				if math.IsNaN(x) {
					require.True(t, math.IsNaN(got), where)
				} else {
					require.Equal(t, x, got, where)
				}
			case []int64:
				var got []int64
				require.NoError(t, json.Unmarshal([]byte(cellv), &got), where)
				if len(x) == 0 {
					require.Equal(t, "[]", cellv, where)
				} else {
					require.Equal(t, x, got, where)
				}
			default:
				t.Fatalf("%s: unhandled type %T", where, v)
			}
		}
	}
}

func requireArrow[T any](t *testing.T, path string, rows []T, batchRows int) {
	t.Helper()
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	r, err := ipc.NewFileReader(fh)
	require.NoError(t, err)
	defer r.Close()
	names, want := columns(rows)
	schema := r.Schema()
	require.Equal(t, len(names), schema.NumFields())
	for i, n := range names {
		require.Equal(t, n, schema.Field(i).Name)
	}
	require.Equal(t, (len(rows)+batchRows-1)/batchRows, r.NumRecords(), "record batches of at most %d rows", batchRows)
	row := 0
	for b := 0; b < r.NumRecords(); b++ {
		rec, err := r.RecordBatch(b)
		require.NoError(t, err)
		require.LessOrEqual(t, int(rec.NumRows()), batchRows)
		for i := 0; i < int(rec.NumRows()); i++ {
			for c, v := range want[row] {
				col := rec.Column(c)
				where := fmt.Sprintf("%s row %d column %s", filepath.Base(path), row, names[c])
				require.False(t, col.IsNull(i), where)
				switch x := v.(type) {
				case int64:
					require.Equal(t, x, col.(*array.Int64).Value(i), where)
				case int32:
					require.Equal(t, x, col.(*array.Int32).Value(i), where)
				case bool:
					require.Equal(t, x, col.(*array.Boolean).Value(i), where)
				case string:
					require.Equal(t, x, col.(*array.String).Value(i), where)
				case float64:
					got := col.(*array.Float64).Value(i)
					if math.IsNaN(x) {
						require.True(t, math.IsNaN(got), where)
					} else {
						require.Equal(t, x, got, where)
					}
				case []int64:
					l := col.(*array.List)
					require.Equal(t, arrow.PrimitiveTypes.Int64, l.DataType().(*arrow.ListType).Elem(), where)
					start, end := l.ValueOffsets(i)
					vals := l.ListValues().(*array.Int64)
					got := []int64{}
					for k := start; k < end; k++ {
						got = append(got, vals.Value(int(k)))
					}
					if x == nil {
						x = []int64{}
					}
					require.Equal(t, x, got, where)
				default:
					t.Fatalf("%s: unhandled type %T", where, v)
				}
			}
			row++
		}
	}
	require.Equal(t, len(rows), row)
}

func TestExportCSV(t *testing.T) {
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	var progress int64
	res, err := Dataset(f.dir, out, Options{Format: CSV, BatchRows: 3, Progress: func(table string, rows int64) { progress = rows }})
	require.NoError(t, err)
	require.Equal(t, []File{
		{Table: "steps", Path: filepath.Join(out, "steps.csv"), Rows: 11},
		{Table: "step_requests", Path: filepath.Join(out, "step_requests.csv"), Rows: 11},
		{Table: "requests", Path: filepath.Join(out, "requests.csv"), Rows: 7},
	}, res.Files)
	require.Equal(t, int64(7), progress, "progress reports the rows of the last table")
	requireCSV(t, res.Files[0].Path, f.steps)
	requireCSV(t, res.Files[1].Path, f.srs)
	requireCSV(t, res.Files[2].Path, f.reqs)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Len(t, entries, 3, "no temporary files left behind")
	st, err := os.Stat(res.Files[0].Path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm(), "exports are readable by others")
}

func TestExportArrow(t *testing.T) {
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	res, err := Dataset(f.dir, out, Options{Format: Arrow, BatchRows: 3})
	require.NoError(t, err)
	require.Len(t, res.Files, 3)
	requireArrow(t, filepath.Join(out, "steps.arrow"), f.steps, 3)
	requireArrow(t, filepath.Join(out, "step_requests.arrow"), f.srs, 3)
	requireArrow(t, filepath.Join(out, "requests.arrow"), f.reqs, 3)

	// one batch when BatchRows exceeds the table
	res, err = Dataset(f.dir, out, Options{Format: Arrow, Tables: []string{"requests"}})
	require.NoError(t, err)
	require.Equal(t, []File{{Table: "requests", Path: filepath.Join(out, "requests.arrow"), Rows: 7}}, res.Files)
	requireArrow(t, filepath.Join(out, "requests.arrow"), f.reqs, DefaultBatchRows)
}

func TestExportErrors(t *testing.T) {
	f := newFixture(t)
	out := t.TempDir()
	_, err := Dataset(f.dir, out, Options{Format: "xlsx"})
	require.ErrorContains(t, err, `unknown export format "xlsx"`)
	_, err = Dataset(f.dir, out, Options{Format: CSV, Tables: []string{"gpu_samples"}})
	require.ErrorContains(t, err, `no table "gpu_samples" (it has: steps, step_requests, requests)`)
	_, err = Dataset(filepath.Join(out, "missing"), out, Options{Format: CSV})
	require.Error(t, err)
	// a corrupt part names its file
	part := filepath.Join(f.dir, "requests.parquet", "part-000001.parquet")
	require.NoError(t, os.WriteFile(part, []byte("garbage"), 0o644))
	_, err = Dataset(f.dir, out, Options{Format: Arrow, Tables: []string{"requests"}})
	require.ErrorContains(t, err, "part-000001.parquet")
	_, err = os.Stat(filepath.Join(out, "requests.arrow"))
	require.True(t, os.IsNotExist(err), "a failed export leaves no file")
	// a table the manifest lists but that is gone is an error, not skipped
	require.NoError(t, os.RemoveAll(filepath.Join(f.dir, "step_requests.parquet")))
	_, err = Dataset(f.dir, out, Options{Format: CSV})
	require.ErrorContains(t, err, "manifest.json lists table step_requests (11 rows), missing on disk")
	_, err = Dataset(f.dir, out, Options{Format: CSV, Tables: []string{"steps"}})
	require.NoError(t, err, "the tables asked for are there")
}

// A table written by pyarrow (optional columns, logical types) exports too:
// a real pyarrow file beside a minimal manifest.
func TestExportForeignParquet(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "foreign", "pyarrow", "aiconfigurator", "custom_allreduce_perf.parquet"))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "ds")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "steps.parquet"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, datasets.ManifestFile),
		[]byte(`{"schema_version": 1, "hardware": {"gpu_name": "H200"}, "model": {"name": "none"}}`), 0o644))
	out := t.TempDir()
	res, err := Dataset(dir, out, Options{Format: Arrow})
	require.NoError(t, err)
	require.Equal(t, int64(138), res.Files[0].Rows)
	fh, err := os.Open(res.Files[0].Path)
	require.NoError(t, err)
	defer fh.Close()
	r, err := ipc.NewFileReader(fh)
	require.NoError(t, err)
	defer r.Close()
	s := r.Schema()
	require.Equal(t, "framework", s.Field(0).Name)
	require.Equal(t, arrow.BinaryTypes.String, s.Field(0).Type)
	require.True(t, s.Field(0).Nullable)
	require.Equal(t, arrow.PrimitiveTypes.Int64, s.Field(6).Type)
	require.Equal(t, arrow.PrimitiveTypes.Float64, s.Field(8).Type)
	require.Equal(t, 1, r.NumRecords())

	res, err = Dataset(dir, out, Options{Format: CSV})
	require.NoError(t, err)
	fh2, err := os.Open(res.Files[0].Path)
	require.NoError(t, err)
	defer fh2.Close()
	cr := csv.NewReader(fh2)
	header, err := cr.Read()
	require.NoError(t, err)
	require.Equal(t, []string{"framework", "version", "device", "op_name", "kernel_source", "allreduce_dtype", "num_gpus", "message_size", "latency", "backend"}, header)
	n := 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		_, err = strconv.ParseFloat(rec[8], 64)
		require.NoError(t, err, "latency row %d", n)
		n++
	}
	require.Equal(t, 138, n)
}

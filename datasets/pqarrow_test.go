package datasets

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"
)

// TestReadByArrow reads files steplab wrote with an independent Parquet
// implementation, Apache Arrow's pqarrow (arrow-go v18), and compares every
// column of every table value by value. It also checks the Arrow types a
// pyarrow or DuckDB user sees: plain int32/int64/float64/bool/utf8 and
// list<int64>, no extension types.
func TestReadByArrow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := Create(dir, Manifest{Source: Source{Kind: "test"}}, CreateOptions{})
	require.NoError(t, err)
	steps := simSteps(20000, 21) // several pages and row groups, zstd and raw frames
	stepReqs := simStepRequests(3000, 21)
	reqs := normalizeLists(simRequests(3000, 21))
	samples := simGPUSamples(500, 21)
	opts := TableOptions{RowGroupRows: 9000, PartRows: 15000}
	writeInto(t, w, TableSteps, steps, opts)
	writeInto(t, w, TableStepRequests, stepReqs, opts)
	writeInto(t, w, TableRequests, reqs, TableOptions{RowGroupRows: 1000})
	writeInto(t, w, TableGPUSamples, samples, opts)
	require.NoError(t, w.Close())

	d, err := Open(dir)
	require.NoError(t, err)
	t.Run("steps", func(t *testing.T) { compareWithArrow(t, d, TableSteps, steps) })
	t.Run("step_requests", func(t *testing.T) { compareWithArrow(t, d, TableStepRequests, stepReqs) })
	t.Run("requests", func(t *testing.T) { compareWithArrow(t, d, TableRequests, reqs) })
	t.Run("gpu_samples", func(t *testing.T) { compareWithArrow(t, d, TableGPUSamples, samples) })
}

func writeInto[T any](t *testing.T, w *Writer, table string, rows []T, opts TableOptions) {
	tw, err := NewTableWriter[T](w, table, opts)
	require.NoError(t, err)
	require.NoError(t, tw.Write(rows))
	require.NoError(t, tw.Close())
}

func compareWithArrow[T any](t *testing.T, d *Dataset, table string, rows []T) {
	columns := TableColumns(table)
	rowType := reflect.TypeFor[T]()
	require.Equal(t, len(columns), rowType.NumField(), "the schema types are flat: field i is column i")
	wantType := map[reflect.Type]arrow.DataType{
		reflect.TypeFor[int32](): arrow.PrimitiveTypes.Int32, reflect.TypeFor[int64](): arrow.PrimitiveTypes.Int64,
		reflect.TypeFor[float64](): arrow.PrimitiveTypes.Float64, reflect.TypeFor[bool](): arrow.FixedWidthTypes.Boolean,
		reflect.TypeFor[string](): arrow.BinaryTypes.String,
	}
	parts, err := d.Parts(table)
	require.NoError(t, err)
	next := 0 // index of the first row of the current part
	for _, part := range parts {
		f, err := os.Open(part)
		require.NoError(t, err)
		pr, err := file.NewParquetReader(f, file.WithReadProps(parquet.NewReaderProperties(memory.DefaultAllocator)))
		require.NoError(t, err, part)
		kv := pr.MetaData().KeyValueMetadata()
		require.Equal(t, "1", *kv.FindValue(KeySchemaVersion), "key-value metadata")
		require.Equal(t, table, *kv.FindValue(KeyTable))
		fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
		require.NoError(t, err, part)
		tbl, err := fr.ReadTable(context.Background())
		require.NoError(t, err, part)
		require.NoError(t, pr.Close())
		n := int(tbl.NumRows())
		require.LessOrEqual(t, next+n, len(rows))
		require.Equal(t, len(columns), int(tbl.NumCols()), "column count of %s", part)
		for ci, name := range columns {
			col := tbl.Column(ci)
			require.Equal(t, name, col.Name(), "column order")
			if ft := rowType.Field(ci).Type; ft == reflect.TypeFor[[]int64]() {
				lt, ok := col.DataType().(*arrow.ListType)
				require.True(t, ok, "%s is %s", name, col.DataType())
				require.Equal(t, arrow.INT64, lt.Elem().ID())
			} else {
				require.Contains(t, wantType, ft, "type of %s", name)
				require.Equal(t, wantType[ft].ID(), col.DataType().ID(), "type of %s", name)
			}
			row := next
			for _, chunk := range col.Data().Chunks() {
				for i := 0; i < chunk.Len(); i++ {
					require.False(t, chunk.IsNull(i), "%s row %d is null", name, row)
					field := reflect.ValueOf(rows[row]).Field(ci)
					switch a := chunk.(type) {
					case *array.Int64:
						require.Equal(t, field.Int(), a.Value(i), "%s row %d", name, row)
					case *array.Int32:
						require.Equal(t, field.Int(), int64(a.Value(i)), "%s row %d", name, row)
					case *array.Float64:
						require.Equal(t, math.Float64bits(field.Float()), math.Float64bits(a.Value(i)), "%s row %d", name, row)
					case *array.Boolean:
						require.Equal(t, field.Bool(), a.Value(i), "%s row %d", name, row)
					case *array.String:
						require.Equal(t, field.String(), a.Value(i), "%s row %d", name, row)
					case *array.List:
						lo, hi := a.ValueOffsets(i)
						vals := a.ListValues().(*array.Int64)
						var got []int64
						for k := lo; k < hi; k++ {
							got = append(got, vals.Value(int(k)))
						}
						require.Equal(t, field.Interface(), got, "%s row %d", name, row)
					default:
						t.Fatalf("%s: unexpected Arrow array %T", name, chunk)
					}
					row++
				}
			}
			require.Equal(t, next+n, row, "rows of %s in %s", name, part)
		}
		tbl.Release()
		next += n
	}
	require.Equal(t, len(rows), next)
}

package datasets

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"
)

// writeDecimal writes one column n of DECIMAL(precision, scale) stored as
// INT64 holding the unscaled values.
func writeDecimal(t *testing.T, scale, precision int, unscaled []int64) string {
	path := filepath.Join(t.TempDir(), "d.parquet")
	f, err := os.Create(path)
	require.NoError(t, err)
	schema := parquet.NewSchema("t", parquet.Group{"n": parquet.Decimal(scale, precision, parquet.Int64Type)})
	w := parquet.NewWriter(f, schema)
	for _, v := range unscaled {
		_, err := w.WriteRows([]parquet.Row{{parquet.Int64Value(v).Level(0, 0, 0)}})
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
	return path
}

func TestDecimal(t *testing.T) {
	type ints struct {
		N int64 `parquet:"n"`
	}
	type floats struct {
		N float64 `parquet:"n"`
	}
	t.Run("scale 0 reads into integers and floats", func(t *testing.T) {
		path := writeDecimal(t, 0, 18, []int64{7, -3, 1 << 40})
		rows, err := readAllFiles[ints]([]string{path})
		require.NoError(t, err)
		require.Equal(t, []ints{{7}, {-3}, {1 << 40}}, rows)
		fl, err := readAllFiles[floats]([]string{path})
		require.NoError(t, err)
		require.Equal(t, []floats{{7}, {-3}, {1 << 40}}, fl)
	})
	t.Run("scale 2 at its scale", func(t *testing.T) {
		path := writeDecimal(t, 2, 18, []int64{700, -300, 0})
		rows, err := readAllFiles[ints]([]string{path})
		require.NoError(t, err)
		require.Equal(t, []ints{{7}, {-3}, {0}}, rows)
		fl, err := readAllFiles[floats]([]string{writeDecimal(t, 2, 18, []int64{750, -1})})
		require.NoError(t, err)
		require.Equal(t, []floats{{7.5}, {-0.01}}, fl)
	})
	t.Run("a fraction into an integer refused with a cast", func(t *testing.T) {
		path := writeDecimal(t, 2, 18, []int64{700, 750})
		_, err := readAllFiles[ints]([]string{path})
		require.ErrorContains(t, err, path+`: column "n": DECIMAL(18,2) value 7.5 is not a whole number, and steplab reads the column as int64: cast it first (DuckDB: CAST(col AS BIGINT)`)
	})
}

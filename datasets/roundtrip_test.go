package datasets

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTripSteps(t *testing.T) {
	dir := t.TempDir() + "/ds"
	w, err := Create(dir, Manifest{Source: Source{Kind: "test"}}, CreateOptions{})
	require.NoError(t, err)
	tw, err := NewTableWriter[Step](w, TableSteps, TableOptions{RowGroupRows: 10, PartRows: 25})
	require.NoError(t, err)
	rows := make([]Step, 60)
	for i := range rows {
		rows[i] = Step{StepID: int64(i), Kind: KindDecode, WallTimeNs: int64(1000 + i)}
	}
	require.NoError(t, tw.Write(rows))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())

	d, err := Open(dir)
	require.NoError(t, err)
	require.Equal(t, DatasetComplete, d.Manifest.Status)
	require.Len(t, d.Manifest.Tables[TableSteps].Parts, 3)
	got, err := ReadAll[Step](d, TableSteps)
	require.NoError(t, err)
	require.Equal(t, rows, got)

	type proj struct {
		WallTimeNs int64 `parquet:"wall_time_ns"`
	}
	p, err := ReadAll[proj](d, TableSteps)
	require.NoError(t, err)
	require.Len(t, p, 60)
	require.Equal(t, int64(1059), p[59].WallTimeNs)

	type missing struct {
		Nope int64 `parquet:"nope"`
	}
	_, err = ReadAll[missing](d, TableSteps)
	require.ErrorContains(t, err, `missing column "nope"`)
}

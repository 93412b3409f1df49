package sim

import (
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/require"
)

// A DatasetSink keeps the rows it lends in place and copies any other, so
// that a caller reusing its own row after Step changes nothing written;
// through a Tee, the first sink that lends does and the others read the
// lent row. Batches larger than one gather pass flush on the way.
func TestDatasetSinkLentRows(t *testing.T) {
	for _, c := range []struct {
		name string
		lend func(i int) bool // step i goes into a lent row
	}{
		{"every step lent", func(int) bool { return true }},
		{"no step lent", func(int) bool { return false }},
		{"alternating", func(i int) bool { return i%2 == 0 }},
		{"lent, then the row unused", func(i int) bool { return i%3 != 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			w, err := datasets.Create(dir, datasets.Manifest{}, datasets.CreateOptions{})
			require.NoError(t, err)
			ds, err := NewDatasetSink(w, false)
			require.NoError(t, err)
			metrics := NewRunMetrics()
			var sink Sink = Tee{metrics, ds} // the lender is not the first sink
			lender := lenderOf(sink)
			require.Same(t, ds, lender)
			const n = 3*sinkBatch + 7
			var own datasets.Step
			for i := range n {
				row := &own
				if c.lend(i) {
					row = lender.nextStep()
				} else if i%3 == 1 {
					lender.nextStep() // lent but not used: the next Step copies own
				}
				*row = datasets.Step{StepID: int64(i), Kind: datasets.KindDecode, WallTimeNs: int64(10 * i)}
				require.NoError(t, sink.Step(row, nil))
				own = datasets.Step{StepID: -7, Kind: datasets.KindPrefill} // reused by its owner at once
			}
			require.NoError(t, ds.Close())
			require.NoError(t, w.Close())

			d, err := datasets.Open(dir)
			require.NoError(t, err)
			got, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
			require.NoError(t, err)
			require.Len(t, got, n)
			for i, s := range got {
				require.Equal(t, int64(i), s.StepID)
				require.Equal(t, datasets.KindDecode, s.Kind, "step %d", i)
				require.Equal(t, int64(10*i), s.WallTimeNs, "step %d", i)
			}
			require.Equal(t, map[string]int64{datasets.KindDecode: n}, metrics.Report().Steps)
		})
	}
}

// A Tee of sinks that keep no steps lends nothing: the engine records into
// its own row.
func TestTeeWithoutLender(t *testing.T) {
	require.Nil(t, lenderOf(Tee{NewRunMetrics(), discardSink{}}))
	require.Nil(t, lenderOf(discardSink{}))
}

type discardSink struct{}

func (discardSink) Step(*datasets.Step, []datasets.StepRequest) error { return nil }
func (discardSink) Request(*datasets.Request) error                   { return nil }

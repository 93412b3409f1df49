package sim

import (
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/require"
)

// A DatasetSink keeps the rows it lends in place and copies any others, so
// that a caller reusing its own rows after Step changes nothing written;
// through a Tee, the first sink that lends does and the others read the
// lent rows. Batches larger than one gather pass flush on the way, and a
// step may carry more step_requests rows than a batch holds.
func TestDatasetSinkLentRows(t *testing.T) {
	for _, c := range []struct {
		name string
		lend func(i int) bool // step i goes into lent rows
	}{
		{"every step lent", func(int) bool { return true }},
		{"no step lent", func(int) bool { return false }},
		{"alternating", func(i int) bool { return i%2 == 0 }},
		{"lent, then the rows unused", func(i int) bool { return i%3 != 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			w, err := datasets.Create(dir, datasets.Manifest{}, datasets.CreateOptions{})
			require.NoError(t, err)
			ds, err := NewDatasetSink(w, true)
			require.NoError(t, err)
			metrics := NewRunMetrics()
			var sink Sink = Tee{metrics, ds} // the lender is not the first sink
			lender := LenderOf(sink)
			require.Same(t, ds, lender)
			const batch = 256 // rows of one gather pass
			const n = 3*batch + 7
			reqsOf := func(i int) int { // none to more than a batch
				if i%97 == 0 {
					return 2*batch + 3
				}
				return i % 5
			}
			var own datasets.Step
			var ownRows []datasets.StepRequest
			wantRows := 0
			for i := range n {
				k := reqsOf(i)
				row, rows := &own, append(ownRows[:0], make([]datasets.StepRequest, k)...)
				if c.lend(i) {
					row, rows = lender.NextStep(), lender.NextRows(k)
				} else if i%3 == 1 {
					lender.NextStep() // lent but not used: the next Step copies
					lender.NextRows(k)
				}
				*row = datasets.Step{StepID: int64(i), Kind: datasets.KindDecode, WallTimeNs: int64(10 * i)}
				for j := range rows {
					rows[j] = datasets.StepRequest{StepID: int64(i), ReqID: "r", PromptLen: int64(j)}
				}
				require.NoError(t, sink.Step(row, rows))
				if !c.lend(i) { // the owner reuses its rows at once
					own = datasets.Step{StepID: -7, Kind: datasets.KindPrefill}
					ownRows = rows[:0]
					for j := range rows {
						rows[j] = datasets.StepRequest{StepID: -7}
					}
				}
				wantRows += k
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
			gotRows, err := datasets.ReadAll[datasets.StepRequest](d, datasets.TableStepRequests)
			require.NoError(t, err)
			require.Len(t, gotRows, wantRows)
			at := 0
			for i := range n {
				for j := range reqsOf(i) {
					r := gotRows[at]
					require.Equal(t, int64(i), r.StepID, "row %d of step %d", j, i)
					require.Equal(t, int64(j), r.PromptLen, "row %d of step %d", j, i)
					at++
				}
			}
			require.Equal(t, map[string]int64{datasets.KindDecode: n}, metrics.Report().Steps)
		})
	}
}

// A sink that keeps no step_requests lends no rows for them, and a Tee of
// sinks that keep nothing lends nothing: the engine records into its own.
func TestLenders(t *testing.T) {
	w, err := datasets.Create(filepath.Join(t.TempDir(), "ds"), datasets.Manifest{}, datasets.CreateOptions{})
	require.NoError(t, err)
	ds, err := NewDatasetSink(w, false)
	require.NoError(t, err)
	require.Same(t, ds, LenderOf(Tee{NewRunMetrics(), ds}))
	require.Nil(t, ds.NextRows(3))
	require.Nil(t, LenderOf(Tee{NewRunMetrics(), discardSink{}}))
	require.Nil(t, LenderOf(discardSink{}))
}

type discardSink struct{}

func (discardSink) Step(*datasets.Step, []datasets.StepRequest) error { return nil }
func (discardSink) Request(*datasets.Request) error                   { return nil }

package sim

import (
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/require"
)

// RunMetrics counts steps by kind whatever the order of the kinds, and by
// the kind's bytes: a kind built at run time counts with the constant.
func TestRunMetricsStepsByKind(t *testing.T) {
	built := string([]byte(datasets.KindDecode)) // the same bytes at another address
	for _, c := range []struct {
		name  string
		kinds []string
		want  map[string]int64
	}{
		{"none", nil, map[string]int64{}},
		{"one kind", []string{datasets.KindDecode, datasets.KindDecode}, map[string]int64{datasets.KindDecode: 2}},
		{"interleaved", []string{datasets.KindPrefill, datasets.KindDecode, datasets.KindMixed, datasets.KindDecode, datasets.KindPrefill},
			map[string]int64{datasets.KindPrefill: 2, datasets.KindDecode: 2, datasets.KindMixed: 1}},
		{"same bytes elsewhere", []string{datasets.KindDecode, built, datasets.KindMixed, built},
			map[string]int64{datasets.KindDecode: 3, datasets.KindMixed: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := NewRunMetrics()
			for _, k := range c.kinds {
				require.NoError(t, m.Step(&datasets.Step{Kind: k, NumPreempted: 1}, nil))
			}
			r := m.Report()
			require.Equal(t, c.want, r.Steps)
			require.Equal(t, int64(len(c.kinds)), r.Preemptions)
		})
	}
}

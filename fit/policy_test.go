package fit

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// TestLoadDatasetsPolicy: datasets of different decode measurement
// policies are fitted apart (LoadOptions.Policy), never pooled silently.
func TestLoadDatasetsPolicy(t *testing.T) {
	dir := t.TempDir()
	steady := writeDataset(t, filepath.Join(dir, "steady"), synthDecode(50, 3), datasets.PolicySteadyStateSecondStep)
	prod := writeDataset(t, filepath.Join(dir, "prod"), synthDecode(40, 5), datasets.PolicyProduction)
	adm := writeDataset(t, filepath.Join(dir, "adm"), synthDecode(30, 4), datasets.PolicyAdmissionStep)
	none := writeDataset(t, filepath.Join(dir, "none"), synthDecode(20, 6), "")
	for _, tc := range []struct {
		name    string
		paths   []string
		policy  string
		rows    int
		leftOut []string
		err     string
	}{
		{"one policy", []string{steady}, PolicyAuto, 50, nil, ""},
		{"steady and production pool", []string{steady, prod}, PolicyAuto, 90, nil, ""},
		{"admission left out", []string{adm, steady}, PolicyAuto, 50, []string{adm + " (measurement_policy.decode admission_step)"}, ""},
		{"admission alone", []string{adm}, PolicyAuto, 30, nil, ""},
		{"pooled when asked", []string{adm, steady}, PolicyAll, 80, nil, ""},
		{"read as given without a policy", []string{adm, steady}, "", 80, nil, ""},
		{"one policy asked for", []string{adm, steady, prod}, datasets.PolicyAdmissionStep, 30,
			[]string{steady + " (measurement_policy.decode steady_state_second_step)", prod + " (measurement_policy.decode production)"}, ""},
		{"admission beside unknown", []string{adm, none}, PolicyAuto, 0, nil, "no measurement_policy"},
		{"asked beside unknown", []string{steady, none}, datasets.PolicySteadyStateSecondStep, 0, nil, "record no measurement_policy"},
		{"asked for one no dataset has", []string{steady}, datasets.PolicyAdmissionStep, 0, nil, "no dataset has it"},
		{"unknown beside steady pools", []string{steady, none}, PolicyAuto, 70, nil, ""},
		{"unknown policy name", []string{steady}, "bogus", 0, nil, `unknown --policy "bogus"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := LoadDatasets(tc.paths, LoadOptions{Policy: tc.policy})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				var de *DataError
				require.Equal(t, !strings.HasPrefix(tc.err, "unknown"), errors.As(err, &de), "a mix is bad data (ErrPolicyMix), an unknown name bad usage")
				if de != nil {
					require.ErrorIs(t, err, ErrPolicyMix)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.rows, l.Data.Len())
			require.Equal(t, tc.leftOut, l.LeftOut)
			require.Equal(t, tc.leftOut, l.Record(Selection{}).LeftOut, "the artifact records what was left out")
			if len(tc.leftOut) > 0 {
				require.Contains(t, l.Warnings[0], "left out", "the first warning says what was left out")
			}
		})
	}
}

package validate

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// What a killed run leaves is reported, not failed: requests still in
// flight (no requests row yet), tables without a completed part, and the
// temporary parts. The same request missing from a complete dataset is an
// error.
func TestPartialRuns(t *testing.T) {
	cases := []struct {
		name      string
		edit      func(f *fixture)
		abort     bool
		errors    []string
		warnings  []string
		leftovers int
	}{
		{"in flight, partial", func(f *fixture) { f.reqs = f.reqs[:2] }, true, nil,
			[]string{"manifest[-1].status", "step_requests[4].req_id"}, 0},
		{"in flight, complete", func(f *fixture) { f.reqs = f.reqs[:2] }, false,
			[]string{"step_requests[4].req_id"}, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := baseFixture()
			c.edit(f)
			f.abort = c.abort
			r, err := Dataset(f.write(t), Options{})
			require.NoError(t, err)
			assert.Equal(t, c.errors, nilIfEmpty(keys(r, Error)))
			assert.Equal(t, c.warnings, nilIfEmpty(keys(r, Warning)))
		})
	}

	// Killed before any part was complete: every table is empty and its
	// open part is a leftover.
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := datasets.Create(dir, datasets.Manifest{Source: datasets.Source{Kind: "test"}}, datasets.CreateOptions{})
	require.NoError(t, err)
	w.Hold()
	tw, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{PartRows: 2})
	require.NoError(t, err)
	require.NoError(t, tw.Write(baseFixture().steps)) // one part held, one open; never committed
	r, err := Dataset(dir, Options{})
	require.NoError(t, err)
	assert.True(t, r.Partial)
	assert.Zero(t, r.Errors, "%v", r.Violations)
	assert.Equal(t, []string{"leftovers[-1].", "leftovers[-1].", "manifest[-1].", "manifest[-1].status", "steps[-1]."}, keys(r, Warning))
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

package pricing

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The host note names the host model in use; for the prior it says how to
// pass a fitted one, and the bundled one it names exists.
func TestHostNote(t *testing.T) {
	_, err := os.Stat(filepath.Join("..", filepath.FromSlash(BundledHostModel)))
	require.NoError(t, err, "the bundled host model the note names")
	hw, err := catalog.LookupHardware("H200")
	require.NoError(t, err)
	shape, err := catalog.LookupModel("Llama-3.1-8B")
	require.NoError(t, err)

	b, err := os.ReadFile(filepath.Join("..", "datasets", "h200", "models", "steady-gpu.json"))
	require.NoError(t, err)
	a, err := fpm.ParseArtifact(b)
	require.NoError(t, err)
	require.NoError(t, WithHost(a, fpm.DefaultHostModel()))
	withHost := filepath.Join(t.TempDir(), "with-host.json")
	require.NoError(t, a.Save(withHost))

	tests := []struct {
		name          string
		fpModel, host string
		prior         bool
		want          string
	}{
		{"roofline, no host model", FPMRoofline, "", true, "host model: the default prior, fitted to no machine, so host_prep_ns and schedule_ns errors are large; pass a fitted one with --host-model datasets/h200/models/host.json"},
		{"a host model given", FPMRoofline, filepath.Join("..", BundledHostModel), false, "host model ../datasets/h200/models/host.json"},
		{"an artifact without params.host", filepath.Join("..", "datasets", "h200", "models", "steady-gpu.json"), "", true, "--host-model datasets/h200/models/host.json"},
		{"an artifact with params.host", withHost, "", false, "host model from the FPM artifact's params.host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Price(Spec{Hardware: hw, Shape: shape, FPM: tc.fpModel, Host: tc.host})
			require.NoError(t, err)
			assert.Equal(t, tc.prior, p.HostPrior)
			assert.Contains(t, HostNote(p), tc.want)
		})
	}
}

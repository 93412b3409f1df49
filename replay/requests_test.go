package replay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
	"github.com/steplab/steplab/sim"
)

// Request replay of a simulated run with its own model and the manifest's
// engine reproduces every request's latencies.
func TestReplayRequestsReproducesSimulation(t *testing.T) {
	for _, name := range []string{"async", "preempting"} {
		t.Run(name, func(t *testing.T) {
			var mod func(*sim.Scenario)
			if name == "preempting" {
				mod = func(sc *sim.Scenario) { sc.Engine.NumGPUBlocks = 1500; sc.Engine.MaxModelLen = 16384 }
			}
			dir, p := simulated(t, name, mod)
			d, err := datasets.Open(dir)
			require.NoError(t, err)
			out := filepath.Join(t.TempDir(), "out")
			sum, err := RunRequests(d, RequestOptions{FPM: p.FPM, Host: p.Host}, Output{Dir: out, DatasetDir: dir, ModelName: "roofline"})
			require.NoError(t, err)
			assert.Equal(t, sum.Requests, sum.Compared)
			for _, dc := range []DistCompare{sum.TTFT, sum.ITL, sum.E2E} {
				assert.Equal(t, dc.Recorded, dc.Predicted)
				assert.Zero(t, dc.MAPE)
			}
			require.NotNil(t, sum.RecordedSteps)
			assert.Equal(t, sum.RecordedSteps.StepsByKind, sum.SimulatedSteps.StepsByKind)
			assert.Equal(t, sum.RecordedSteps.MeanBatchSize, sum.SimulatedSteps.MeanBatchSize)
			_, err = os.Stat(filepath.Join(out, "summary.json"))
			assert.NoError(t, err)
			o, err := datasets.Open(out)
			require.NoError(t, err)
			rows, err := datasets.ReadAll[RequestRow](o, datasets.TableRequests)
			require.NoError(t, err)
			assert.Len(t, rows, sum.Requests)
		})
	}
}

// A slower model shows up as positive ITL and E2E errors.
func TestReplayRequestsSlowerModel(t *testing.T) {
	dir, p := simulated(t, "async", nil)
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	tr, err := LoadTrace(d)
	require.NoError(t, err)
	e, err := EngineOf(d.Manifest)
	require.NoError(t, err)
	reqs, _, err := Simulate(tr, e, scaled{p.FPM, 1.3}, p.Host)
	require.NoError(t, err)
	sum, err := CompareRequests(tr.Rec, reqs, nil)
	require.NoError(t, err)
	assert.Greater(t, sum.ITL.RelErr["mean"], 0.15)
	assert.Greater(t, sum.E2E.RelErr["mean"], 0.15)
}

type scaled struct {
	f model.FPM
	k float64
}

func (s scaled) PredictNs(f model.Features) float64 { return s.k * s.f.PredictNs(f) }

// Manifest without an engine section: defaults with warnings.
func TestEngineOfDefaults(t *testing.T) {
	e, err := EngineOf(&datasets.Manifest{})
	require.NoError(t, err)
	assert.NotEmpty(t, e.Warnings)
	assert.Equal(t, 256, e.Sched.MaxNumSeqs)
}

func TestHardwareAndShapeOfLLMServingSimRuns(t *testing.T) {
	m := &datasets.Manifest{Hardware: &datasets.Hardware{GPUName: "RTXPRO6000"}, Model: &datasets.ModelShape{Name: "meta-llama/Llama-3.1-8B"}}
	hw, err := HardwareOf(m)
	require.NoError(t, err)
	assert.Equal(t, "RTX-PRO-6000-Server", hw.Name)
	sh, note, err := ShapeOf(m)
	require.NoError(t, err)
	assert.Equal(t, "Llama-3.1-8B", sh.Name)
	assert.Contains(t, note, "head_dim absent")
	m.Model.Name = "Qwen/Qwen3-30B-A3B-Instruct-2507"
	sh, note, err = ShapeOf(m)
	require.NoError(t, err)
	assert.Equal(t, 48, sh.Layers)
	assert.Equal(t, 128, sh.MoE.Experts, "the MoE shape, not a dense proxy")
	assert.Contains(t, note, "fine-tune suffixes")
	m.Hardware.GPUName = "MI250X"
	_, err = HardwareOf(m)
	assert.ErrorContains(t, err, "nearest known")
}

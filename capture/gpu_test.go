package capture

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
)

// TestOpenNVMLWithoutDriver: this machine has no NVIDIA driver; OpenNVML
// must say so with ErrNoNVML rather than crash, so a CPU capture runs on.
func TestOpenNVMLWithoutDriver(t *testing.T) {
	mon, err := OpenNVML()
	if err == nil {
		mon.Close()
		t.Skip("an NVIDIA driver is present: nothing to test")
	}
	assert.True(t, errors.Is(err, ErrNoNVML), "%v does not wrap ErrNoNVML", err)
}

// fakeMonitor is a GPUMonitor with one GPU whose power rises per sample.
type fakeMonitor struct {
	mu sync.Mutex
	n  int
}

func (f *fakeMonitor) Devices() ([]GPUInfo, error) {
	return []GPUInfo{{Index: 0, Name: "fake", UUID: "GPU-fake"}}, nil
}

func (f *fakeMonitor) Sample(i int) (datasets.GPUSample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return datasets.GPUSample{GPUIndex: int32(i), PowerW: float64(100 + f.n), PowerLimitW: 700, SMClockMHz: 1980,
		MemUsedBytes: 1 << 30, MemTotalBytes: 2 << 30, UtilGPUPercent: 50}, nil
}

func (f *fakeMonitor) Close() error { return nil }

// TestSamplerWritesGPUSamples: the sampler polls the monitor and writes
// gpu_samples rows stamped on the capture's clock, in order.
func TestSamplerWritesGPUSamples(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := datasets.Create(dir, datasets.Manifest{Source: datasets.Source{Kind: "capture"}}, datasets.CreateOptions{})
	require.NoError(t, err)
	clock := NewWallClock()
	s, err := StartSampler(&fakeMonitor{}, w, clock, 5*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(60 * time.Millisecond)
	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "Stop is idempotent")
	require.NoError(t, w.Close())

	d, err := datasets.Open(dir)
	require.NoError(t, err)
	rows, err := datasets.ReadAll[datasets.GPUSample](d, datasets.TableGPUSamples)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(rows), 3)
	for i, r := range rows {
		assert.EqualValues(t, 101+i, r.PowerW, "sample %d in order", i)
		assert.GreaterOrEqual(t, r.TNs, int64(0))
		if i > 0 {
			assert.Greater(t, r.TNs, rows[i-1].TNs)
		}
	}
	assert.Less(t, rows[len(rows)-1].TNs, clock.Now())
	rep, err := validate.Dataset(dir, validate.Options{})
	require.NoError(t, err)
	assert.Zero(t, rep.Errors, "%v", rep.Violations)
}

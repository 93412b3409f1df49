//go:build linux && cgo

package capture

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
)

// mockH200 is go-nvml's DGX H200 mock (8 GPUs) with the device readings
// the monitor uses and the mock does not preset (those panic when called).
func mockH200() *server.Server {
	lib := dgxh200.New()
	for i, d := range lib.Devices {
		md := d.(*server.Device)
		i := i
		md.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
			switch c {
			case nvml.CLOCK_SM:
				return 1980, nvml.SUCCESS
			case nvml.CLOCK_MEM:
				return 3201, nvml.SUCCESS
			}
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		md.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 700_000, nvml.SUCCESS } // mW
		md.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(412_500 + i), nvml.SUCCESS }
		md.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return uint32(40 + i), nvml.SUCCESS }
		md.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 97, Memory: 61}, nvml.SUCCESS
		}
		md.MemoryInfo = nvml.Memory{Total: 144384 << 20, Used: 120 << 30, Free: 144384<<20 - 120<<30}
	}
	return lib
}

func TestNVMLDevicesFromMock(t *testing.T) {
	lib := mockH200()
	mon, err := openNVMLWith(lib)
	require.NoError(t, err)
	defer mon.Close()

	devs, err := mon.Devices()
	require.NoError(t, err)
	require.Len(t, devs, 8)
	for i, g := range devs {
		uuid, _ := lib.Devices[i].GetUUID()
		assert.Equal(t, GPUInfo{Index: i, Name: "NVIDIA H200 141GB HBM3e", UUID: uuid, Driver: "550.54.15",
			SMClockMHz: 1980, MemClockMHz: 3201, PowerLimitW: 700, MemTotalBytes: 144384 << 20}, g)
	}
	assert.NotEqual(t, devs[0].UUID, devs[1].UUID)
}

func TestNVMLSampleFromMock(t *testing.T) {
	mon, err := openNVMLWith(mockH200())
	require.NoError(t, err)
	s, err := mon.Sample(3)
	require.NoError(t, err)
	assert.Equal(t, datasets.GPUSample{GPUIndex: 3, SMClockMHz: 1980, MemClockMHz: 3201, PowerW: 412.503, PowerLimitW: 700, TemperatureC: 43,
		MemUsedBytes: 120 << 30, MemTotalBytes: 144384 << 20, UtilGPUPercent: 97, UtilMemPercent: 61}, s)
}

func TestOpenNVMLWithFailingLibrary(t *testing.T) {
	tests := []struct {
		name     string
		init     nvml.Return
		count    int
		countRet nvml.Return
		want     string
		shutdown bool // the library was initialised, so it must be shut down
	}{
		{"no library", nvml.ERROR_LIBRARY_NOT_FOUND, 0, nvml.SUCCESS, "ERROR_LIBRARY_NOT_FOUND", false},
		{"no driver", nvml.ERROR_DRIVER_NOT_LOADED, 0, nvml.SUCCESS, "ERROR_DRIVER_NOT_LOADED", false},
		{"no GPU", nvml.SUCCESS, 0, nvml.SUCCESS, "no GPU", true},
		{"count fails", nvml.SUCCESS, 0, nvml.ERROR_UNKNOWN, "no GPU", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lib := dgxh200.New()
			var shut bool
			lib.InitFunc = func() nvml.Return { return tc.init }
			lib.DeviceGetCountFunc = func() (int, nvml.Return) { return tc.count, tc.countRet }
			lib.ShutdownFunc = func() nvml.Return { shut = true; return nvml.SUCCESS }
			mon, err := openNVMLWith(lib)
			require.Error(t, err)
			assert.Nil(t, mon)
			assert.ErrorIs(t, err, ErrNoNVML)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, tc.shutdown, shut)
		})
	}
}

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

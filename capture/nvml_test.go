//go:build linux && cgo && nvml

package capture

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
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

//go:build linux && cgo && nvml

package capture

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/steplab/steplab/datasets"
)

// nvmlMonitor reads GPU state through NVML (go-nvml).
type nvmlMonitor struct {
	lib nvml.Interface
}

// OpenNVML initialises NVML; ErrNoNVML where the library or a GPU is missing.
func OpenNVML() (GPUMonitor, error) {
	return openNVMLWith(nvml.New())
}

func openNVMLWith(lib nvml.Interface) (GPUMonitor, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: %v", ErrNoNVML, ret)
	}
	if n, ret := lib.DeviceGetCount(); ret != nvml.SUCCESS || n == 0 {
		lib.Shutdown()
		return nil, fmt.Errorf("%w: no GPU", ErrNoNVML)
	}
	return &nvmlMonitor{lib: lib}, nil
}

func (m *nvmlMonitor) Devices() ([]GPUInfo, error) {
	n, ret := m.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, errors.New(ret.Error())
	}
	driver, _ := m.lib.SystemGetDriverVersion()
	var out []GPUInfo
	for i := 0; i < n; i++ {
		d, ret := m.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %d: %v", i, ret)
		}
		g := GPUInfo{Index: i, Driver: driver}
		g.Name, _ = d.GetName()
		g.UUID, _ = d.GetUUID()
		if v, r := d.GetClockInfo(nvml.CLOCK_SM); r == nvml.SUCCESS {
			g.SMClockMHz = int(v)
		}
		if v, r := d.GetClockInfo(nvml.CLOCK_MEM); r == nvml.SUCCESS {
			g.MemClockMHz = int(v)
		}
		if v, r := d.GetEnforcedPowerLimit(); r == nvml.SUCCESS {
			g.PowerLimitW = float64(v) / 1000
		}
		if mem, r := d.GetMemoryInfo(); r == nvml.SUCCESS {
			g.MemTotalBytes = int64(mem.Total)
		}
		out = append(out, g)
	}
	return out, nil
}

func (m *nvmlMonitor) Sample(i int) (datasets.GPUSample, error) {
	d, ret := m.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return datasets.GPUSample{}, errors.New(ret.Error())
	}
	s := datasets.GPUSample{GPUIndex: int32(i)}
	if v, r := d.GetClockInfo(nvml.CLOCK_SM); r == nvml.SUCCESS {
		s.SMClockMHz = int32(v)
	}
	if v, r := d.GetClockInfo(nvml.CLOCK_MEM); r == nvml.SUCCESS {
		s.MemClockMHz = int32(v)
	}
	if v, r := d.GetPowerUsage(); r == nvml.SUCCESS {
		s.PowerW = float64(v) / 1000
	}
	if v, r := d.GetEnforcedPowerLimit(); r == nvml.SUCCESS {
		s.PowerLimitW = float64(v) / 1000
	}
	// GetTemperature is deprecated in favour of GetTemperatureV, whose
	// versioned struct only exists in the C library: the old call works on
	// every driver and in go-nvml's mocks.
	if t, r := d.GetTemperature(nvml.TEMPERATURE_GPU); r == nvml.SUCCESS {
		s.TemperatureC = int32(t)
	}
	if mem, r := d.GetMemoryInfo(); r == nvml.SUCCESS {
		s.MemUsedBytes, s.MemTotalBytes = int64(mem.Used), int64(mem.Total)
	}
	if u, r := d.GetUtilizationRates(); r == nvml.SUCCESS {
		s.UtilGPUPercent, s.UtilMemPercent = int32(u.Gpu), int32(u.Memory)
	}
	return s, nil
}

func (m *nvmlMonitor) Close() error {
	m.lib.Shutdown()
	return nil
}

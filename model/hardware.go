package model

import (
	"fmt"
	"sort"
	"strings"
)

// Hardware is what the roofline prior and the memory model need to know
// about one accelerator: its datasheet peaks. Efficiency factors (how much
// of a peak a kernel reaches) belong to the model that uses them (Roofline),
// not to the hardware.
type Hardware struct {
	Name string `json:"name"`
	// PeakTFLOPS is the dense bf16 tensor-core peak (no sparsity), in 1e12
	// FLOP/s.
	PeakTFLOPS float64 `json:"peak_tflops"`
	// MemBandwidthGBs is the HBM bandwidth in GB/s (1e9 bytes/s).
	MemBandwidthGBs float64 `json:"mem_bandwidth_gbs"`
	// MemGB is the device memory as marketed ("80 GB"). The driver reports
	// about that many GiB (an H100 shows 81,559 MiB, an H200 143,771 MiB),
	// so the capacity the memory model uses is MemGB·2^30 bytes (MemBytes).
	MemGB float64 `json:"mem_gb"`
	// InterconnectGBs is the GPU-to-GPU bandwidth per direction (NVLink),
	// in GB/s, used for tensor-parallel all-reduces.
	InterconnectGBs float64 `json:"interconnect_gbs"`
}

// MemBytes is the device memory capacity in bytes (MemGB GiB).
func (h Hardware) MemBytes() float64 { return h.MemGB * (1 << 30) }

// PeakFLOPs is the peak in FLOP/s.
func (h Hardware) PeakFLOPs() float64 { return h.PeakTFLOPS * 1e12 }

// BandwidthBytes is the HBM bandwidth in bytes/s.
func (h Hardware) BandwidthBytes() float64 { return h.MemBandwidthGBs * 1e9 }

// Validate reports a preset or a hand-written Hardware that cannot price
// anything.
func (h Hardware) Validate() error {
	switch {
	case h.Name == "":
		return fmt.Errorf("model: hardware: empty name")
	case !(h.PeakTFLOPS > 0):
		return fmt.Errorf("model: hardware %s: peak_tflops must be > 0, got %v", h.Name, h.PeakTFLOPS)
	case !(h.MemBandwidthGBs > 0):
		return fmt.Errorf("model: hardware %s: mem_bandwidth_gbs must be > 0, got %v", h.Name, h.MemBandwidthGBs)
	case !(h.MemGB > 0):
		return fmt.Errorf("model: hardware %s: mem_gb must be > 0, got %v", h.Name, h.MemGB)
	case h.InterconnectGBs < 0:
		return fmt.Errorf("model: hardware %s: interconnect_gbs must be >= 0, got %v", h.Name, h.InterconnectGBs)
	}
	return nil
}

// Datasheet presets (NVIDIA H100 and H200 SXM datasheets: 989 TFLOPS dense
// bf16 — the datasheets' 1,979 is with 2:4 sparsity —, HBM3 3.35 TB/s and
// HBM3e 4.8 TB/s, NVLink 4 at 900 GB/s bidirectional = 450 GB/s per
// direction).
var (
	H100SXM = Hardware{Name: "H100-SXM", PeakTFLOPS: 989, MemBandwidthGBs: 3350, MemGB: 80, InterconnectGBs: 450}
	H200SXM = Hardware{Name: "H200-SXM", PeakTFLOPS: 989, MemBandwidthGBs: 4800, MemGB: 141, InterconnectGBs: 450}
)

var hardwarePresets = map[string]Hardware{
	"h100-sxm": H100SXM,
	"h200-sxm": H200SXM,
}

// hardwareAliases maps other spellings (as nvidia-smi, AIConfigurator's
// systems database or a user write them) to a preset key.
var hardwareAliases = map[string]string{
	"h100": "h100-sxm", "h100sxm": "h100-sxm", "h100_sxm": "h100-sxm", "nvidia h100 80gb hbm3": "h100-sxm",
	"h200": "h200-sxm", "h200sxm": "h200-sxm", "h200_sxm": "h200-sxm", "nvidia h200": "h200-sxm",
}

// HardwareNames lists the preset names.
func HardwareNames() []string {
	out := make([]string, 0, len(hardwarePresets))
	for _, h := range hardwarePresets {
		out = append(out, h.Name)
	}
	sort.Strings(out)
	return out
}

// HardwareByName returns a preset by name, case-insensitively ("H200",
// "h200-sxm", "H200_SXM" and "NVIDIA H200" all name the H200 SXM). An
// unknown name is an error that lists the valid ones.
func HardwareByName(name string) (Hardware, error) {
	k := strings.ToLower(strings.TrimSpace(name))
	if h, ok := hardwarePresets[k]; ok {
		return h, nil
	}
	if a, ok := hardwareAliases[k]; ok {
		return hardwarePresets[a], nil
	}
	return Hardware{}, fmt.Errorf("model: unknown hardware %q: valid names are %s", name, strings.Join(HardwareNames(), ", "))
}

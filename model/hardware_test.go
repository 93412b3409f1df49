package model

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHardwarePresets(t *testing.T) {
	tests := []struct {
		hw              Hardware
		tflops, bw, mem float64
	}{
		{H100SXM, 989, 3350, 80},
		{H200SXM, 989, 4800, 141},
	}
	for _, tc := range tests {
		t.Run(tc.hw.Name, func(t *testing.T) {
			require.NoError(t, tc.hw.Validate())
			assert.Equal(t, tc.tflops, tc.hw.PeakTFLOPS)
			assert.Equal(t, tc.bw, tc.hw.MemBandwidthGBs)
			assert.Equal(t, tc.mem, tc.hw.MemGB)
			// The driver reports within 1% of MemGB GiB (81,559 / 143,771 MiB).
			assert.InDelta(t, tc.mem*(1<<30), tc.hw.MemBytes(), 0.01*tc.hw.MemBytes())
			assert.Equal(t, tc.tflops*1e12, tc.hw.PeakFLOPs())
			assert.Equal(t, tc.bw*1e9, tc.hw.BandwidthBytes())
		})
	}
}

func TestHardwareByName(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"H100-SXM", "H100-SXM"},
		{"h100", "H100-SXM"},
		{"H100_SXM", "H100-SXM"},
		{"  H200 ", "H200-SXM"},
		{"h200-sxm", "H200-SXM"},
		{"NVIDIA H200", "H200-SXM"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			hw, err := HardwareByName(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, hw.Name)
		})
	}
	_, err := HardwareByName("A100")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"A100"`)
	assert.Contains(t, err.Error(), "H100-SXM, H200-SXM", "the error lists the valid names")
}

func TestHardwareValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*Hardware)
		msg  string
	}{
		{"no name", func(h *Hardware) { h.Name = "" }, "empty name"},
		{"zero flops", func(h *Hardware) { h.PeakTFLOPS = 0 }, "peak_tflops"},
		{"zero bandwidth", func(h *Hardware) { h.MemBandwidthGBs = 0 }, "mem_bandwidth_gbs"},
		{"zero memory", func(h *Hardware) { h.MemGB = 0 }, "mem_gb"},
		{"negative link", func(h *Hardware) { h.InterconnectGBs = -1 }, "interconnect_gbs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := H200SXM
			tc.mut(&h)
			err := h.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestHardwareJSONRoundTrip(t *testing.T) {
	b, err := json.Marshal(H200SXM)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"H200-SXM","peak_tflops":989,"mem_bandwidth_gbs":4800,"mem_gb":141,"interconnect_gbs":450}`, string(b))
	var back Hardware
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, H200SXM, back)
}

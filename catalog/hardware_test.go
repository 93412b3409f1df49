package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHardwareFigures(t *testing.T) {
	tests := []struct {
		hw              Hardware
		tflops, bw, mem float64
		link            float64
	}{
		{h100, 989, 3350, 80, 450},
		{h200, 989, 4800, 141, 450},
	}
	for _, tc := range tests {
		t.Run(tc.hw.Name, func(t *testing.T) {
			require.NoError(t, tc.hw.Validate())
			assert.Equal(t, tc.tflops, tc.hw.TFLOPS.BF16)
			assert.Equal(t, tc.bw, tc.hw.MemBandwidthGBs)
			assert.Equal(t, tc.mem, tc.hw.MemGB)
			// The driver reports within 1% of MemGB GiB (81,559 / 143,771 MiB).
			assert.InDelta(t, tc.mem*(1<<30), tc.hw.MemBytes(), 0.01*tc.hw.MemBytes())
			assert.Equal(t, tc.tflops*1e12, tc.hw.PeakFLOPs())
			assert.Equal(t, tc.bw*1e9, tc.hw.BandwidthBytes())
			link, ok := tc.hw.TPLink()
			require.True(t, ok)
			assert.Equal(t, LinkNVLink, link.Kind, "NVLink, not PCIe, carries TP")
			assert.Equal(t, tc.link, link.GBsPerDirection)
		})
	}
}

func TestHardwarePeakPerDType(t *testing.T) {
	a100 := mustHardware("A100-SXM-80GB")
	assert.Zero(t, a100.PeakTFLOPSFor(DTypeFP8), "an A100 has no fp8 tensor cores")
	assert.Equal(t, 312.0, a100.PeakTFLOPSFor(DTypeBF16))
	assert.Equal(t, 1979.0, h200.PeakTFLOPSFor(DTypeFP8))
	// fp8 weights run at the fp8 peak where the chip has one, else at the
	// activation dtype's (weight-only fp8).
	fp8 := llama8B
	fp8.WeightDType = DTypeFP8
	assert.Equal(t, DTypeFP8, fp8.GEMMDType(h200))
	assert.Equal(t, DTypeBF16, fp8.GEMMDType(a100))
	assert.Equal(t, DTypeBF16, llama8B.GEMMDType(h200))
}

func TestHardwareValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*Hardware)
		msg  string
	}{
		{"no name", func(h *Hardware) { h.Name = "" }, "name: missing"},
		{"zero flops", func(h *Hardware) { h.TFLOPS.BF16 = 0 }, "tflops.bf16: missing or zero"},
		{"negative fp8", func(h *Hardware) { h.TFLOPS.FP8 = -1 }, "tflops.fp8"},
		{"zero bandwidth", func(h *Hardware) { h.MemBandwidthGBs = 0 }, "memory_bandwidth_gbs"},
		{"zero memory", func(h *Hardware) { h.MemGB = 0 }, "memory_gb"},
		{"negative sms", func(h *Hardware) { h.SMs = -4 }, "sms: -4"},
		{"no links", func(h *Hardware) { h.Interconnects = nil }, "interconnects: missing"},
		{"negative link", func(h *Hardware) {
			h.Interconnects = []Interconnect{{Kind: LinkNVLink, GBsPerDirection: -1, LatencyUs: 5}}
		},
			"interconnects[0].gbs_per_direction"},
		{"unknown link", func(h *Hardware) {
			h.Interconnects = []Interconnect{{Kind: "infiniband", GBsPerDirection: 50, LatencyUs: 5}}
		},
			`interconnects[0].kind: "infiniband"`},
		{"bad efficiency", func(h *Hardware) { h.Roofline.WeightBWEff = Flat(1.5) }, "roofline.weight_bandwidth_efficiency"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := h200
			h.Interconnects = append([]Interconnect(nil), h200.Interconnects...)
			tc.mut(&h)
			err := h.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestHardwareJSONRoundTrip(t *testing.T) {
	b, err := json.Marshal(h200)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"memory_bandwidth_gbs":4800`)
	assert.Contains(t, string(b), `"gemm_efficiency":0.8`, "a flat curve is written as its number")
	var back Hardware
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, h200, back)
}

func TestCurve(t *testing.T) {
	c := Curve{Points: [][2]float64{{1, 0.2}, {64, 0.6}, {4096, 0.8}}}
	tests := []struct{ x, want float64 }{
		{-5, 0.2}, {1, 0.2}, {32.5, 0.4}, {64, 0.6}, {2080, 0.7}, {4096, 0.8}, {1e9, 0.8},
	}
	for _, tc := range tests {
		assert.InDelta(t, tc.want, c.At(tc.x), 1e-12, "x=%v", tc.x)
	}
	assert.Equal(t, 0.8, Flat(0.8).At(123))
	for _, in := range []string{`0.75`, `[[1,0.2],[64,0.6]]`} {
		var got Curve
		require.NoError(t, json.Unmarshal([]byte(in), &got))
		out, err := json.Marshal(got)
		require.NoError(t, err)
		assert.JSONEq(t, in, string(out))
	}
	var bad Curve
	assert.Error(t, json.Unmarshal([]byte(`"fast"`), &bad))
}

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
		{"link without its domain", func(h *Hardware) { h.Interconnects[0].GPUs = 0 }, "interconnects[0].gpus: missing: give the GPUs the nvlink link joins"},
		{"negative domain", func(h *Hardware) { h.Interconnects[1].GPUs = -8 }, "interconnects[1].gpus: -8"},
		{"network with a domain", func(h *Hardware) {
			h.Interconnects = append(h.Interconnects, Interconnect{Kind: LinkNetwork, GBsPerDirection: 50, LatencyUs: 10, GPUs: 8})
		}, "a network link joins no GPUs of one node: leave gpus out"},
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

// Layout places a group on the fastest link whose domain holds it, and
// beyond the largest domain on whole nodes joined by the network.
func TestHardwareLayout(t *testing.T) {
	b200, gb200, pcie := mustHardware("B200"), mustHardware("GB200"), mustHardware("H100-PCIe")
	user, err := LoadHardwareFile("testdata/user-gpu.yaml") // PCIe only, no network
	require.NoError(t, err)
	for _, c := range []struct {
		name        string
		hw          Hardware
		gpus        int
		nodes, per  int
		link        string
		networkGBs  float64
		errContains string
	}{
		{"B200 TP1", b200, 1, 1, 1, LinkNVLink, 0, ""},
		{"B200 TP8: one HGX board", b200, 8, 1, 8, LinkNVLink, 0, ""},
		{"B200 TP16: two boards over ConnectX-7", b200, 16, 2, 8, LinkNVLink, 50, ""},
		{"B200 TP32: four boards", b200, 32, 4, 8, LinkNVLink, 50, ""},
		{"B200 TP12: not whole nodes", b200, 12, 0, 0, "", 0, "12 GPUs do not fill whole nodes of 8 B200 GPUs (one nvlink domain each): a group beyond one node is a multiple of 8"},
		{"GB200 TP16: one NVL72 domain", gb200, 16, 1, 16, LinkNVLink, 0, ""},
		{"GB200 TP144: two racks", gb200, 144, 2, 72, LinkNVLink, 50, ""},
		{"H100 PCIe TP2: the NVLink bridge", pcie, 2, 1, 2, LinkNVLink, 0, ""},
		{"H100 PCIe TP4: past the bridge, PCIe", pcie, 4, 1, 4, LinkPCIe, 0, ""},
		{"H100 PCIe TP16: two PCIe hosts", pcie, 16, 2, 8, LinkPCIe, 12.5, ""},
		{"no network link", user, 16, 0, 0, "", 0, "16 GPUs span more than one node of 8 Test-GPU-48G GPUs (one pcie domain), and Test-GPU-48G lists no network link between nodes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := c.hw.Layout(c.gpus)
			if c.errContains != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.errContains)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.nodes, l.Nodes)
			assert.Equal(t, c.per, l.GPUsPerNode)
			assert.Equal(t, c.link, l.Link.Kind)
			assert.Equal(t, c.networkGBs, l.Network.GBsPerDirection)
			assert.Equal(t, c.nodes > 1, l.MultiNode())
		})
	}
	assert.Equal(t, 8, b200.NodeGPUs())
	assert.Equal(t, 72, gb200.NodeGPUs())
}

// Every built-in GPU-to-GPU link states its domain, and every GPU a
// network link between nodes.
func TestBuiltinNodes(t *testing.T) {
	for _, hw := range builtin.Hardware() {
		assert.Positive(t, hw.NodeGPUs(), hw.Name)
		_, err := hw.Layout(2 * hw.NodeGPUs())
		assert.NoError(t, err, "%s: two nodes", hw.Name)
	}
}

// The refusal of a TP degree the nodes cannot hold names degrees that the
// model and the GPU both take; a model too large for a node is told the
// degree of two nodes.
func TestCheckTP(t *testing.T) {
	b200 := mustHardware("B200")
	glm, err := LoadModelConfig("testdata/aiconfigurator/zai-org--GLM-5_config.json")
	require.NoError(t, err)
	err = CheckTP(b200, glm.WithTP(12), 0) // 64 heads: 12 does not divide them either
	require.Error(t, err)
	assert.Contains(t, err.Error(), "use tensor_parallel=8 or 16")
	assert.NoError(t, CheckTP(b200, glm.WithTP(16), 0.9))
	s := glm
	s.Heads, s.KVHeads = 96, 96 // 12 divides the heads: only the nodes refuse it
	err = CheckTP(b200, s.WithTP(12), 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "12 GPUs do not fill whole nodes of 8 B200 GPUs")
	assert.Contains(t, err.Error(), "use tensor_parallel=8 or 16")
	err = CheckTP(b200, s.WithTP(12), 0.9)
	require.Error(t, err)
	assert.Contains(t, err.Error(), ": use tensor_parallel=16", "its weights do not fit at 8")

	_, err = KVBlocks(b200, glm.WithTP(8), 16, 0.9, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "raise tensor parallel to 16 or more (tensor_parallel=16)", "9 to 15 fill no whole nodes")
	_, err = KVBlocks(b200, glm.WithTP(16), 16, 0.9, 0)
	assert.NoError(t, err, "two nodes hold it")
}

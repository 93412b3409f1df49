package catalog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each family's vision_config keys give the encoder its published
// geometry: Qwen3-VL and Kimi resize nothing (patches follow the image,
// merged 2×2), Gemma 4 gives every image 280 soft tokens pooled 3×3, and
// MiniMax-M3's CLIP tower resizes to 2016² pixels of 14² patches.
func TestParseVisionTower(t *testing.T) {
	for _, tc := range []struct {
		config                                   string
		layers, hidden, inter, patch, merge, out int
		patches1024, tokens1024                  int
	}{
		{"Qwen--Qwen3-VL-8B-Instruct", 27, 1152, 4304, 16, 2, 4096, 64 * 64, 32 * 32},
		{"moonshotai--Kimi-K2.5", 27, 1152, 4304, 14, 2, 7168, 74 * 74, 37 * 37},
		{"google--gemma-4-26B-A4B", 27, 1152, 4304, 16, 3, 2816, 280 * 9, 280},
		{"nvidia--MiniMax-M3-NVFP4", 32, 1280, 5120, 14, 1, 6144, 144 * 144, 576},
	} {
		t.Run(tc.config, func(t *testing.T) {
			v, err := LoadVisionTower("testdata/aiconfigurator/" + tc.config + "_config.json")
			require.NoError(t, err)
			assert.Equal(t, [6]int{tc.layers, tc.hidden, tc.inter, tc.patch, tc.merge, tc.out},
				[6]int{v.Layers, v.Hidden, v.Intermediate, v.PatchSize, v.Merge, v.OutHidden})
			assert.Equal(t, tc.patches1024, v.Patches(1024, 1024))
			assert.Equal(t, tc.tokens1024, v.Tokens(1024, 1024))
		})
	}
	_, err := LoadVisionTower("testdata/aiconfigurator/meta-llama--Meta-Llama-3.1-8B_config.json")
	require.ErrorContains(t, err, "has no vision_config: it is a text-only model")
	_, err = ParseVisionTower("bad", []byte(`{"vision_config": {"depth": 2, "hidden_size": 8, "patch_size": 14}, "hidden_size": 16}`))
	require.ErrorContains(t, err, "vision_config.intermediate_size is missing or not positive")
	// Encoders a plain ViT would misprice are refused, naming the key.
	_, err = ParseVisionTower("qwen2.5-vl", []byte(`{"vision_config": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "patch_size": 14, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]}, "hidden_size": 3584}`))
	require.ErrorContains(t, err, "vision_config.fullatt_block_indexes: windowed attention")
	_, err = ParseVisionTower("mllama", []byte(`{"vision_config": {"num_hidden_layers": 32, "num_global_layers": 8, "hidden_size": 1280, "intermediate_size": 5120, "patch_size": 14, "image_size": 560}, "hidden_size": 4096}`))
	require.ErrorContains(t, err, "vision_config.num_global_layers")
	_, err = ParseVisionTower("bad", []byte(`{"vision_config": [1]}`))
	require.ErrorContains(t, err, "vision_config")
}

// One image's cost is the block and merger GEMMs' FLOPs at the GEMM
// efficiency (compute-bound at thousands of patches), attention quadratic
// in the patches, and the per-layer overhead; it grows with the image and
// falls on a faster GPU.
func TestVisionImageCost(t *testing.T) {
	v, err := LoadVisionTower("testdata/aiconfigurator/Qwen--Qwen3-VL-8B-Instruct_config.json")
	require.NoError(t, err)
	h200, err := LookupHardware("H200")
	require.NoError(t, err)
	c := v.ImageCost(h200, 1024, 1024)
	P, T, h, i := 4096.0, 1024.0, 1152.0, 4304.0
	mh := 4 * h
	flops := 2*P*27*(4*h*h+2*h*i) + 2*T*(mh*mh+mh*4096)
	peak := h200.TFLOPS.BF16 * 1e12
	assert.InEpsilon(t, 1e9*flops/(peak*h200.Roofline.GEMMEff.At(P)), c.GEMMNs, 1e-9)
	assert.InEpsilon(t, 1e9*4*P*P*h*27/(peak*h200.Roofline.AttnEff.At(P)), c.AttentionNs, 1e-9)
	assert.InDelta(t, c.GEMMNs+c.AttentionNs+c.OverheadNs, c.TotalNs, 1e-6)
	small := v.ImageCost(h200, 512, 512)
	assert.Less(t, small.TotalNs, c.TotalNs/3, "a quarter of the patches, and attention a sixteenth")
	b200, err := LookupHardware("B200")
	require.NoError(t, err)
	assert.Less(t, v.ImageCost(b200, 1024, 1024).TotalNs, c.TotalNs)
}

func FuzzParseVisionTower(f *testing.F) {
	f.Add([]byte(`{"vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "patch_size": 16, "spatial_merge_size": 2, "out_hidden_size": 4096}}`))
	f.Add([]byte(`{"vision_config": {"num_hidden_layers": 32, "hidden_size": 1280, "intermediate_size": 5120, "patch_size": 14, "image_size": 2016}, "image_seq_length": 576, "hidden_size": 6144}`))
	f.Add([]byte(`{"vision_config": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseVisionTower("fuzz", data)
		if err != nil {
			return
		}
		if v.Layers <= 0 || v.Hidden <= 0 || v.Intermediate <= 0 || v.PatchSize <= 0 || v.Merge <= 0 || v.OutHidden <= 0 {
			t.Fatalf("accepted an encoder it cannot size: %+v", v)
		}
		if p := v.Patches(640, 480); p <= 0 || v.Tokens(640, 480) < 0 {
			t.Fatalf("no patches: %+v", v)
		}
	})
}

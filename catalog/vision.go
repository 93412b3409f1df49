package catalog

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// VisionTower is a vision-language model's image encoder as its
// config.json's vision_config describes it: a ViT of Layers blocks of
// Hidden width (full bidirectional attention over the image's patches, an
// MLP of Intermediate) over patches of PatchSize pixels, whose patches are
// merged Merge×Merge into one language-model token by a two-layer
// projector into OutHidden.
//
// A dynamic-resolution encoder (Qwen3-VL, Kimi) has as many patches as the
// image; a fixed-resolution one resizes every image to FixedPatches
// patches and gives it FixedTokens tokens (Gemma 4, CLIP towers).
type VisionTower struct {
	Name         string `json:"name"`
	Layers       int    `json:"layers"`
	Hidden       int    `json:"hidden"`
	Intermediate int    `json:"intermediate"`
	PatchSize    int    `json:"patch_size"`
	Merge        int    `json:"merge"`
	OutHidden    int    `json:"out_hidden"`
	FixedPatches int    `json:"fixed_patches,omitempty"`
	FixedTokens  int    `json:"fixed_tokens,omitempty"`
	// File is the config it was read from.
	File string `json:"file,omitempty"`
}

// LoadVisionTower reads the vision encoder of the config.json path names
// (the file or its checkpoint directory).
func LoadVisionTower(path string) (VisionTower, error) {
	file, name, b, err := readConfigFile(path)
	if err != nil {
		return VisionTower{}, err
	}
	v, err := ParseVisionTower(name, b)
	v.File = file
	return v, err
}

// ParseVisionTower reads the vision_config of a config.json. The keys
// differ by family; each field takes the first present of:
//
//	layers        depth, num_hidden_layers, vt_num_hidden_layers
//	hidden        hidden_size, vt_hidden_size
//	intermediate  intermediate_size, vt_intermediate_size
//	merge         spatial_merge_size, pooling_kernel_size, 2 for merge_type sd2_*, else 1
//	out hidden    out_hidden_size, text_hidden_size, projection_dim, text_config.hidden_size, hidden_size
//	fixed tokens  vision_soft_tokens_per_image, image_seq_length (either level)
//	fixed patches (image_size/patch_size)², else fixed tokens·merge²
func ParseVisionTower(name string, data []byte) (VisionTower, error) {
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		return VisionTower{}, fmt.Errorf("model: %s: config.json: %w", name, err)
	}
	raw, ok := top["vision_config"]
	if !ok || raw == nil {
		return VisionTower{}, fmt.Errorf("model: %s has no vision_config: it is a text-only model, with no image encoder to price", name)
	}
	vc, ok := raw.(map[string]any)
	if !ok {
		return VisionTower{}, fmt.Errorf("model: %s: vision_config is not an object", name)
	}
	tc, _ := top["text_config"].(map[string]any) // a malformed text_config is the language model's error
	for _, u := range unpricedVision {
		if _, ok := vc[u.key]; ok {
			return VisionTower{}, fmt.Errorf("model: %s: vision_config.%s: %s, which the encoder's price does not model", name, u.key, u.what)
		}
	}
	v := VisionTower{Name: name,
		Layers:       intKey(vc, "depth", "num_hidden_layers", "vt_num_hidden_layers"),
		Hidden:       intKey(vc, "hidden_size", "vt_hidden_size"),
		Intermediate: intKey(vc, "intermediate_size", "vt_intermediate_size"),
		PatchSize:    intKey(vc, "patch_size"),
		Merge:        intKey(vc, "spatial_merge_size", "pooling_kernel_size"),
		OutHidden:    intKey(vc, "out_hidden_size", "text_hidden_size", "projection_dim"),
		FixedTokens:  max(intKey(top, "vision_soft_tokens_per_image", "image_seq_length"), intKey(vc, "image_seq_length")),
	}
	if v.Merge == 0 {
		v.Merge = 1
		if mt, _ := vc["merge_type"].(string); strings.HasPrefix(mt, "sd2") {
			v.Merge = 2
		}
	}
	if v.OutHidden == 0 {
		v.OutHidden = max(intKey(tc, "hidden_size"), intKey(top, "hidden_size"))
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"vision_config.depth (or num_hidden_layers)", v.Layers}, {"vision_config.hidden_size", v.Hidden},
		{"vision_config.intermediate_size", v.Intermediate}, {"vision_config.patch_size", v.PatchSize}, {"the language model's hidden_size", v.OutHidden}} {
		if f.v <= 0 {
			return VisionTower{}, fmt.Errorf("model: %s: %s is missing or not positive: the encoder cannot be sized", name, f.key)
		}
	}
	if side := intKey(vc, "image_size"); side > 0 {
		n := side / v.PatchSize
		v.FixedPatches = n * n
	} else if v.FixedTokens > 0 {
		v.FixedPatches = v.FixedTokens * v.Merge * v.Merge
	}
	return v, nil
}

// unpricedVision are vision_config keys of encoders ImageCost would
// misprice: refused rather than priced as a plain ViT.
var unpricedVision = []struct{ key, what string }{
	{"fullatt_block_indexes", "windowed attention in most blocks (Qwen2.5-VL)"},
	{"window_size", "windowed attention"},
	{"num_global_layers", "a second, global encoder (Llama 3.2 Vision)"},
}

// intKey is the first of keys in m holding a positive whole number (0 if none).
func intKey(m map[string]any, keys ...string) int {
	for _, k := range keys {
		if f, ok := m[k].(float64); ok && f > 0 && f == math.Trunc(f) && f < 1<<31 {
			return int(f)
		}
	}
	return 0
}

// Patches is the patches an image of width×height pixels becomes: a
// fixed-resolution encoder's own count, else the image's, each side
// rounded up to whole merge groups of patches.
func (v VisionTower) Patches(width, height int) int {
	if v.FixedPatches > 0 {
		return v.FixedPatches
	}
	side := func(px int) int {
		g := v.PatchSize * v.Merge
		return (px + g - 1) / g * v.Merge
	}
	return side(width) * side(height)
}

// Tokens is the language-model tokens an image of width×height becomes.
func (v VisionTower) Tokens(width, height int) int {
	if v.FixedTokens > 0 {
		return v.FixedTokens
	}
	return v.Patches(width, height) / (v.Merge * v.Merge)
}

// VisionCost is one image's encoder time on a GPU, by part, in ns.
type VisionCost struct {
	Patches, Tokens int
	GEMMNs          float64 `json:"gemm_ns"`      // the blocks' projections and MLPs, and the merger
	AttentionNs     float64 `json:"attention_ns"` // full attention over the patches
	OverheadNs      float64 `json:"overhead_ns"`  // the roofline's per-layer overhead
	TotalNs         float64 `json:"total_ns"`
}

// ImageCost prices one image of width×height pixels on hw at bf16 with
// the hardware's roofline efficiencies: per block the q/k/v/o projections
// (4·h²) and a two-matrix MLP (2·h·i) over the patches, attention of every
// patch to every patch (4·P²·h FLOPs), and the merger's two GEMMs
// (merge²·h → merge²·h → out) over the tokens; compute-bound GEMMs at the
// GEMM efficiency of P rows unless streaming their weights takes longer.
func (v VisionTower) ImageCost(hw Hardware, width, height int) VisionCost {
	P := float64(v.Patches(width, height))
	T := float64(v.Tokens(width, height))
	h, i, L := float64(v.Hidden), float64(v.Intermediate), float64(v.Layers)
	mh := float64(v.Merge*v.Merge) * h
	blockParams := 4*h*h + 2*h*i
	mergerParams := mh*mh + mh*float64(v.OutHidden)
	flops := 2*P*L*blockParams + 2*T*mergerParams
	weights := (L*blockParams + mergerParams) * DTypeBytes(DTypeBF16)
	r := hw.Roofline
	peak := hw.PeakTFLOPSFor(DTypeBF16) * 1e12
	c := VisionCost{Patches: int(P), Tokens: int(T)}
	c.GEMMNs = 1e9 * math.Max(flops/(peak*r.GEMMEff.At(P)), weights/(hw.BandwidthBytes()*r.WeightBWEff.At(weights)))
	c.AttentionNs = 1e9 * 4 * P * P * h * L / (peak * r.AttnEff.At(P))
	c.OverheadNs = L * r.PerLayerNs
	c.TotalNs = c.GEMMNs + c.AttentionNs + c.OverheadNs
	return c
}

package catalog

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Parts of a model a checkpoint quantizes apart.
const (
	partAttn    = "attention" // token mixers: attention, linear attention, Mamba-2 projections
	partMLP     = "mlp"       // dense MLPs and shared experts
	partExperts = "experts"   // routed experts
)

// quantSpec is what a checkpoint says of its precision: the dtype of the
// linear layers, what it keeps unquantized (exclude patterns), per-module
// dtypes (mixed precision) and the KV cache's.
type quantSpec struct {
	source  string // the file and key it was read from
	algo    string // canonical dtype of the quantized linear layers
	exclude []string
	layers  map[string]string // module -> canonical dtype
	kv      string
}

// hfQuantConfig is ModelOpt's hf_quant_config.json.
type hfQuantConfig struct {
	Quantization *modelOptQuant `json:"quantization"`
}

type modelOptQuant struct {
	QuantAlgo       string   `json:"quant_algo"`
	KVCacheQuant    *string  `json:"kv_cache_quant_algo"`
	ExcludeModules  []string `json:"exclude_modules"`
	QuantizedLayers map[string]struct {
		QuantAlgo string `json:"quant_algo"`
	} `json:"quantized_layers"`
}

// hfQuantConfigJSON is config.json's quantization_config, in the forms of
// transformers' fp8, mxfp4, AWQ/GPTQ, compressed-tensors and ModelOpt.
type hfQuantConfigJSON struct {
	QuantMethod         string          `json:"quant_method"`
	Bits                int             `json:"bits"`
	ModulesToNotConvert []string        `json:"modules_to_not_convert"`
	Ignore              []string        `json:"ignore"`
	KVCacheScheme       json.RawMessage `json:"kv_cache_scheme"`
	ConfigGroups        map[string]struct {
		Format  string   `json:"format"`
		Weights *tensorQ `json:"weights"`
		Input   *tensorQ `json:"input_activations"`
	} `json:"config_groups"`
	modelOptQuant
}

type tensorQ struct {
	NumBits int    `json:"num_bits"`
	Type    string `json:"type"`
}

// modelOptAlgos maps ModelOpt's quant_algo names to dtypes.
var modelOptAlgos = map[string]string{
	"FP8": DTypeFP8, "FP8_BLOCK": DTypeFP8, "FP8_PB_WO": DTypeFP8, "MXFP8": DTypeFP8,
	"NVFP4": DTypeNVFP4, "W4A16_NVFP4": DTypeNVFP4A16, "NVFP4_AWQ": DTypeNVFP4,
	"W4A8_AWQ": DTypeINT4, "W4A16_AWQ": DTypeINT4, "W4A8_NVFP4_FP8": DTypeNVFP4, "MXFP4": DTypeMXFP4,
}

func modelOptDType(algo, key string) (string, error) {
	if algo == "" {
		return "", nil
	}
	if d, ok := modelOptAlgos[strings.ToUpper(algo)]; ok {
		return d, nil
	}
	return "", fmt.Errorf("%s %q: unknown quantization (steplab reads FP8, FP8_BLOCK, MXFP8, NVFP4, W4A16_NVFP4, W4A8_AWQ, W4A16_AWQ, MXFP4 and MIXED_PRECISION)", key, algo)
}

// readModelOpt reads a ModelOpt description (hf_quant_config.json's
// "quantization", or quantization_config with quant_method modelopt).
func readModelOpt(q modelOptQuant, source string) (quantSpec, error) {
	spec := quantSpec{source: source, exclude: q.ExcludeModules}
	if !strings.EqualFold(q.QuantAlgo, "MIXED_PRECISION") {
		d, err := modelOptDType(q.QuantAlgo, source+" quant_algo")
		if err != nil {
			return spec, err
		}
		spec.algo = d
	}
	if len(q.QuantizedLayers) > 0 {
		spec.layers = map[string]string{}
		for m, l := range q.QuantizedLayers {
			d, err := modelOptDType(l.QuantAlgo, fmt.Sprintf("%s quantized_layers[%q].quant_algo", source, m))
			if err != nil {
				return spec, err
			}
			spec.layers[m] = d
		}
	} else if spec.algo == "" {
		return spec, fmt.Errorf("%s quant_algo %q: MIXED_PRECISION without quantized_layers", source, q.QuantAlgo)
	}
	if q.KVCacheQuant != nil && *q.KVCacheQuant != "" {
		d, err := modelOptDType(*q.KVCacheQuant, source+" kv_cache_quant_algo")
		if err != nil {
			return spec, err
		}
		if d != DTypeFP8 {
			return spec, fmt.Errorf("%s kv_cache_quant_algo %q: steplab prices an fp8 or unquantized KV cache", source, *q.KVCacheQuant)
		}
		spec.kv = d
	}
	return spec, nil
}

// readQuantizationConfig reads config.json's quantization_config.
func readQuantizationConfig(raw json.RawMessage) (*quantSpec, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	const src = "quantization_config"
	var q hfQuantConfigJSON
	if err := json.Unmarshal(raw, &q); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	spec := quantSpec{source: src, exclude: append(q.ModulesToNotConvert, q.Ignore...)}
	switch m := strings.ToLower(q.QuantMethod); {
	case m == "modelopt" || m == "" && q.QuantAlgo != "" || q.QuantAlgo != "" && len(q.ConfigGroups) > 0:
		s, err := readModelOpt(q.modelOptQuant, src)
		if err != nil {
			return nil, err
		}
		s.exclude = append(s.exclude, spec.exclude...)
		spec = s
	case m == "fp8" || m == "fbgemm_fp8":
		spec.algo = DTypeFP8
	case m == "mxfp4":
		spec.algo = DTypeMXFP4
	case m == "awq" || m == "gptq" || m == "gptq_marlin" || m == "awq_marlin":
		if q.Bits != 4 {
			return nil, fmt.Errorf("%s: %s with bits %d: steplab prices 4-bit AWQ/GPTQ", src, m, q.Bits)
		}
		spec.algo = DTypeINT4
	case m == "compressed-tensors":
		d, err := compressedTensorsDType(q)
		if err != nil {
			return nil, err
		}
		spec.algo = d
	default:
		return nil, fmt.Errorf("%s: quant_method %q: unknown quantization, not priced (steplab reads fp8, mxfp4, awq, gptq, compressed-tensors and modelopt)", src, q.QuantMethod)
	}
	var k tensorQ
	var name string
	if json.Unmarshal(q.KVCacheScheme, &k) == nil && k.NumBits == 8 && k.Type == "float" ||
		json.Unmarshal(q.KVCacheScheme, &name) == nil && strings.EqualFold(name, "fp8") {
		spec.kv = DTypeFP8
	}
	return &spec, nil
}

// compressedTensorsDType is the dtype of compressed-tensors' one config
// group: int4 weights (pack-quantized), mxfp4, nvfp4 (4-bit float
// weights and activations) or fp8.
func compressedTensorsDType(q hfQuantConfigJSON) (string, error) {
	keys := make([]string, 0, len(q.ConfigGroups))
	for k := range q.ConfigGroups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		g := q.ConfigGroups[k]
		w := g.Weights
		if w == nil {
			continue
		}
		switch {
		case strings.Contains(g.Format, "mxfp4"):
			return DTypeMXFP4, nil
		case w.NumBits == 4 && w.Type == "int":
			return DTypeINT4, nil
		case w.NumBits == 4 && w.Type == "float" && g.Input != nil && g.Input.NumBits == 4:
			return DTypeNVFP4, nil
		case w.NumBits == 4 && w.Type == "float":
			return DTypeNVFP4A16, nil
		case w.NumBits == 8 && w.Type == "float":
			return DTypeFP8, nil
		}
		return "", fmt.Errorf("quantization_config.config_groups.%s: %d-bit %s weights: unknown quantization, not priced", k, w.NumBits, w.Type)
	}
	return "", fmt.Errorf("quantization_config: compressed-tensors without config_groups weights")
}

// layerPattern finds the layer an exclude pattern names.
var layerPattern = regexp.MustCompile(`layers\.(\d+)[.*]`)

// partOf says which part a module name or exclude pattern is of ("" for
// the LM head, embeddings, routers, norms and vision towers: already
// priced at the activation dtype).
func partOf(m string) string {
	m = strings.ToLower(m)
	switch {
	case strings.Contains(m, "norm") || strings.Contains(m, "eh_proj") || strings.Contains(m, "embed") || strings.Contains(m, "lm_head") ||
		strings.HasPrefix(m, "mtp") || strings.Contains(m, "vision") || strings.Contains(m, "visual"):
		return ""
	case strings.Contains(m, "experts") && !strings.Contains(m, "shared"):
		return partExperts
	case strings.Contains(m, "attn") || strings.Contains(m, "mixer.") && !strings.Contains(m, "experts") && !strings.Contains(m, "gate"):
		return partAttn
	case strings.Contains(m, "shared_expert") || strings.Contains(m, "mlp") && !strings.Contains(m, "gate") ||
		strings.Contains(m, "_proj") || strings.HasSuffix(m, "*") && strings.Contains(m, "layers."):
		return partMLP
	}
	return ""
}

// applyQuant sets the shape's per-part weight dtypes and KV dtype.
func applyQuant(s *Shape, spec quantSpec, note func(string, ...any)) {
	parts := map[string]string{partAttn: spec.algo, partMLP: spec.algo, partExperts: spec.algo}
	if spec.layers != nil {
		count := map[string]map[string]int{}
		for m, d := range spec.layers {
			p := partOf(m)
			if p == "" {
				continue
			}
			if count[p] == nil {
				count[p] = map[string]int{}
			}
			count[p][d]++
		}
		for p, byD := range count {
			best := ""
			for d, n := range byD {
				if n > byD[best] || n == byD[best] && d < best {
					best = d
				}
			}
			parts[p] = best
		}
	}
	for _, e := range spec.exclude {
		if m := layerPattern.FindStringSubmatch(e); m != nil {
			if n, _ := strconv.Atoi(m[1]); n >= s.Layers {
				continue // a multi-token-prediction layer past the decoder
			}
		}
		if p := partOf(e); p != "" && !(p == partMLP && strings.Contains(strings.ToLower(e), "gate")) {
			parts[p] = ""
		}
	}
	if !s.IsMoE() {
		parts[partExperts] = ""
	}
	s.WeightDType, s.AttnDType, s.MoE.DType = parts[partMLP], "", ""
	if parts[partAttn] != parts[partMLP] {
		s.AttnDType = cmp.Or(parts[partAttn], s.DType)
	}
	if s.IsMoE() && parts[partExperts] != parts[partMLP] {
		s.MoE.DType = cmp.Or(parts[partExperts], s.DType)
	}
	if spec.kv != "" {
		s.KVDType = spec.kv
	}
	note("%s: weights %s (attention %s, mlp %s, experts %s), kv cache %s; embeddings, norms and LM head %s",
		spec.source, cmp.Or(spec.algo, "mixed"), cmp.Or(parts[partAttn], s.DType), cmp.Or(parts[partMLP], s.DType),
		cmp.Or(parts[partExperts], "-"), cmp.Or(s.KVDType, s.DType), s.DType)
}

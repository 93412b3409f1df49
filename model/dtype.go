package model

import (
	"fmt"
	"strings"
)

// Data types a shape's weights, activations and KV cache can have, by
// their canonical names.
const (
	DTypeFP32  = "fp32"
	DTypeBF16  = "bf16"
	DTypeFP16  = "fp16"
	DTypeFP8   = "fp8"
	DTypeMXFP4 = "mxfp4"
)

// dtypeBytes is the storage width per element. MXFP4 (OCP microscaling)
// stores 4-bit values plus one 8-bit scale per 32: 4.25 bits.
var dtypeBytes = map[string]float64{
	DTypeFP32: 4, DTypeBF16: 2, DTypeFP16: 2, DTypeFP8: 1, DTypeMXFP4: 4.25 / 8,
}

// dtypeSpellings maps the names configs and engines use (torch dtypes, HF
// torch_dtype, vLLM's --dtype and --kv-cache-dtype) to canonical names.
var dtypeSpellings = map[string]string{
	"fp32": DTypeFP32, "float32": DTypeFP32, "float": DTypeFP32, "torch.float32": DTypeFP32,
	"bf16": DTypeBF16, "bfloat16": DTypeBF16, "torch.bfloat16": DTypeBF16,
	"fp16": DTypeFP16, "float16": DTypeFP16, "half": DTypeFP16, "torch.float16": DTypeFP16,
	"fp8": DTypeFP8, "fp8_e4m3": DTypeFP8, "fp8_e5m2": DTypeFP8, "float8_e4m3fn": DTypeFP8, "e4m3": DTypeFP8,
	"mxfp4": DTypeMXFP4,
}

// CanonicalDType returns the canonical name of a dtype spelling
// ("bfloat16" → "bf16"), or an error listing the accepted ones.
func CanonicalDType(name string) (string, error) {
	if d, ok := dtypeSpellings[strings.ToLower(strings.TrimSpace(name))]; ok {
		return d, nil
	}
	return "", fmt.Errorf("unknown dtype %q: use one of fp32, bf16, fp16, fp8, mxfp4 (or float32, bfloat16, float16)", name)
}

// DTypeBytes is the storage width of a canonical dtype in bytes (0 for an
// unknown one).
func DTypeBytes(dtype string) float64 { return dtypeBytes[dtype] }

package catalog

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
	// DTypeNVFP4 is NVIDIA's 4-bit float with an fp8 scale per 16 values
	// (4.5 bits), weights and activations (W4A4) on chips with fp4 tensor
	// cores.
	DTypeNVFP4 = "nvfp4"
	// DTypeNVFP4A16 is nvfp4 weights with 16-bit activations (ModelOpt's
	// W4A16_NVFP4): weight-only, the GEMMs run at the activation dtype.
	DTypeNVFP4A16 = "nvfp4_a16"
	// DTypeINT4 is 4-bit integer weights with a 16-bit scale per group of
	// 128 (AWQ, GPTQ, compressed-tensors pack-quantized): 4.125 bits,
	// weight-only.
	DTypeINT4 = "int4"
)

// dtypeBytes is the storage width per element. MXFP4 (OCP microscaling)
// stores 4-bit values plus one 8-bit scale per 32: 4.25 bits.
var dtypeBytes = map[string]float64{
	DTypeFP32: 4, DTypeBF16: 2, DTypeFP16: 2, DTypeFP8: 1, DTypeMXFP4: 4.25 / 8,
	DTypeNVFP4: 4.5 / 8, DTypeNVFP4A16: 4.5 / 8, DTypeINT4: 4.125 / 8,
}

// weightOnly are the dtypes whose GEMMs dequantize to the activation
// dtype: no kernel multiplies their activations at the weights' width.
var weightOnly = map[string]bool{DTypeMXFP4: true, DTypeNVFP4A16: true, DTypeINT4: true}

// dtypeSpellings maps the names configs and engines use (torch dtypes, HF
// torch_dtype, vLLM's --dtype and --kv-cache-dtype) to canonical names.
var dtypeSpellings = map[string]string{
	"fp32": DTypeFP32, "float32": DTypeFP32, "float": DTypeFP32, "torch.float32": DTypeFP32,
	"bf16": DTypeBF16, "bfloat16": DTypeBF16, "torch.bfloat16": DTypeBF16,
	"fp16": DTypeFP16, "float16": DTypeFP16, "half": DTypeFP16, "torch.float16": DTypeFP16,
	"fp8": DTypeFP8, "fp8_e4m3": DTypeFP8, "fp8_e5m2": DTypeFP8, "float8_e4m3fn": DTypeFP8, "e4m3": DTypeFP8,
	"mxfp4": DTypeMXFP4, "nvfp4": DTypeNVFP4, "fp4": DTypeNVFP4, "nvfp4_a16": DTypeNVFP4A16, "w4a16_nvfp4": DTypeNVFP4A16,
	"int4": DTypeINT4, "w4a16": DTypeINT4, "awq": DTypeINT4, "gptq": DTypeINT4,
}

// CanonicalDType returns the canonical name of a dtype spelling
// ("bfloat16" → "bf16"), or an error listing the accepted ones.
func CanonicalDType(name string) (string, error) {
	if d, ok := dtypeSpellings[strings.ToLower(strings.TrimSpace(name))]; ok {
		return d, nil
	}
	return "", fmt.Errorf("unknown dtype %q: use one of fp32, bf16, fp16, fp8, nvfp4, nvfp4_a16, mxfp4, int4 (or float32, bfloat16, float16)", name)
}

// DTypeBytes is the storage width of a canonical dtype in bytes (0 for an
// unknown one).
func DTypeBytes(dtype string) float64 { return dtypeBytes[dtype] }

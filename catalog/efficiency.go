package catalog

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// RooflineParams are how much of a device's peaks real kernels reach, as
// curves over a documented x, and the overheads the roofline does not
// count. A hardware spec file states them (docs/catalog.md); GenericRoofline
// is the documented default for devices without measurements.
type RooflineParams struct {
	// Basis says what the values were measured or fitted on ("generic"
	// for GenericRoofline).
	Basis string `json:"basis" yaml:"basis"`
	// GEMMEff is the fraction of the GEMM dtype's peak the projection and
	// MLP GEMMs reach when compute-bound; x: the step's GEMM rows (tokens,
	// padding included).
	GEMMEff Curve `json:"gemm_efficiency" yaml:"gemm_efficiency"`
	// AttnEff is the fraction of the activation dtype's peak attention
	// reaches when compute-bound; x: the query tokens (prefill tokens, or
	// decode requests).
	AttnEff Curve `json:"attention_efficiency" yaml:"attention_efficiency"`
	// WeightBWEff is the fraction of memory bandwidth reached streaming
	// the weights (memory-bound GEMMs); x: the weight bytes the step reads.
	WeightBWEff Curve `json:"weight_bandwidth_efficiency" yaml:"weight_bandwidth_efficiency"`
	// KVBWEff is the fraction of memory bandwidth reached reading the KV
	// cache (paged attention); x: the KV bytes the step reads.
	KVBWEff Curve `json:"kv_bandwidth_efficiency" yaml:"kv_bandwidth_efficiency"`
	// AllReduceEff is the fraction of the TP link's bandwidth an
	// all-reduce's payload moves at; x: the bytes of one all-reduce.
	AllReduceEff Curve `json:"allreduce_efficiency" yaml:"allreduce_efficiency"`
	// FixedNs is paid once per step: CUDA-graph launch, logits gather,
	// sampler.
	FixedNs float64 `json:"fixed_ns" yaml:"fixed_ns"`
	// PerLayerNs is paid per decoder layer: kernel gaps and the small
	// element-wise kernels (norms, RoPE, activation, residual) the roofline
	// does not count.
	PerLayerNs float64 `json:"per_layer_ns" yaml:"per_layer_ns"`
}

// GenericRoofline is the default for a device with no measurement of its
// own (a spec file says "roofline: generic"): the flat fractions and
// overheads calibrated on the H200 (see Roofline), assumed to carry over.
// A device's own measurements replace it in its spec file.
func GenericRoofline() RooflineParams {
	return RooflineParams{
		Basis:        "generic",
		GEMMEff:      Flat(0.80),
		AttnEff:      Flat(0.52),
		WeightBWEff:  Flat(0.80),
		KVBWEff:      Flat(0.90),
		AllReduceEff: Flat(0.70),
		FixedNs:      200_000,
		PerLayerNs:   15_000,
	}
}

// UnmarshalYAML reads "generic" (GenericRoofline) or a mapping with every
// field.
func (p *RooflineParams) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "generic" {
			return fmt.Errorf("line %d: roofline: %q: write \"generic\" for the documented default or give its fields", n.Line, n.Value)
		}
		*p = GenericRoofline()
		return nil
	}
	type plain RooflineParams // no UnmarshalYAML: no recursion
	var v plain
	if err := n.Decode(&v); err != nil {
		return err
	}
	*p = RooflineParams(v)
	return nil
}

// Validate checks every curve is a fraction and the overheads are positive.
func (p RooflineParams) Validate() error {
	if strings.TrimSpace(p.Basis) == "" {
		return errors.New("roofline.basis: missing: say what the values were measured or fitted on, or write roofline: generic")
	}
	for _, c := range []struct {
		key string
		c   Curve
	}{{"gemm_efficiency", p.GEMMEff}, {"attention_efficiency", p.AttnEff}, {"weight_bandwidth_efficiency", p.WeightBWEff},
		{"kv_bandwidth_efficiency", p.KVBWEff}, {"allreduce_efficiency", p.AllReduceEff}} {
		if err := c.c.validateFraction("roofline." + c.key); err != nil {
			return err
		}
	}
	if err := positive("roofline.fixed_ns", p.FixedNs, "the per-step overhead in ns"); err != nil {
		return err
	}
	return positive("roofline.per_layer_ns", p.PerLayerNs, "the per-layer overhead in ns")
}

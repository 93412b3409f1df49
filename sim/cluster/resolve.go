package cluster

import (
	"errors"
	"fmt"

	"github.com/steplab/steplab/model"
)

// This file is the bridge to the hardware and model catalogues: the GPU's
// interconnect and the model's expert layout are read here and nowhere
// else. Until the catalogue knows GPUs' links and models' MoE shapes, a
// scenario states them (hardware_spec, model_spec with moe, links); the
// functions below are where catalogue lookups replace that.

// MoE is a mixture-of-experts layer layout (Hugging Face config.json:
// num_experts, num_experts_per_tok, moe_intermediate_size,
// shared_expert_intermediate_size). Every decoder layer is an MoE layer.
type MoE struct {
	Experts int `yaml:"experts"`
	TopK    int `yaml:"top_k"`
	// ExpertIntermediate is one expert's SwiGLU width.
	ExpertIntermediate int `yaml:"expert_intermediate"`
	// SharedIntermediate is the width of the shared expert(s) every token
	// runs (0: none).
	SharedIntermediate int `yaml:"shared_intermediate"`
}

// Validate refuses a layout that cannot route tokens.
func (m MoE) Validate() error {
	var errs []error
	if m.Experts < 1 {
		errs = append(errs, fmt.Errorf("moe.experts is %d: give the number of routed experts per layer", m.Experts))
	}
	if m.TopK < 1 || (m.Experts >= 1 && m.TopK > m.Experts) {
		errs = append(errs, fmt.Errorf("moe.top_k is %d: use 1..experts (%d)", m.TopK, m.Experts))
	}
	if m.ExpertIntermediate < 1 {
		errs = append(errs, fmt.Errorf("moe.expert_intermediate is %d: give one expert's MLP width", m.ExpertIntermediate))
	}
	if m.SharedIntermediate < 0 {
		errs = append(errs, fmt.Errorf("moe.shared_intermediate is %d: use 0 (no shared expert) or its width", m.SharedIntermediate))
	}
	return errors.Join(errs...)
}

// ExpertParams is the parameters of one routed expert in one layer
// (gate, up and down projections).
func (m MoE) ExpertParams(hidden int) float64 {
	return 3 * float64(hidden) * float64(m.ExpertIntermediate)
}

// DenseShape is the part of an MoE model every token runs on its own GPU
// (attention, embeddings, norms, shared experts), as a model.Shape the
// roofline and the memory model price; the routed experts are priced by
// the expert-parallel step (moePricer). model.Shape requires an MLP: a
// model without a shared expert gets one of width 1 (3·hidden parameters a
// layer, nothing next to its attention).
func (m MoE) DenseShape(s model.Shape) model.Shape {
	d := s
	d.Intermediate = max(1, m.SharedIntermediate)
	return d
}

// ExpertBytesPerGPU is the routed experts' weights one GPU holds when
// they are spread over gpus GPUs.
func (m MoE) ExpertBytesPerGPU(s model.Shape, gpus int) float64 {
	perGPU := float64(m.Experts) / float64(max(1, gpus))
	return perGPU * m.ExpertParams(s.Hidden) * float64(s.Layers) * float64(s.DTypeBytes)
}

// HardwareSpec states a GPU inline (model.Hardware's fields).
type HardwareSpec struct {
	Name            string  `yaml:"name"`
	PeakTFLOPS      float64 `yaml:"peak_tflops"`
	MemBandwidthGBs float64 `yaml:"mem_bandwidth_gbs"`
	MemGB           float64 `yaml:"mem_gb"`
	InterconnectGBs float64 `yaml:"interconnect_gbs"`
}

// Hardware is the spec as a model.Hardware.
func (h HardwareSpec) Hardware() model.Hardware {
	return model.Hardware{Name: h.Name, PeakTFLOPS: h.PeakTFLOPS, MemBandwidthGBs: h.MemBandwidthGBs, MemGB: h.MemGB,
		InterconnectGBs: h.InterconnectGBs}
}

// ModelSpec states a model shape inline (model.Shape's fields), with its
// MoE layout for a mixture of experts.
type ModelSpec struct {
	Name           string `yaml:"name"`
	Layers         int    `yaml:"layers"`
	Hidden         int    `yaml:"hidden"`
	Heads          int    `yaml:"heads"`
	KVHeads        int    `yaml:"kv_heads"`
	HeadDim        int    `yaml:"head_dim"`
	Intermediate   int    `yaml:"intermediate"`
	Vocab          int    `yaml:"vocab"`
	DTypeBytes     int    `yaml:"dtype_bytes"`
	KVDTypeBytes   int    `yaml:"kv_dtype_bytes"`
	TP             int    `yaml:"tp"`
	TiedEmbeddings bool   `yaml:"tied_embeddings"`
	QKVBias        bool   `yaml:"qkv_bias"`
	MoE            *MoE   `yaml:"moe"`
}

// Shape is the spec as a model.Shape (for an MoE model, its intermediate
// is whatever config.json says and goes unused: DenseShape prices it).
func (m ModelSpec) Shape() model.Shape {
	s := model.Shape{Name: m.Name, Layers: m.Layers, Hidden: m.Hidden, Heads: m.Heads, KVHeads: m.KVHeads, HeadDim: m.HeadDim,
		Intermediate: m.Intermediate, Vocab: m.Vocab, DTypeBytes: m.DTypeBytes, KVDTypeBytes: m.KVDTypeBytes, TP: m.TP,
		TiedEmbeddings: m.TiedEmbeddings, QKVBias: m.QKVBias}
	if s.DTypeBytes == 0 {
		s.DTypeBytes = 2
	}
	if s.Intermediate == 0 && m.MoE != nil {
		s.Intermediate = max(1, m.MoE.SharedIntermediate)
	}
	return s
}

// Link is a resolved link: bytes per second each way and one-way latency.
type Link struct {
	BytesPerSec float64
	LatencyNs   float64
}

// TransferNs is the time b bytes take over the link.
func (l Link) TransferNs(b float64) float64 { return l.LatencyNs + b/l.BytesPerSec*1e9 }

// DefaultLink resolves a link spec: a stated bandwidth must be positive;
// one left out is the GPU's interconnect (model.Hardware.InterconnectGBs,
// the catalogue's GPU-to-GPU figure). field names the spec in errors.
func DefaultLink(spec LinkSpec, hw model.Hardware, field string) (Link, error) {
	if spec.LatencyUs < 0 {
		return Link{}, fmt.Errorf("%s.latency_us is %g: use 0 or more", field, spec.LatencyUs)
	}
	bw := hw.InterconnectGBs
	switch {
	case spec.BandwidthGBs != nil && !(*spec.BandwidthGBs > 0):
		return Link{}, fmt.Errorf("%s.bandwidth_gbs is %g: a link needs a positive bandwidth (GB/s per direction)", field, *spec.BandwidthGBs)
	case spec.BandwidthGBs != nil:
		bw = *spec.BandwidthGBs
	case !(bw > 0):
		return Link{}, fmt.Errorf("%s.bandwidth_gbs is not set and hardware %s has no interconnect bandwidth: state the link's bandwidth_gbs", field, hw.Name)
	}
	return Link{BytesPerSec: bw * 1e9, LatencyNs: spec.LatencyUs * 1e3}, nil
}

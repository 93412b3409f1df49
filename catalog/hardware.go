package catalog

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Hardware is what the roofline prior and the memory model know about one
// accelerator: its datasheet figures and the achievable fractions of them
// real kernels reach (Roofline). It is read from a spec file (YAML, the
// same field names as its JSON; see ParseHardwareSpec and
// docs/catalog.md); the built-in catalogue holds one per GPU.
type Hardware struct {
	Name    string   `json:"name" yaml:"name"`
	Vendor  string   `json:"vendor,omitempty" yaml:"vendor"`
	Aliases []string `json:"aliases,omitempty" yaml:"aliases"`
	// MemGB is the device memory as marketed ("80 GB"). The driver reports
	// about that many GiB (an H100 shows 81,559 MiB, an H200 143,771 MiB),
	// so the capacity the memory model uses is MemGB·2^30 bytes (MemBytes).
	MemGB float64 `json:"memory_gb" yaml:"memory_gb"`
	// MemBandwidthGBs is the memory (HBM or GDDR) bandwidth in GB/s
	// (1e9 bytes/s).
	MemBandwidthGBs float64 `json:"memory_bandwidth_gbs" yaml:"memory_bandwidth_gbs"`
	// TFLOPS holds the dense peaks per data type.
	TFLOPS Peaks `json:"tflops" yaml:"tflops"`
	// SMs is the streaming multiprocessor count (compute units on AMD).
	SMs int `json:"sms" yaml:"sms"`
	// AttnProgramsPerSM is how many decode attention programs (one per
	// request and KV head) an SM runs at once, measured: the wave of the
	// split regime (SplitKVLength) is SMs times it. 0 where unmeasured.
	AttnProgramsPerSM int `json:"attn_programs_per_sm,omitempty" yaml:"attn_programs_per_sm"`
	// AttnKVTileTokens is the KV tile (tokens a program walks per
	// iteration) of the kernel AttnProgramsPerSM was measured with: a
	// kernel of T-token tiles keeps T/AttnKVTileTokens as many KV bytes in
	// flight per program, so that AttnProgramsPerSM × AttnKVTileTokens / T
	// of its programs an SM saturate the memory as many (fpm.DecodeWalk's
	// wave). 0: not recorded, the figure taken at any tile.
	AttnKVTileTokens int `json:"attn_kv_tile_tokens,omitempty" yaml:"attn_kv_tile_tokens"`
	// BoostClockMHz is the maximum boost (AMD: peak engine) clock; 0 where
	// the vendor publishes none. Nothing prices with it: it identifies the part.
	BoostClockMHz float64 `json:"boost_clock_mhz,omitempty" yaml:"boost_clock_mhz"`
	// Interconnects are the device's links: a group of GPUs (a
	// tensor-parallel group, an expert-parallel instance) talks over the
	// fastest GPU-to-GPU link whose domain holds it, and beyond the
	// largest domain over the network between nodes (Layout).
	Interconnects []Interconnect `json:"interconnects" yaml:"interconnects"`
	// Roofline holds the achievable-fraction curves and overheads the
	// roofline prior prices steps with on this device.
	Roofline RooflineParams `json:"roofline" yaml:"roofline"`
	// Sources cite where the figures come from.
	Sources []Source `json:"sources,omitempty" yaml:"sources"`
	// Notes are caveats about the entry (set by the file or by the
	// catalogue, e.g. when a user file shadows a built-in one).
	Notes []string `json:"notes,omitempty" yaml:"notes"`
	// File is where the entry was read ("builtin:hardware/h200-sxm.yaml"
	// or a path); not part of a spec file.
	File string `json:"file,omitempty" yaml:"-"`
}

// Peaks are dense peak rates (no 2:4 sparsity) per data type, in TFLOPS
// (TOPS for int8): fp32 on the vector units, the others on tensor (matrix)
// cores with fp32 accumulation, which inference GEMMs use. FP8 and INT8
// are 0 where the chip has no such unit (fp8 on an A100).
type Peaks struct {
	FP32 float64 `json:"fp32" yaml:"fp32"`
	BF16 float64 `json:"bf16" yaml:"bf16"`
	FP16 float64 `json:"fp16" yaml:"fp16"`
	FP8  float64 `json:"fp8,omitempty" yaml:"fp8"`
	INT8 float64 `json:"int8,omitempty" yaml:"int8"`
	// FP4 is the dense fp4 (nvfp4/mxfp4 block-scaled) tensor-core peak,
	// 0 where the chip has none (every pre-Blackwell chip).
	FP4 float64 `json:"fp4,omitempty" yaml:"fp4"`
}

// Interconnect kinds.
const (
	LinkNVLink = "nvlink" // GPU-to-GPU NVLink (direct, bridge or NVSwitch)
	LinkXGMI   = "xgmi"   // AMD Infinity Fabric between GPUs
	LinkPCIe   = "pcie"   // the host bus (GPU-to-GPU traffic without a faster link)
	LinkC2C    = "c2c"    // chip-to-CPU (NVLink-C2C): not a GPU-to-GPU path
	// LinkNetwork is the scale-out link between nodes: the NIC each GPU
	// has on the InfiniBand or RoCE Ethernet fabric.
	LinkNetwork = "network"
)

// Interconnect is one kind of link of a device.
type Interconnect struct {
	Kind string `json:"kind" yaml:"kind"`
	// GBsPerDirection is the device's aggregate bandwidth over this kind
	// of link, per direction, in GB/s (datasheets quote NVLink
	// bidirectionally: 900 GB/s is 450 per direction).
	GBsPerDirection float64 `json:"gbs_per_direction" yaml:"gbs_per_direction"`
	// LatencyUs is the latency of one small all-reduce over the link, in
	// µs: the fixed term of the roofline's all-reduce cost. On the
	// network it is one hop: one small message from a GPU to a GPU of
	// another node.
	LatencyUs float64 `json:"latency_us" yaml:"latency_us"`
	// GPUs is how many GPUs a GPU-to-GPU link (nvlink, xgmi, pcie) joins:
	// its scale-up domain (8 on an HGX board, 72 in an NVL72 rack, 2 for
	// an NVLink bridge, a host's GPUs over PCIe). The network joins
	// nodes, and c2c no GPUs: 0 for both.
	GPUs int `json:"gpus,omitempty" yaml:"gpus"`
}

// JoinsGPUs reports a link that joins GPUs within a node (nvlink, xgmi,
// pcie).
func (l Interconnect) JoinsGPUs() bool {
	return l.Kind == LinkNVLink || l.Kind == LinkXGMI || l.Kind == LinkPCIe
}

// Source cites a figure: a URL (a datasheet, a whitepaper) or a note (a
// documented estimate), for Fields (dotted spec keys; none: the whole
// file).
type Source struct {
	URL    string   `json:"url,omitempty" yaml:"url"`
	Note   string   `json:"note,omitempty" yaml:"note"`
	Fields []string `json:"fields,omitempty" yaml:"fields"`
}

// MemBytes is the device memory capacity in bytes (MemGB GiB).
func (h Hardware) MemBytes() float64 { return h.MemGB * (1 << 30) }

// PeakFLOPs is the dense bf16 peak in FLOP/s.
func (h Hardware) PeakFLOPs() float64 { return h.TFLOPS.BF16 * 1e12 }

// BandwidthBytes is the memory bandwidth in bytes/s.
func (h Hardware) BandwidthBytes() float64 { return h.MemBandwidthGBs * 1e9 }

// PeakTFLOPSFor is the dense peak for a canonical dtype (0 where the chip
// has none).
func (h Hardware) PeakTFLOPSFor(dtype string) float64 {
	switch dtype {
	case DTypeFP32:
		return h.TFLOPS.FP32
	case DTypeBF16:
		return h.TFLOPS.BF16
	case DTypeFP16:
		return h.TFLOPS.FP16
	case DTypeFP8:
		return h.TFLOPS.FP8
	case DTypeNVFP4:
		return h.TFLOPS.FP4
	}
	return 0
}

// TPLink is the fastest GPU-to-GPU link (NVLink, xGMI or PCIe) whatever
// its domain; ok is false when the device lists none. A group of GPUs
// talks over the link Layout picks for its size.
func (h Hardware) TPLink() (link Interconnect, ok bool) {
	return h.fastest(func(l Interconnect) bool { return l.JoinsGPUs() })
}

// fastest is the fastest link that keep accepts (the first of equals).
func (h Hardware) fastest(keep func(Interconnect) bool) (link Interconnect, ok bool) {
	for _, l := range h.Interconnects {
		if keep(l) && l.GBsPerDirection > link.GBsPerDirection {
			link, ok = l, true
		}
	}
	return link, ok
}

// Layout is how a group of GPUs of one kind (a tensor-parallel group, an
// expert-parallel instance) sits on nodes: Nodes nodes of GPUsPerNode
// GPUs joined within a node by Link and between nodes by Network (the
// zero Interconnect on one node).
type Layout struct {
	GPUs, Nodes, GPUsPerNode int
	Link, Network            Interconnect
}

// MultiNode reports a group that spans nodes.
func (l Layout) MultiNode() bool { return l.Nodes > 1 }

// String is the layout as a manifest note says it: "2 nodes × 8 GPUs
// (nvlink 900 GB/s within a node, network 50 GB/s per GPU between nodes)".
func (l Layout) String() string {
	switch {
	case l.GPUs <= 1:
		return "one GPU"
	case !l.MultiNode():
		return fmt.Sprintf("one node of %d GPUs (%s %g GB/s)", l.GPUs, l.Link.Kind, l.Link.GBsPerDirection)
	}
	return fmt.Sprintf("%d nodes × %d GPUs (%s %g GB/s within a node, network %g GB/s per GPU between nodes)",
		l.Nodes, l.GPUsPerNode, l.Link.Kind, l.Link.GBsPerDirection, l.Network.GBsPerDirection)
}

// NodeGPUs is the size of the device's largest scale-up domain: the most
// GPUs one node holds (0 when it lists no GPU-to-GPU link).
func (h Hardware) NodeGPUs() int {
	n := 0
	for _, l := range h.Interconnects {
		if l.JoinsGPUs() {
			n = max(n, l.GPUs)
		}
	}
	return n
}

// Layout places a group of gpus GPUs: on one node over the fastest
// GPU-to-GPU link whose domain holds it; larger, on whole nodes of the
// largest domain joined by the network link. A group that does not fill
// whole nodes, or that outgrows a node of a device without a network
// link, is refused naming the sizes that work.
func (h Hardware) Layout(gpus int) (Layout, error) {
	gpus = max(gpus, 1)
	if link, ok := h.fastest(func(l Interconnect) bool { return l.JoinsGPUs() && l.GPUs >= gpus }); ok || gpus == 1 {
		return Layout{GPUs: gpus, Nodes: 1, GPUsPerNode: gpus, Link: link}, nil
	}
	d := h.NodeGPUs()
	if d == 0 {
		return Layout{}, fmt.Errorf("%d GPUs need a GPU-to-GPU link and %s lists none (interconnects: nvlink, xgmi or pcie)", gpus, h.Name)
	}
	node, _ := h.fastest(func(l Interconnect) bool { return l.JoinsGPUs() && l.GPUs == d })
	net, ok := h.fastest(func(l Interconnect) bool { return l.Kind == LinkNetwork })
	switch {
	case !ok:
		return Layout{}, fmt.Errorf("%d GPUs span more than one node of %d %s GPUs (one %s domain), and %s lists no network link between nodes (a {kind: network, gbs_per_direction, latency_us} interconnect in its spec)",
			gpus, d, h.Name, node.Kind, h.Name)
	case gpus%d != 0:
		return Layout{}, fmt.Errorf("%d GPUs do not fill whole nodes of %d %s GPUs (one %s domain each): a group beyond one node is a multiple of %d",
			gpus, d, h.Name, node.Kind, d)
	}
	return Layout{GPUs: gpus, Nodes: gpus / d, GPUsPerNode: d, Link: node, Network: net}, nil
}

// Validate reports a hardware description that cannot price anything,
// naming the spec field at fault.
func (h Hardware) Validate() error {
	if err := h.validate(); err != nil {
		name := h.Name
		if name == "" {
			name = "(unnamed)"
		}
		return fmt.Errorf("model: hardware %s: %w", name, err)
	}
	return nil
}

func (h Hardware) validate() error {
	if strings.TrimSpace(h.Name) == "" {
		return errors.New("name: missing")
	}
	for _, f := range []struct {
		key  string
		v    float64
		hint string
	}{
		{"memory_gb", h.MemGB, "the device memory in GB as marketed"},
		{"memory_bandwidth_gbs", h.MemBandwidthGBs, "the memory bandwidth in GB/s"},
		{"tflops.fp32", h.TFLOPS.FP32, "the dense fp32 peak in TFLOPS"},
		{"tflops.bf16", h.TFLOPS.BF16, "the dense bf16 tensor peak in TFLOPS"},
		{"tflops.fp16", h.TFLOPS.FP16, "the dense fp16 tensor peak in TFLOPS"},
		{"sms", float64(h.SMs), "the SM (or CU) count"},
	} {
		if err := positive(f.key, f.v, f.hint); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"tflops.fp8", h.TFLOPS.FP8}, {"tflops.int8", h.TFLOPS.INT8}, {"boost_clock_mhz", h.BoostClockMHz}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("%s: %v: must be > 0, or absent where the chip has none (or its vendor publishes none)", f.key, f.v)
		}
	}
	if h.AttnProgramsPerSM < 0 {
		return fmt.Errorf("attn_programs_per_sm: %d: must be > 0, or absent where unmeasured", h.AttnProgramsPerSM)
	}
	if h.AttnKVTileTokens < 0 || (h.AttnKVTileTokens > 0 && h.AttnProgramsPerSM == 0) {
		return fmt.Errorf("attn_kv_tile_tokens: %d: must be > 0 beside attn_programs_per_sm, or absent", h.AttnKVTileTokens)
	}
	if len(h.Interconnects) == 0 {
		return errors.New("interconnects: missing: list at least the host link (kind: pcie)")
	}
	for i, l := range h.Interconnects {
		switch l.Kind {
		case LinkNVLink, LinkXGMI, LinkPCIe, LinkC2C, LinkNetwork:
		default:
			return fmt.Errorf("interconnects[%d].kind: %q: use nvlink, xgmi, pcie, c2c or network", i, l.Kind)
		}
		if err := positive(fmt.Sprintf("interconnects[%d].gbs_per_direction", i), l.GBsPerDirection, "the bandwidth per direction in GB/s"); err != nil {
			return err
		}
		if err := positive(fmt.Sprintf("interconnects[%d].latency_us", i), l.LatencyUs, "the small all-reduce latency in µs"); err != nil {
			return err
		}
		switch {
		case l.JoinsGPUs() && l.GPUs < 1:
			got := "missing"
			if l.GPUs < 0 {
				got = strconv.Itoa(l.GPUs)
			}
			return fmt.Errorf("interconnects[%d].gpus: %s: give the GPUs the %s link joins (8 on an HGX board, 72 in an NVL72 rack, 2 for an NVLink bridge, a host's GPUs over PCIe)", i, got, l.Kind)
		case !l.JoinsGPUs() && l.GPUs != 0:
			return fmt.Errorf("interconnects[%d].gpus: %d: a %s link joins no GPUs of one node: leave gpus out", i, l.GPUs, l.Kind)
		}
	}
	for i, s := range h.Sources {
		if s.URL == "" && s.Note == "" {
			return fmt.Errorf("sources[%d]: give a url or a note", i)
		}
	}
	return h.Roofline.Validate()
}

// positive checks a required figure: absent (0), negative or not finite is
// an error naming the key and what to give.
func positive(key string, v float64, hint string) error {
	switch {
	case v == 0:
		return fmt.Errorf("%s: missing or zero: give %s", key, hint)
	case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
		return fmt.Errorf("%s: %v: must be a positive number (%s)", key, v, hint)
	}
	return nil
}

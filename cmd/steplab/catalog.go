package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/steplab/steplab/catalog"
)

func init() { register(newCatalogCmd) }

func newCatalogCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "List the GPUs and models steplab knows, or show one resolved entry",
		Long: `catalog lists the hardware specs and model shapes steplab prices steps with:
the built-in catalogue plus the directories listed in STEPLAB_CATALOG (each with
hardware/*.yaml spec files and models/<name>/config.json Hugging Face configs).
A scenario's hardware: and model: take any name these commands resolve, or a file
path. docs/catalog.md describes the formats and the name-resolution rule.

  catalog hardware      every GPU: memory, bandwidth, dense bf16/fp8 peaks, TP link
  catalog models        every model: layers, hidden, parameters (total and active),
                        KV bytes per token, experts/top-k
  catalog architectures every config.json architecture steplab reads: the layer
                        kinds it prices and what it approximates
  catalog show REF      one entry, resolved from a name in any spelling or a file

Examples:
  steplab catalog hardware
  steplab catalog models --json
  steplab catalog architectures
  steplab catalog show "NVIDIA GeForce RTX 4090"
  steplab catalog show H100_80GB_HBM3 --json
  steplab catalog show Qwen/Qwen3-30B-A3B-Instruct-2507
  steplab catalog show DeepSeek-V3-TP8`,
	}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the entries as JSON")
	cmd.AddCommand(&cobra.Command{
		Use:   "hardware",
		Short: "List the catalogue's GPUs with their key figures",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := catalogOrExit()
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), c.Hardware())
			}
			return writeHardwareTable(cmd.OutOrStdout(), c)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "models",
		Short: "List the catalogue's models with their key figures",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := catalogOrExit()
			if err != nil {
				return err
			}
			ms := c.Models()
			if asJSON {
				out := make([]modelEntry, len(ms))
				for i, s := range ms {
					out[i] = newModelEntry(s)
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return writeModelTable(cmd.OutOrStdout(), c)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "architectures",
		Short: "List the config.json architectures steplab reads, with the layer kinds priced and approximated",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			as := catalog.Architectures()
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), as)
			}
			return writeArchitectures(cmd.OutOrStdout(), as)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Print one resolved entry: a GPU or a model, by name or file",
		Long: `show resolves REF as a GPU and as a model (a name in any spelling, a spec
file *.yaml, a config.json or its directory) and prints every entry it names,
with the notes on what was derived or assumed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := catalogOrExit()
			if err != nil {
				return err
			}
			return showCatalogEntry(cmd.OutOrStdout(), c, args[0], asJSON)
		},
	})
	return group(cmd)
}

func catalogOrExit() (*catalog.Catalog, error) {
	c, err := catalog.DefaultCatalog()
	if err != nil {
		return nil, &exitError{code: 2, msg: "catalog: " + err.Error()}
	}
	return c, nil
}

// modelEntry is a shape with the figures derived from it (at its TP).
type modelEntry struct {
	catalog.Shape
	Params          int64 `json:"params"`
	ActiveParams    int64 `json:"active_params"`
	WeightBytes     int64 `json:"weight_bytes_per_gpu"`
	KVBytesPerToken int64 `json:"kv_bytes_per_token_per_gpu"`
}

func newModelEntry(s catalog.Shape) modelEntry {
	return modelEntry{Shape: s, Params: s.ParamCount(), ActiveParams: s.ActiveParamCount(),
		WeightBytes: s.WeightBytes(), KVBytesPerToken: s.KVBytesPerToken()}
}

// showCatalogEntry prints what ref resolves to: a GPU, a model or both.
func showCatalogEntry(w io.Writer, c *catalog.Catalog, ref string, asJSON bool) error {
	hw, hwErr := c.LookupHardware(ref)
	sh, shErr := c.LookupModel(ref)
	if hwErr != nil && shErr != nil {
		return &exitError{code: 2, msg: "catalog show: " + errors.Join(hwErr, shErr).Error()}
	}
	if asJSON {
		out := struct {
			Hardware *catalog.Hardware `json:"hardware,omitempty"`
			Model    *modelEntry       `json:"model,omitempty"`
		}{}
		if hwErr == nil {
			out.Hardware = &hw
		}
		if shErr == nil {
			e := newModelEntry(sh)
			out.Model = &e
		}
		return writeJSON(w, out)
	}
	if hwErr == nil {
		writeHardware(w, hw)
	}
	if shErr == nil {
		if hwErr == nil {
			fmt.Fprintln(w)
		}
		writeModel(w, sh)
	}
	return nil
}

func writeHardwareTable(w io.Writer, c *catalog.Catalog) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMEMORY\tBANDWIDTH\tBF16\tFP8\tTP LINK\tNODE\tNETWORK\tROOFLINE")
	for _, h := range c.Hardware() {
		fp8 := "-"
		if h.TFLOPS.FP8 > 0 {
			fp8 = fmt.Sprintf("%g", h.TFLOPS.FP8)
		}
		link := "-"
		if l, ok := h.TPLink(); ok {
			link = fmt.Sprintf("%s %g GB/s", l.Kind, l.GBsPerDirection)
		}
		node, net := "-", "-"
		if n := h.NodeGPUs(); n > 0 {
			node = fmt.Sprintf("%d GPUs", n)
		}
		if l, err := h.Layout(2 * h.NodeGPUs()); err == nil && l.MultiNode() {
			net = fmt.Sprintf("%g GB/s", l.Network.GBsPerDirection)
		}
		fmt.Fprintf(tw, "%s\t%g GB\t%g GB/s\t%g\t%s\t%s\t%s\t%s\t%s\n", h.Name, h.MemGB, h.MemBandwidthGBs, h.TFLOPS.BF16, fp8, link, node, net, basisWord(h.Roofline.Basis))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nTFLOPS are dense (no sparsity); links per direction; NODE is the largest scale-up domain, NETWORK the link per GPU between nodes. steplab catalog show NAME for one entry.")
	return writeCatalogNotes(w, c)
}

func basisWord(basis string) string {
	if basis == "generic" {
		return "generic"
	}
	return "measured"
}

func writeModelTable(w io.Writer, c *catalog.Catalog) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tARCHITECTURE\tLAYERS\tHIDDEN\tPARAMS\tACTIVE\tKV/TOKEN\tEXPERTS\tWEIGHTS")
	for _, s := range c.Models() {
		experts := "-"
		if s.MoE.Experts > 0 {
			experts = fmt.Sprintf("%d top-%d", s.MoE.Experts, s.MoE.TopK)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Architecture, s.Layers, s.Hidden,
			billions(s.ParamCount()), billions(s.ActiveParamCount()), kib(s.KVBytesPerToken()), experts, weightDTypes(s))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nKV/TOKEN at TP=1 in the KV dtype; append -TP<n> to a name for tensor parallelism.")
	return writeCatalogNotes(w, c)
}

// writeArchitectures prints each architecture with its layer kinds and,
// indented, its approximations.
func writeArchitectures(w io.Writer, as []catalog.ArchitectureSupport) error {
	for _, a := range as {
		if _, err := fmt.Fprintf(w, "%s\n  layers: %s\n", a.Architecture, a.Layers); err != nil {
			return err
		}
		if a.Approximations != "" {
			if _, err := fmt.Fprintf(w, "  approximated: %s\n", a.Approximations); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintln(w, "\nA multimodal wrapper is read through its text_config's architecture; docs/catalog.md#architectures.")
	return err
}

func writeCatalogNotes(w io.Writer, c *catalog.Catalog) error {
	for _, n := range c.Notes() {
		if _, err := fmt.Fprintln(w, "note:", n); err != nil {
			return err
		}
	}
	return nil
}

// billions writes a parameter count as 8.03B (or 0.1M for a toy).
func billions(n int64) string {
	if n < 1e7 {
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2fB", float64(n)/1e9)
}

func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }

// weightDTypes is the weights' dtype for the models table: "bf16", or
// "fp8, bf16 act." when the weights (or the experts) differ from the
// activations.
func weightDTypes(s catalog.Shape) string {
	w := s.WeightDType
	if s.MoE.DType != "" {
		w = "experts " + s.MoE.DType
	}
	if w == "" {
		return s.DType
	}
	return fmt.Sprintf("%s, %s act.", w, s.DType)
}

func writeHardware(w io.Writer, h catalog.Hardware) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("hardware", "%s", h.Name)
	row("file", "%s", h.File)
	if len(h.Aliases) > 0 {
		row("aliases", "%s", strings.Join(h.Aliases, "; "))
	}
	row("memory", "%g GB (%.0f GiB usable by the memory model)", h.MemGB, h.MemBytes()/(1<<30))
	row("bandwidth", "%g GB/s", h.MemBandwidthGBs)
	p := h.TFLOPS
	row("dense TFLOPS", "fp32 %g, bf16 %g, fp16 %g, fp8 %s, fp4 %s, int8 %s", p.FP32, p.BF16, p.FP16, orNone(p.FP8), orNone(p.FP4), orNone(p.INT8))
	clock := "not published"
	if h.BoostClockMHz > 0 {
		clock = fmt.Sprintf("%g MHz", h.BoostClockMHz)
	}
	row("SMs / clock", "%d / %s", h.SMs, clock)
	for _, l := range h.Interconnects {
		switch {
		case l.Kind == catalog.LinkNetwork:
			row("link", "%s %g GB/s per GPU and direction between nodes, %g µs a hop", l.Kind, l.GBsPerDirection, l.LatencyUs)
		case l.GPUs > 0:
			row("link", "%s %g GB/s per direction, %g µs, joins %d GPUs", l.Kind, l.GBsPerDirection, l.LatencyUs, l.GPUs)
		default:
			row("link", "%s %g GB/s per direction, %g µs", l.Kind, l.GBsPerDirection, l.LatencyUs)
		}
	}
	r := h.Roofline
	row("roofline", "%s", r.Basis)
	row("  efficiency", "gemm %s, attention %s, weight bw %s, kv bw %s, all-reduce %s",
		r.GEMMEff, r.AttnEff, r.WeightBWEff, r.KVBWEff, r.AllReduceEff)
	row("  overheads", "%g µs per step, %g µs per layer", r.FixedNs/1e3, r.PerLayerNs/1e3)
	for _, s := range h.Sources {
		src := s.URL
		if s.Note != "" {
			src = strings.TrimSpace(src + " " + s.Note)
		}
		if len(s.Fields) > 0 {
			src += " [" + strings.Join(s.Fields, ", ") + "]"
		}
		row("source", "%s", src)
	}
	for _, n := range h.Notes {
		row("note", "%s", n)
	}
	tw.Flush()
}

func orNone(v float64) string {
	if v == 0 {
		return "none"
	}
	return fmt.Sprintf("%g", v)
}

func writeModel(w io.Writer, s catalog.Shape) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("model", "%s", s.Name)
	row("file", "%s", s.File)
	row("architecture", "%s", s.Architecture)
	row("layers / hidden", "%d / %d", s.Layers, s.Hidden)
	row("attention", "%d heads, %d KV heads, head dim %d", s.Heads, s.KVHeads, s.HeadDim)
	if m := s.MLA; m.KVLoraRank > 0 {
		row("  MLA", "kv_lora_rank %d, q_lora_rank %d, qk nope/rope %d/%d, v %d", m.KVLoraRank, m.QLoraRank, m.QKNopeHeadDim, m.QKRopeHeadDim, m.VHeadDim)
	}
	if s.SlidingLayers > 0 {
		row("  sliding window", "%d of %d layers over %d tokens", s.SlidingLayers, s.Layers, s.SlidingWindow)
	}
	row("MLP", "intermediate %d", s.Intermediate)
	if m := s.MoE; m.Experts > 0 {
		e := fmt.Sprintf("%d routed (top-%d) of width %d", m.Experts, m.TopK, m.ExpertIntermediate)
		if m.SharedExperts > 0 {
			e += fmt.Sprintf(", %d shared of width %d", m.SharedExperts, m.SharedIntermediate)
		}
		if m.DenseLayers > 0 {
			e += fmt.Sprintf(", %d dense layers", m.DenseLayers)
		}
		row("  experts", "%s", e)
	}
	row("vocab", "%d (tied embeddings: %v)", s.Vocab, s.TiedEmbeddings)
	dt := fmt.Sprintf("activations %s, weights %s", s.DType, orDefault(s.WeightDType, s.DType))
	if s.MoE.DType != "" {
		dt += ", experts " + s.MoE.DType
	}
	row("dtypes", "%s, KV cache %s", dt, orDefault(s.KVDType, s.DType))
	row("tensor parallel", "%d", max(1, s.TP))
	row("parameters", "%s total, %s active per token", billions(s.ParamCount()), billions(s.ActiveParamCount()))
	row("per GPU", "%.2f GB of weights, %s of KV per token", float64(s.WeightBytes())/1e9, kib(s.KVBytesPerToken()))
	for _, n := range s.Notes {
		row("note", "%s", n)
	}
	tw.Flush()
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

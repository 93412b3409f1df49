// Package pricing is the one place a spec becomes models: an FPM spec
// ("roofline", an ops spec, or the path of a model artifact of any form)
// and a host spec, for a GPU and a model shape, become the forward-pass,
// payload and host-overhead models that price a step. Every command that
// takes an FPM spec (simulate, replay, eval, check and its bounds files,
// calibrate, what-if) resolves it here, so they accept the same specs and
// refuse the same ones with the same message. It dispatches the forms
// explicitly: fpm builds linear, grid and recipe artifacts, fpm/opdb the
// ops prior and ops artifacts (which read a kernel database).
package pricing

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/fpm/opdb"
)

// FPMRoofline is the forward-pass model spec of the prior priced from the
// hardware and model shape alone.
const FPMRoofline = "roofline"

// FPMPrior is the forward-pass model spec of a run's prior: the
// measured-operations prior (ops) where a kernel database is shipped for
// the run's GPU and prices its model, else the roofline. steplab calibrate
// starts from it.
const FPMPrior = "prior"

// Spec names what prices an engine's steps: the GPU and the model it
// runs (already looked up in the catalogue), a forward-pass model spec and
// a host-overhead model spec.
type Spec struct {
	Hardware catalog.Hardware
	Shape    catalog.Shape
	// FPM is "" or "roofline" (the roofline prior), an ops spec (the
	// measured-operations prior: "ops", "ops:NAME" or "ops:DIR"), "prior"
	// (FPMPrior: ops where the GPU has a database, else the roofline) or
	// the path of a model artifact (steplab fit, steplab calibrate).
	FPM string
	// Host is "" (the artifact's params.host when the FPM artifact carries
	// one, else the default prior) or the path of a host-overhead model:
	// a fpm.HostModel in JSON, one wrapped under "model", or a model
	// artifact carrying params.host.
	Host string
	// EngineVersion is the serving framework's version the run had ("":
	// not known); an ops prior takes the database measured nearest it.
	EngineVersion string
	// AttentionBackend is the engine's attention backend ("": not known,
	// the database's kernels). A backend whose decode kernel does not
	// split a request's KV walk (fpm.UnsplitDecode) prices an ops prior's
	// ragged decode batches by their longest request.
	AttentionBackend string
	// CUDAGraphSizes are the sizes the engine captures CUDA graphs at
	// (rows: decode requests, or tokens of a step with prefill work); the
	// ops prior runs a larger step eagerly. Empty: not known.
	CUDAGraphSizes []int
}

// Price resolves a pricing spec: the one place an FPM spec and a host spec
// become models. A hardware left zero is accepted only when nothing needs
// it (a fitted artifact prices the steps).
func Price(spec Spec) (*fpm.Models, error) {
	p := &fpm.Models{HW: spec.Hardware, Shape: spec.Shape, Payload: fpm.DefaultPayloadModel(), Host: fpm.DefaultHostModel(),
		HostName: spec.Host}
	switch {
	case spec.FPM == FPMPrior:
		if err := prior(p, spec.EngineVersion); err != nil {
			return nil, err
		}
	case spec.FPM == "" || spec.FPM == FPMRoofline:
		if err := roofline(p); err != nil {
			return nil, err
		}
	case opdb.IsSpec(spec.FPM):
		if err := ops(p, spec.FPM, spec.EngineVersion); err != nil {
			return nil, err
		}
	default:
		f, a, err := Load(spec.FPM)
		if err != nil {
			return nil, err
		}
		p.FPM, p.FPMName, p.Artifact = f, spec.FPM, a
		for _, n := range fpm.ProvenanceNotes(spec.FPM, a, catalog.RunOf(spec.Hardware, spec.Shape)) {
			slog.Warn("model fitted elsewhere", "note", n)
			p.Notes = append(p.Notes, n)
		}
	}
	if o, ok := p.FPM.(*fpm.Ops); ok && len(spec.CUDAGraphSizes) > 0 {
		p.FPM = o.WithGraphs(spec.CUDAGraphSizes)
	}
	if o, ok := p.FPM.(*fpm.Ops); ok && p.Artifact == nil && fpm.UnsplitDecode(spec.AttentionBackend) {
		if err := unsplitDecode(p, o, spec.AttentionBackend); err != nil {
			return nil, err
		}
	}
	switch {
	case spec.Host != "":
		h, err := LoadHostModel(spec.Host)
		if err != nil {
			return nil, err
		}
		p.Host = h
	case p.Artifact != nil:
		h, ok, err := artifactHost(p.Artifact)
		if err != nil {
			return nil, fmt.Errorf("%s: params.host: %w", spec.FPM, err)
		}
		if ok {
			p.Host = h
			p.Notes = append(p.Notes, fmt.Sprintf("host model from %s (params.host)", filepath.Base(spec.FPM)))
		}
		p.HostPrior = !ok
	default:
		p.HostPrior = true
	}
	return p, nil
}

// roofline prices with the roofline prior of p's hardware and shape.
func roofline(p *fpm.Models) error {
	r := fpm.NewRoofline(p.HW, p.Shape)
	if err := r.Validate(); err != nil {
		return fmt.Errorf("roofline prior: %w", err)
	}
	p.FPM, p.FPMName = r.Prepare(), FPMRoofline
	if l, _ := p.HW.Layout(p.Shape.TPDegree()); l.MultiNode() {
		p.Notes = append(p.Notes, fmt.Sprintf("roofline: tensor_parallel=%d spans %s: its all-reduces are priced hierarchically, within a node over %s and between nodes over the network; %s's network link (%g GB/s per GPU, %g µs a hop) is a catalogue figure, not measured",
			l.GPUs, l, l.Link.Kind, p.HW.Name, l.Network.GBsPerDirection, l.Network.LatencyUs))
	}
	return nil
}

func ops(p *fpm.Models, spec, version string) error {
	o, notes, err := opdb.Prior(spec, opdb.Query{Hardware: p.HW, Shape: p.Shape, Version: version})
	if err != nil {
		return err
	}
	p.FPM, p.FPMName, p.Notes = o, spec, append(p.Notes, notes...)
	return nil
}

// unsplitDecode gives p's ops prior o, whose database's decode kernel splits
// the KV walk the engine's kernel that does not: the wave of programs
// the GPU runs at once, the catalogue's SMs × attention programs per SM
// (one per SM where the catalogue measured none).
func unsplitDecode(p *fpm.Models, o *fpm.Ops, backend string) error {
	if o.SplitsDecode() {
		return nil // the database measured such a kernel and gives its SM count
	}
	if p.HW.SMs <= 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("ops: the %s attention backend's ragged decode batches end with their longest request, but the catalogue gives no SM count for %s: priced at their mean context", backend, p.HW.Name))
		return nil
	}
	e := o.Engine()
	e.DecodeWave = float64(p.HW.SMs * max(1, p.HW.AttnProgramsPerSM))
	c, err := o.WithEngine(e)
	if err != nil {
		return err
	}
	p.FPM = c
	p.Notes = append(p.Notes, fmt.Sprintf("ops: the %s attention backend walks each request's KV cache on one program per KV head: a ragged decode batch is priced by its longest request over a wave of %g programs (%s: %d SMs × %d)",
		backend, e.DecodeWave, p.HW.Name, p.HW.SMs, max(1, p.HW.AttnProgramsPerSM)))
	return nil
}

// prior prices with FPMPrior: the ops prior where a database is shipped
// for the GPU and prices the shape, else the roofline, with a note saying
// which and why.
func prior(p *fpm.Models, version string) error {
	ok, err := opdb.Ships(p.HW, "vllm")
	switch {
	case err != nil:
		return err
	case !ok:
		p.Notes = append(p.Notes, fmt.Sprintf("prior: the roofline: no kernel database is shipped for %s", p.HW.Name))
		return roofline(p)
	}
	if err := ops(p, opdb.SpecPrefix, version); err != nil {
		p.Notes = append(p.Notes, fmt.Sprintf("prior: the roofline: the kernel database of %s does not price %s (%v)", p.HW.Name, p.Shape.Name, err))
		return roofline(p)
	}
	p.Notes = append(p.Notes, fmt.Sprintf("prior: ops, the kernels measured on %s", p.HW.Name))
	return nil
}

// BundledHostModel is the host model fitted from the H200 captures, the one
// to pass when no other was fitted for the machine.
const BundledHostModel = "datasets/h200/models/host.json"

// HostNote says which host model prices the host phases and, for the
// prior, how to pass a fitted one: the prior is not fitted to any machine,
// so the host phases' errors against a record are large.
func HostNote(p *fpm.Models) string {
	switch {
	case p.HostName != "":
		return "host model " + p.HostName
	case !p.HostPrior:
		return "host model from the FPM artifact's params.host"
	}
	return fmt.Sprintf("host model: the default prior, fitted to no machine, so host_prep_ns and schedule_ns errors are large; pass a fitted one with --host-model %s (fitted from the H200 captures) or your own", BundledHostModel)
}

// IsPrior reports whether an FPM spec names a prior priced from the
// hardware and shape alone (which both must then be known).
func IsPrior(spec string) bool {
	return spec == "" || spec == FPMRoofline || spec == FPMPrior || IsOps(spec)
}

// IsOps reports whether an FPM spec names the measured-operations prior
// (ops, ops:NAME, ops:DIR, ops:aic[:PATH]) rather than an artifact path.
func IsOps(spec string) bool { return opdb.IsSpec(spec) }

// Name names p's FPM in reports: a prior with its database or hardware
// and its shape, an artifact by its path.
func Name(p *fpm.Models) string {
	if o, ok := p.FPM.(*fpm.Ops); ok && p.Artifact == nil {
		return fmt.Sprintf("ops(%s, %s)", o.Database(), p.Shape.Name)
	}
	if IsPrior(p.FPMName) {
		return fmt.Sprintf("%s(%s, %s)", p.FPMName, p.HW.Name, p.Shape.Name)
	}
	return p.FPMName
}

// hostParams is where calibrate stores its fitted host model in an
// artifact's params.
type hostParams struct {
	Host *fpm.HostModel `json:"host,omitempty"`
}

func artifactHost(a *fpm.Artifact) (fpm.HostModel, bool, error) {
	if len(a.Params) == 0 {
		return fpm.HostModel{}, false, nil
	}
	var hp hostParams
	if err := json.Unmarshal(a.Params, &hp); err != nil || hp.Host == nil {
		return fpm.HostModel{}, false, nil
	}
	if err := hp.Host.Validate(); err != nil {
		return fpm.HostModel{}, false, err
	}
	return *hp.Host, true, nil
}

// WithHost stores a host model in an artifact's params.host, where Price
// reads it back, beside the form's own params.
func WithHost(a *fpm.Artifact, h fpm.HostModel) error { return a.SetParam("host", h) }

// LoadHostModel reads a host-overhead model: a bare fpm.HostModel JSON
// object, one wrapped under "model" with provenance beside it, or a model
// artifact whose params.host holds one (steplab calibrate writes those).
func LoadHostModel(path string) (fpm.HostModel, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return fpm.HostModel{}, fmt.Errorf("host model: %w", err)
	}
	if a, err := fpm.ParseArtifact(b); err == nil {
		h, ok, err := artifactHost(a)
		if err != nil {
			return h, fmt.Errorf("%s: params.host: %w", path, err)
		}
		if !ok {
			return h, fmt.Errorf("%s: a model artifact without params.host: pass a host model (steplab calibrate writes one into its artifact)", path)
		}
		return h, nil
	}
	var wrapped struct {
		Model *fpm.HostModel `json:"model"`
	}
	h := fpm.DefaultHostModel()
	if err := json.Unmarshal(b, &wrapped); err == nil && wrapped.Model != nil {
		h = *wrapped.Model
	} else if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("%s: not a host model: %v", path, err)
	}
	if err := h.Validate(); err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

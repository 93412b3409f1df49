package replay

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"path/filepath"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/catalog/manifest"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/scenario"
)

// CalibSpec is one calibration, as steplab calibrate's flags state it and
// a sweep's calibrate document (YAML, these keys) varies it.
type CalibSpec struct {
	// Datasets are fitted; HoldoutDatasets scored after the fit.
	Datasets        []string `yaml:"datasets" json:"datasets"`
	HoldoutDatasets []string `yaml:"holdout_datasets" json:"holdout_datasets,omitempty"`
	// Holdout is the fraction of each dataset's requests, the last by
	// arrival, held out and scored.
	Holdout float64 `yaml:"holdout" json:"holdout,omitempty"`
	// Start is an artifact to start from (linear, roofline or ops: an
	// earlier calibration's, a fit's; "": the first dataset's prior,
	// pricing.FPMPrior); HostModel the host model to start from.
	Start     string `yaml:"start" json:"start,omitempty"`
	HostModel string `yaml:"host_model" json:"host_model,omitempty"`
	// Cluster is a placement file (scenario.LoadSpec): what the manifests
	// do not record (router, links, engine keys), or a what-if placement.
	Cluster string `yaml:"cluster" json:"cluster,omitempty"`
	// Terms, Host and MoE name the parameters fitted (nil: the defaults;
	// ["none"]: none of that family).
	Terms    []string `yaml:"terms" json:"terms,omitempty"`
	Host     []string `yaml:"host" json:"host,omitempty"`
	MoE      []string `yaml:"moe" json:"moe,omitempty"`
	MaxEvals int      `yaml:"max_evals" json:"max_evals,omitempty"`
	// NoStepFit and Ridge: CalibOptions.NoStepFit and Ridge.
	NoStepFit bool    `yaml:"no_step_fit" json:"no_step_fit,omitempty"`
	Ridge     float64 `yaml:"ridge" json:"ridge,omitempty"`
}

// Resolve makes the spec's relative paths relative to dir (the directory
// of the document that holds it).
func (s CalibSpec) Resolve(dir string) CalibSpec {
	abs := func(p string) string {
		if pricing.IsPrior(p) || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	all := func(ps []string) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = abs(p)
		}
		return out
	}
	s.Datasets, s.HoldoutDatasets = all(s.Datasets), all(s.HoldoutDatasets)
	s.Start, s.HostModel, s.Cluster = abs(s.Start), abs(s.HostModel), abs(s.Cluster)
	return s
}

// CalibRun is a calibration set up from a spec, ready to Calibrate.
type CalibRun struct {
	Sets []CalibSet
	Opts CalibOptions
	// Refs name the fitted datasets in the artifact; Warnings say what the
	// manifests left to defaults.
	Refs     []fpm.DatasetRef
	Warnings []string
	// FittedOn are the distinct settings the datasets' manifests record
	// (fpm.Training.FittedOn).
	FittedOn []catalog.FittedOn
}

// Setup reads the datasets, rebuilds their engines (scenario.PlanFromManifest
// and the catalogue) and picks the start model:
// Start's, else the first engine's prior (pricing.FPMPrior: what replay
// requests prior DATASET prices the run with).
// HostModel is the starting host model (pricing.LoadHostModel: a host model
// file or an artifact's params.host); without it, Start's params.host, else
// the prior.
func (s CalibSpec) Setup() (*CalibRun, error) {
	if len(s.Datasets) == 0 {
		return nil, errors.New("calibrate: no datasets")
	}
	if s.Holdout > 0 && len(s.HoldoutDatasets) > 0 {
		return nil, errors.New("calibrate: use --holdout or --holdout-dataset, not both")
	}
	mo := scenario.ManifestOptions{FPM: cmp.Or(s.Start, pricing.FPMPrior), Host: s.HostModel}
	if s.Cluster != "" {
		sp, err := scenario.LoadSpec(s.Cluster)
		if err != nil {
			return nil, fmt.Errorf("--cluster: %w", err)
		}
		mo.Spec = &sp
	}
	run := &CalibRun{}
	var err error
	if run.Sets, run.Refs, run.Warnings, err = LoadCalibSets(s.Datasets, mo); err != nil {
		return nil, err
	}
	hsets, _, hwarn, err := LoadCalibSets(s.HoldoutDatasets, mo)
	if err != nil {
		return nil, err
	}
	run.Warnings = append(run.Warnings, hwarn...)
	for _, set := range run.Sets {
		run.FittedOn = fpm.AddFittedOn(run.FittedOn, set.FittedOn)
	}
	p := run.Sets[0].Plan.Pools[0].Engine
	o := CalibOptions{Host: p.Host, HostFit: p.HostPrior, Holdout: s.Holdout, HoldoutSets: hsets, MaxEvals: s.MaxEvals, Terms: s.Terms,
		HostParams: params(s.Host), MoEParams: params(s.MoE), StartName: pricing.Name(&p.Models), NoStepFit: s.NoStepFit, Ridge: s.Ridge}
	if s.Ridge < 0 || math.IsNaN(s.Ridge) || math.IsInf(s.Ridge, 0) {
		return nil, fmt.Errorf("calibrate: ridge %v: want a finite weight >= 0", s.Ridge)
	}
	start, ok := p.FPM.(fpm.Scalable)
	if !ok {
		form := "a prior"
		if p.Artifact != nil {
			form = "form " + p.Artifact.Form
		}
		return nil, fmt.Errorf("calibrate: --start must be a linear, roofline or ops artifact (steplab fit --form linear, steplab calibrate): %s is %s", s.Start, form)
	}
	o.Start = start
	run.Opts = o
	return run, nil
}

// params reads a parameter list: nil stays nil (the defaults), "none"
// names none.
func params(ps []string) []string {
	if ps == nil {
		return nil
	}
	out := []string{}
	for _, p := range ps {
		if p != "" && p != "none" {
			out = append(out, p)
		}
	}
	return out
}

// LoadCalibSets reads each dataset's requests and rebuilds the engines it
// ran on.
func LoadCalibSets(dirs []string, o scenario.ManifestOptions) ([]CalibSet, []fpm.DatasetRef, []string, error) {
	var sets []CalibSet
	var refs []fpm.DatasetRef
	var warn []string
	for _, dir := range dirs {
		d, err := datasets.Open(dir)
		if err != nil {
			return nil, nil, nil, err
		}
		tr, err := LoadTrace(d)
		if err != nil {
			return nil, nil, nil, err
		}
		p, pw, err := scenario.PlanFromManifest(d.Manifest, o)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", dir, err)
		}
		for _, w := range pw {
			warn = append(warn, dir+": "+w)
		}
		sets = append(sets, CalibSet{Name: dir, Dir: dir, Trace: tr, Plan: p.Plan, FittedOn: manifest.FittedOn(d.Manifest)})
		ref := fpm.DatasetRef{ID: dir, Path: dir, Rows: int64(len(tr.Rec))}
		if d.Manifest != nil {
			ref.SHA256 = d.Manifest.Source.SHA256
		}
		refs = append(refs, ref)
	}
	return sets, refs, warn, nil
}

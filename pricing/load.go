package pricing

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/steplab/steplab/catalog/manifest"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/fpm/opdb"
)

// Model builds the FPM an artifact describes, of any form: an ops artifact
// reads its kernel database (fpm/opdb), the other forms are fpm's.
func Model(a *fpm.Artifact) (fpm.FPM, error) {
	if a.Form != fpm.FormOps {
		return a.Model()
	}
	if err := a.CheckVersion(); err != nil {
		return nil, err
	}
	return opdb.FromArtifact(a)
}

// Load reads a model artifact and builds its model. It refuses an artifact
// of a newer version (naming both versions) and an unknown form.
func Load(path string) (fpm.FPM, *fpm.Artifact, error) {
	a, err := fpm.ReadArtifact(path)
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			return nil, nil, err // it names the file; callers name the key
		}
		return nil, nil, fmt.Errorf("load %s: %w", path, err)
	}
	m, err := Model(a)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", path, err)
	}
	return m, a, nil
}

// FromManifest resolves only the models that price a recorded run's steps
// (step replay needs no engine) for an FPM spec and a host spec: the
// hardware and model shape are looked up only when the FPM is a prior.
func FromManifest(m *datasets.Manifest, fpmSpec, hostSpec string) (*fpm.Models, error) {
	r := manifest.Resolve(m)
	if IsPrior(fpmSpec) && !r.Known() {
		return nil, r.Err()
	}
	return Price(Spec{Hardware: r.HW, Shape: r.Shape, FPM: fpmSpec, Host: hostSpec, EngineVersion: m.Source.Detail[datasets.DetailVLLMVersion],
		AttentionBackend: m.Source.Detail[datasets.DetailAttentionBackend], CUDAGraphSizes: m.CUDAGraphSizes})
}

// ForDatasets turns the FPM spec of eval, check and a bounds file into a
// model for the datasets at paths: a prior (roofline, ops, ops:NAME|DIR)
// built for the first dataset's manifest, or an artifact (its Artifact
// set, no host model read). Notes say how a prior was built.
func ForDatasets(spec string, paths []string) (*fpm.Models, error) {
	if !IsPrior(spec) {
		m, a, err := Load(spec)
		if err != nil {
			return nil, err
		}
		return &fpm.Models{FPM: m, FPMName: spec, Artifact: a}, nil
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("fpm %s: a prior is built for a dataset's hardware and model: name a dataset", spec)
	}
	d, err := datasets.Open(paths[0])
	if err != nil {
		return nil, err
	}
	return FromManifest(d.Manifest, spec, "")
}

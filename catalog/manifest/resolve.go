package manifest

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
)

// Resolved is what the catalogue (or a manifest's record) says of a run's
// hardware and model. A manifest may name a GPU the catalogue lacks; then
// only what needs no hardware can be planned.
type Resolved struct {
	HW                  catalog.Hardware
	Shape               catalog.Shape
	HWKnown, ShapeKnown bool
	HWErr, ShapeErr     error
}

// Known reports whether both the hardware and the shape are known; Err
// says why not.
func (r Resolved) Known() bool { return r.HWKnown && r.ShapeKnown }

// Err is why the hardware or the shape is not known (nil when both are).
func (r Resolved) Err() error { return errors.Join(r.HWErr, r.ShapeErr) }

// Resolve looks up the manifest's hardware in the catalogue (else
// its recorded spec file) and takes its model from the recorded layer
// shape, else from the catalogue's shape of its name (else its recorded
// config.json) at the recorded tensor parallelism. Failures are kept,
// not returned: only some uses need both.
func Resolve(m *datasets.Manifest) Resolved {
	var r Resolved
	switch {
	case m == nil || m.Hardware == nil || m.Hardware.GPUName == "":
		r.HWErr = errors.New("hardware: the manifest names no GPU")
	default:
		hw, err := catalog.LookupHardware(m.Hardware.GPUName)
		if err != nil && m.Hardware.Spec != "" {
			hw, err = catalog.LookupHardware(m.Hardware.Spec)
		}
		if err != nil {
			r.HW.Name, r.HWErr = m.Hardware.GPUName, catalog.AtKey("hardware", err)
		} else {
			r.HW, r.HWKnown = hw, true
		}
	}
	var ms *datasets.ModelShape
	if m != nil {
		ms = m.Model
	}
	switch {
	case ms == nil || (ms.Name == "" && ms.Layers == 0):
		r.ShapeErr = errors.New("model: the manifest has no model section: record the model's name or layer shape")
	case ms.Layers > 0 && ms.Hidden > 0:
		s, err := Shape(ms)
		if err != nil {
			r.ShapeErr = fmt.Errorf("model: the manifest's layer shape: %w", err)
		}
		r.Shape, r.ShapeKnown = s, err == nil
	default:
		s, err := catalog.LookupModel(ms.Name)
		if err != nil && ms.Config != "" && !strings.HasPrefix(ms.Config, "builtin:") {
			s, err = catalog.LookupModel(ms.Config)
		}
		if err == nil && ms.TensorParallel > 1 {
			s = s.WithTP(ms.TensorParallel)
			err = s.Validate()
		}
		if err != nil {
			r.ShapeErr = catalog.AtKey("model: the manifest records no layer shape, and its name", err)
		}
		r.Shape, r.ShapeKnown = s, err == nil
	}
	r.Shape.Name = cmp.Or(r.Shape.Name, nameOf(ms))
	return r
}

func nameOf(ms *datasets.ModelShape) string {
	if ms == nil {
		return ""
	}
	return ms.Name
}

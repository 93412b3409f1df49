package importers

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/steplab/steplab/datasets"
)

// Engine names the serving engine a run ran on and, optionally, its release:
// "vllm", "vllm@0.19.0", "sglang@0.5.2".
type Engine struct{ Name, Version string }

// Engines are the names ParseEngine accepts.
var Engines = []string{"vllm", "sglang"}

var releasePattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+){0,2}([.+-][0-9A-Za-z.+-]+)?$`)

// ParseEngine reads NAME[@VERSION] (empty: no engine).
func ParseEngine(s string) (Engine, error) {
	if s == "" {
		return Engine{}, nil
	}
	name, version, _ := strings.Cut(s, "@")
	e := Engine{Name: strings.ToLower(name), Version: strings.TrimPrefix(version, "v")}
	known := false
	for _, n := range Engines {
		known = known || n == e.Name
	}
	if !known {
		return Engine{}, fmt.Errorf("%q: unknown engine %q (want %s, optionally @VERSION, e.g. vllm@0.19.0)", s, name, strings.Join(Engines, " or "))
	}
	if strings.Contains(s, "@") && !releasePattern.MatchString(e.Version) {
		return Engine{}, fmt.Errorf("%q: %q is not a release (want e.g. %s@0.19.0)", s, version, e.Name)
	}
	return e, nil
}

// describe records what ran where the caller names it (the --hardware,
// --model and --engine of an import): many sources (request traces,
// benchmark results) do not say, and a replay needs the GPU and the model.
// A name the source recorded differently is replaced, with a note.
func (o *Options) describe(s *sink) error {
	if o.Hardware != "" {
		if m := s.m.Hardware; m != nil && m.GPUName != "" && m.GPUName != o.Hardware {
			s.note("hardware %s given on the command line; the source says %s", o.Hardware, m.GPUName)
		}
		if s.m.Hardware == nil {
			s.m.Hardware = &datasets.Hardware{}
		}
		s.m.Hardware.GPUName = o.Hardware
	}
	if o.Model != "" {
		if m := s.m.Model; m != nil && m.Name != "" && m.Name != o.Model {
			s.note("model %s given on the command line; the source says %s", o.Model, m.Name)
		}
		if s.m.Model == nil || s.m.Model.Name != o.Model {
			s.m.Model = &datasets.ModelShape{Name: o.Model}
		}
	}
	e, err := ParseEngine(o.Engine)
	if err != nil || e.Name == "" {
		return err
	}
	s.detail("engine", e.Name)
	if e.Version != "" {
		key := e.Name + "_version"
		if e.Name == "vllm" {
			key = datasets.DetailVLLMVersion
		}
		if had := s.m.Source.Detail[key]; had != "" && had != e.Version {
			s.note("%s %s given on the command line; the source says %s", key, e.Version, had)
		}
		s.detail(key, e.Version)
	}
	return nil
}

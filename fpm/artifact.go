package fpm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/internal/inflight"
)

// ArtifactVersion is the version of the model artifact format this build
// writes. ParseArtifact reads this version and older ones and refuses newer ones.
const ArtifactVersion = 1

// Model forms an artifact can hold.
const (
	FormLinear   = "linear"
	FormGrid     = "grid"
	FormRoofline = "roofline"
	FormRecipe   = "recipe"
	// FormOps is the measured-operations prior (Ops, OpsParams): its
	// database is read by package fpm/opdb, so package pricing (Model,
	// Load) builds it, not Artifact.Model.
	FormOps = "ops"
)

// Artifact is a fitted model as stored on disk: versioned JSON that says
// what the model is, what it was fitted on and how well it did.
//
//	{"artifact_version": 1, "form": "linear",
//	 "terms": ["const", ...],
//	 "coefficients": [{"term": "const", "value": 4.1e6, "lo": ..., "hi": ..., "level": 0.95}, ...],
//	 "features": [{"name": "prefill_attn", "definition": "..."}],
//	 "residuals": {...}, "grid": {...}, "params": {...},
//	 "training": {"datasets": [{"id", "path", "sha256", "rows"}],
//	              "selection": {"roles", "kinds", "valid", "policy"}, ...},
//	 "metrics": {...}, "notes": ["term prefill_kv_tokens dropped: zero on every row"],
//	 "created_by": "steplab fit ...", "created_at": "..."}
type Artifact struct {
	ArtifactVersion int    `json:"artifact_version"`
	Form            string `json:"form"`

	// Linear form.
	Terms        []string      `json:"terms,omitempty"`
	Coefficients []Coefficient `json:"coefficients,omitempty"`
	// CoefCov is the bootstrap covariance of the coefficients, in Terms
	// order (see Linear.CoefCov).
	CoefCov [][]float64 `json:"coef_cov,omitempty"`
	// Grid form.
	Grid *Grid `json:"grid,omitempty"`
	// Recipe form.
	Recipe *Recipe `json:"recipe,omitempty"`
	// Params holds form-specific parameters: the roofline's hardware,
	// shape and term multipliers, the ops prior's database, shape and
	// engine, and a calibrated host model.
	Params json.RawMessage `json:"params,omitempty"`

	// Residuals drives prediction intervals (linear, roofline and ops;
	// the grid keeps its own in Grid.Residuals).
	Residuals *ResidualQuantiles `json:"residuals,omitempty"`
	Features  []FeatureDef       `json:"features,omitempty"`
	Training  Training           `json:"training"`
	// Metrics is the evaluation report of the fit, in the fitting tool's
	// own structure (model does not interpret it).
	Metrics json.RawMessage `json:"metrics,omitempty"`
	// Notes are what the fit said about the model in words, e.g. the
	// terms it dropped because the data could not identify them.
	Notes     []string `json:"notes,omitempty"`
	CreatedBy string   `json:"created_by"`
	CreatedAt string   `json:"created_at,omitempty"`

	// Path is the file the artifact was read from ("" otherwise): the ops
	// form resolves a relative database in its params against its
	// directory.
	Path string `json:"-"`
}

// Coefficient is one fitted coefficient with its interval (Lo = Hi = 0 and
// Level = 0 when no interval was estimated).
type Coefficient struct {
	Term  string  `json:"term"`
	Value float64 `json:"value"`
	Lo    float64 `json:"lo,omitempty"`
	Hi    float64 `json:"hi,omitempty"`
	Level float64 `json:"level,omitempty"`
}

// FeatureDef documents how a feature was computed from the data.
type FeatureDef struct {
	Name       string `json:"name"`
	Definition string `json:"definition"`
}

// Training records what the model was fitted on.
type Training struct {
	Datasets  []DatasetRef `json:"datasets"`
	Selection Selection    `json:"selection"`
	Target    string       `json:"target,omitempty"` // e.g. "gpu_time_ns"
	Method    string       `json:"method,omitempty"` // e.g. "nnls", "huber-nn"
	Rows      int          `json:"rows,omitempty"`   // rows used after selection
	Seed      uint64       `json:"seed,omitempty"`
	Bootstrap int          `json:"bootstrap,omitempty"` // replicates behind the intervals
	// FittedOn are the distinct settings (GPU, model, precision, engine)
	// the datasets' manifests record; empty in artifacts fitted before
	// it was recorded. ProvenanceNote compares a run against it.
	FittedOn []catalog.FittedOn `json:"fitted_on,omitempty"`
}

// DatasetRef identifies one training dataset.
type DatasetRef struct {
	ID     string `json:"id"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Rows   int64  `json:"rows"`
}

// Selection records which rows of the datasets were used.
type Selection struct {
	Roles  []string `json:"roles"`
	Kinds  []string `json:"kinds"`
	Valid  bool     `json:"valid"`            // only rows marked valid
	Policy string   `json:"policy,omitempty"` // measurement policy of the data
	// Half is 1 or 2 when only that half of the rows (by a hash of their
	// step_id) was used; 0 for all.
	Half int `json:"half,omitempty"`
	// Uniform is set when only the rows of a uniform B × context benchmark
	// were used (prefill steps, decode steps at one context each).
	Uniform bool `json:"uniform,omitempty"`
	// LeftOut names the datasets given but not fitted because of their
	// measurement policy, "PATH (measurement_policy.decode POLICY)".
	LeftOut []string `json:"left_out,omitempty"`
	// Sample is set when the selected rows were more than the fit keeps:
	// it was made from a uniform sample of them; nil when every selected
	// row was used.
	Sample *Sample `json:"sample,omitempty"`
}

// Sample records a fit made from a uniform sample of the selected rows: at
// most PerKind rows of each step kind (measured benchmark points counted
// apart), drawn with Seed, Kept of Selected.
type Sample struct {
	PerKind  int    `json:"per_kind"`
	Seed     uint64 `json:"seed"`
	Selected int64  `json:"selected"`
	Kept     int64  `json:"kept"`
}

// Forms are the forms an artifact can hold, in order.
var Forms = []string{FormGrid, FormLinear, FormOps, FormRecipe, FormRoofline}

// SetParam stores v under key in the artifact's params, keeping the
// other keys: a form's own parameters and what other packages keep beside
// them (a host model, expert-parallel scales).
func (a *Artifact) SetParam(key string, v any) error {
	m := map[string]json.RawMessage{}
	if len(a.Params) > 0 {
		if err := json.Unmarshal(a.Params, &m); err != nil {
			return fmt.Errorf("fpm: artifact params: %w", err)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	m[key] = b
	out, err := json.Marshal(m)
	if err != nil {
		return err
	}
	a.Params = out
	return nil
}

// LinearArtifact wraps a linear model into an artifact (training, metrics
// and provenance are left for the caller to fill).
func LinearArtifact(m *Linear) *Artifact {
	a := &Artifact{ArtifactVersion: ArtifactVersion, Form: FormLinear, Residuals: m.Residuals}
	a.Terms, a.Coefficients, a.CoefCov = linearJSON(m)
	return a
}

// linearJSON is how a Linear is stored: its terms, its coefficients with
// their intervals, and their covariance.
func linearJSON(m *Linear) ([]string, []Coefficient, [][]float64) {
	var cs []Coefficient
	for i, t := range m.Terms {
		c := Coefficient{Term: t, Value: m.Coef[i]}
		if len(m.CoefLo) == len(m.Coef) && len(m.CoefHi) == len(m.Coef) {
			c.Lo, c.Hi, c.Level = m.CoefLo[i], m.CoefHi[i], m.CoefLevel
		}
		cs = append(cs, c)
	}
	return append([]string(nil), m.Terms...), cs, m.CoefCov
}

// linearOf builds a Linear from what linearJSON stores.
func linearOf(terms []string, cs []Coefficient, cov [][]float64, res *ResidualQuantiles) (*Linear, error) {
	if len(cs) != len(terms) {
		return nil, fmt.Errorf("fpm: linear artifact has %d terms but %d coefficients", len(terms), len(cs))
	}
	coef := make([]float64, len(terms))
	var lo, hi []float64
	level := 0.0
	for i, c := range cs {
		if c.Term != terms[i] {
			return nil, fmt.Errorf("fpm: linear artifact: coefficient %d is for %q, term %d is %q", i, c.Term, i, terms[i])
		}
		coef[i] = c.Value
		if c.Level > 0 {
			level = c.Level
		}
	}
	if level > 0 {
		lo, hi = make([]float64, len(coef)), make([]float64, len(coef))
		for i, c := range cs {
			lo[i], hi[i] = c.Lo, c.Hi
		}
	}
	if cov != nil {
		if len(cov) != len(terms) {
			return nil, fmt.Errorf("fpm: linear artifact: coef_cov has %d rows for %d terms", len(cov), len(terms))
		}
		for i, row := range cov {
			if len(row) != len(terms) {
				return nil, fmt.Errorf("fpm: linear artifact: coef_cov row %d has %d values for %d terms", i, len(row), len(terms))
			}
		}
	}
	m, err := NewLinear(terms, coef)
	if err != nil {
		return nil, err
	}
	m.CoefLo, m.CoefHi, m.CoefLevel, m.CoefCov, m.Residuals = lo, hi, level, cov, res
	return m, nil
}

// GridArtifact wraps a grid model into an artifact.
func GridArtifact(g *Grid) *Artifact {
	return &Artifact{ArtifactVersion: ArtifactVersion, Form: FormGrid, Grid: g}
}

// CheckVersion refuses an artifact of a version this build does not read.
func (a *Artifact) CheckVersion() error {
	if a.ArtifactVersion > ArtifactVersion {
		return fmt.Errorf("fpm: artifact version %d is newer than this build reads (version %d); upgrade steplab", a.ArtifactVersion, ArtifactVersion)
	}
	if a.ArtifactVersion < 1 {
		return fmt.Errorf("fpm: artifact version %d: want 1..%d (is artifact_version missing?)", a.ArtifactVersion, ArtifactVersion)
	}
	return nil
}

// Model builds the FPM of an artifact of a form this package holds
// (linear, grid, recipe); an ops artifact reads a kernel database, which
// package pricing does (pricing.Model builds every form).
func (a *Artifact) Model() (FPM, error) {
	if err := a.CheckVersion(); err != nil {
		return nil, err
	}
	switch a.Form {
	case FormLinear:
		return linearOf(a.Terms, a.Coefficients, a.CoefCov, a.Residuals)
	case FormGrid:
		if a.Grid == nil {
			return nil, fmt.Errorf("fpm: grid artifact has no \"grid\" object")
		}
		if err := a.Grid.Validate(); err != nil {
			return nil, err
		}
		return a.Grid, nil
	case FormRoofline:
		return rooflineOf(a)
	case FormRecipe:
		if a.Recipe == nil {
			return nil, fmt.Errorf("fpm: recipe artifact has no \"recipe\" object")
		}
		if err := a.Recipe.Validate(); err != nil {
			return nil, err
		}
		return a.Recipe, nil
	case FormOps:
		return nil, fmt.Errorf("fpm: an ops artifact reads its kernel database: build it with package pricing (pricing.Model)")
	}
	return nil, fmt.Errorf("fpm: unknown model form %q (this build reads %v)", a.Form, Forms)
}

// ParseArtifact decodes artifact JSON, checking the version before anything
// else so that a newer artifact is refused with a version message rather
// than a decoding error.
func ParseArtifact(b []byte) (*Artifact, error) {
	var head struct {
		Version *int `json:"artifact_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("not a model artifact: %w", err)
	}
	if head.Version == nil {
		return nil, fmt.Errorf("not a model artifact: no artifact_version")
	}
	if *head.Version > ArtifactVersion {
		return nil, fmt.Errorf("artifact version %d is newer than this build reads (version %d); upgrade steplab", *head.Version, ArtifactVersion)
	}
	var a Artifact
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("decoding artifact: %w", err)
	}
	return &a, nil
}

// ReadArtifact reads and parses the artifact at path, recording the path
// (an ops artifact's relative database is found beside it).
func ReadArtifact(path string) (*Artifact, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	a, err := ParseArtifact(b)
	if err != nil {
		return nil, err
	}
	a.Path = path
	return a, nil
}

// Save writes the artifact as indented JSON atomically: to a temporary file
// in the same directory (created if missing), synced, then renamed over
// path. A zero ArtifactVersion is set to ArtifactVersion.
func (a *Artifact) Save(path string) error {
	if a.ArtifactVersion == 0 {
		a.ArtifactVersion = ArtifactVersion
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(a); err != nil {
		return fmt.Errorf("fpm: save %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fpm: save: %w", err)
	}
	f, err := inflight.CreateTemp(dir, fmt.Sprintf(".%s.tmp-%d-*", filepath.Base(path), os.Getpid()))
	if err != nil {
		return fmt.Errorf("fpm: save: %w", err)
	}
	tmp := f.Name()
	defer inflight.Done(tmp)
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("fpm: save %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fpm: save %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("fpm: save %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("fpm: save %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("fpm: save %s: %w", path, err)
	}
	ok = true
	return nil
}

// Save is shorthand for a.Save(path).
func Save(path string, a *Artifact) error { return a.Save(path) }

package opdb

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/steplab/steplab/model"
)

// SpecPrefix starts a prior spec where a model artifact is accepted:
// "ops" (the database shipped for the hardware), "ops:NAME" (a shipped
// database) or "ops:DIR" (a database directory).
const SpecPrefix = "ops"

// IsSpec reports whether s is a prior spec rather than an artifact path.
func IsSpec(s string) bool { return s == SpecPrefix || strings.HasPrefix(s, SpecPrefix+":") }

// Prior builds the prior a spec names for a model shape on a hardware,
// for the database's own framework (no OpsEngine).
func Prior(spec string, hw model.Hardware, s model.Shape) (*model.Ops, error) {
	if !IsSpec(spec) {
		return nil, fmt.Errorf("opdb: %q is not an ops spec: use ops, ops:NAME or ops:DIR", spec)
	}
	var db *model.OpDB
	var err error
	if name := strings.TrimPrefix(strings.TrimPrefix(spec, SpecPrefix), ":"); name != "" {
		db, err = Open(name)
	} else {
		db, err = ForHardware(hw)
	}
	if err != nil {
		return nil, err
	}
	return model.NewOps(db, s)
}

func init() { model.RegisterForm(model.FormOps, decodeArtifact) }

// decodeArtifact builds the prior an ops artifact describes; a relative
// database directory is read relative to the artifact.
func decodeArtifact(a *model.Artifact) (model.FPM, error) {
	var p model.OpsParams
	if err := json.Unmarshal(a.Params, &p); err != nil {
		return nil, fmt.Errorf("ops artifact: params: %w", err)
	}
	if p.Database == "" {
		return nil, fmt.Errorf("ops artifact: params.database is empty: name a shipped database (%s) or a directory", strings.Join(Names(), ", "))
	}
	where := p.Database
	if a.Path != "" && !filepath.IsAbs(where) && !isShipped(where) {
		where = filepath.Join(filepath.Dir(a.Path), where)
	}
	db, err := Open(where)
	if err != nil {
		return nil, err
	}
	o, err := model.NewOps(db, p.Shape)
	if err != nil {
		return nil, fmt.Errorf("ops artifact: %w", err)
	}
	return o.WithEngine(p.Engine)
}

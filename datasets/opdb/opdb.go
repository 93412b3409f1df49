package opdb

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/steplab/steplab/model"
)

// The databases shipped inside the binary: one folder each under data/.
//
//go:embed data
var shipped embed.FS

// Names lists the databases shipped inside the binary, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(shipped, "data")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*model.OpDB{}
)

// Open returns a database by the name of one shipped inside the binary
// (Names), else reads the directory nameOrDir. A shipped database is read
// once per process; callers must not modify it.
func Open(nameOrDir string) (*model.OpDB, error) {
	if isShipped(nameOrDir) {
		return openShipped(nameOrDir)
	}
	if _, err := os.Stat(nameOrDir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("opdb: %q is neither a database shipped with steplab (%s) nor a directory", nameOrDir, strings.Join(Names(), ", "))
	}
	return LoadDir(nameOrDir)
}

func openShipped(name string) (*model.OpDB, error) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if db, ok := cache[name]; ok {
		return db, nil
	}
	db, err := LoadFS(shippedFS(name), name)
	if err != nil {
		return nil, fmt.Errorf("opdb: shipped database %s: %w", name, err)
	}
	cache[name] = db
	return db, nil
}

// shippedFS is the folder of a shipped database.
func shippedFS(name string) fs.FS {
	sub, _ := fs.Sub(shipped, path.Join("data", name))
	return sub
}

// ForHardware returns the shipped database measured on a GPU, matching the
// database's system name (AIConfigurator's "h200_sxm") to the hardware's
// ("H200-SXM") whatever the case and punctuation.
func ForHardware(hw model.Hardware) (*model.OpDB, error) {
	want := squash(hw.Name)
	for _, n := range Names() {
		if s, err := readSystem(shippedFS(n)); err == nil && squash(s.GPU) == want {
			return openShipped(n)
		}
	}
	return nil, fmt.Errorf("opdb: no database shipped with steplab was measured on %s (shipped: %s); point at one with ops:DIR",
		hw.Name, strings.Join(Names(), ", "))
}

func squash(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, s)
}

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

func isShipped(name string) bool {
	for _, n := range Names() {
		if n == name {
			return true
		}
	}
	return false
}

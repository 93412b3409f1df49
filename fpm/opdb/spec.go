package opdb

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
)

// SpecPrefix starts a prior spec where a model artifact is accepted:
//
//	ops              the database shipped for the run's GPU, at the version nearest the run's
//	ops:NAME         a shipped database
//	ops:DIR          a database directory
//	ops:aic          the installed aiconfigurator package's tree, for the run's GPU
//	ops:aic:PATH     an AIConfigurator tree (a checkout, its systems folder or the package)
//
// followed by options, each after a comma: version=V (the framework
// version wanted; default the run's, else the newest), framework=F (of a
// tree; default vllm) and any-gpu (price the run's GPU with a database
// measured on another, which is otherwise refused).
const SpecPrefix = "ops"

// treePrefix names an AIConfigurator tree in a spec.
const treePrefix = "aic"

// IsSpec reports whether s is a prior spec rather than an artifact path.
func IsSpec(s string) bool {
	base, _, _ := strings.Cut(s, ",")
	return base == SpecPrefix || strings.HasPrefix(base, SpecPrefix+":")
}

// Query is what a prior is built for: the run's GPU and model shape, and
// the framework version it ran (empty: not known).
type Query struct {
	Hardware catalog.Hardware
	Shape    catalog.Shape
	Version  string
}

// spec is a parsed ops spec.
type spec struct {
	where     string // NAME or DIR; for a tree, its PATH ("" the installed one)
	tree      bool
	version   string
	framework string
	anyGPU    bool
}

func parseSpec(s string) (spec, error) {
	if !IsSpec(s) {
		return spec{}, fmt.Errorf("opdb: %q is not an ops spec: use ops, ops:NAME, ops:DIR or ops:aic[:PATH]", s)
	}
	parts := strings.Split(s, ",")
	p := spec{where: strings.TrimPrefix(strings.TrimPrefix(parts[0], SpecPrefix), ":"), framework: "vllm"}
	if p.where == treePrefix || strings.HasPrefix(p.where, treePrefix+":") {
		p.tree, p.where = true, strings.TrimPrefix(strings.TrimPrefix(p.where, treePrefix), ":")
	}
	for _, o := range parts[1:] {
		k, v, _ := strings.Cut(o, "=")
		switch {
		case k == "any-gpu" && v == "":
			p.anyGPU = true
		case k == "version" && v != "":
			p.version = v
		case k == "framework" && v != "":
			p.framework = strings.ToLower(v)
		default:
			return spec{}, fmt.Errorf("opdb: %q: unknown option %q: want version=V, framework=F or any-gpu", s, o)
		}
	}
	return p, nil
}

// Prior builds the prior a spec names for a query, for the database's
// own framework (no OpsEngine). Its notes say which database was chosen
// and why, and where it was applied outside what it measured.
func Prior(specStr string, q Query) (*fpm.Ops, []string, error) {
	p, err := parseSpec(specStr)
	if err != nil {
		return nil, nil, err
	}
	version := p.version
	if version == "" {
		version = q.Version
	}
	var db *fpm.OpDB
	var notes []string
	switch {
	case p.tree:
		t, err := treeAt(p.where)
		if err != nil {
			return nil, nil, err
		}
		var c Choice
		if db, c, err = t.Load(q.Hardware, p.framework, version); err != nil {
			return nil, nil, err
		}
		notes = c.Notes()
	case p.where == "":
		if db, err = ForHardware(q.Hardware, p.framework, version); err != nil {
			return nil, nil, err
		}
		notes = append(notes, fmt.Sprintf("ops: database %s, shipped for %s", db.Name, q.Hardware.Name))
	default:
		if db, err = Open(p.where); err != nil {
			return nil, nil, err
		}
	}
	more, err := checkProvenance(db, q, version, p.anyGPU)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", specStr, err)
	}
	o, err := fpm.NewOps(db, q.Shape)
	if err != nil {
		return nil, nil, err
	}
	if o, err = withNodes(o, q.Hardware, q.Shape); err != nil {
		return nil, nil, err
	}
	if q.Shape.TP > 1 && len(db.AllReduce) == 0 {
		more = append(more, fmt.Sprintf("ops: %s has no all-reduce table: TP=%d's all-reduces are priced from its node.intra_node_bw (%.0f GB/s), not measured",
			db.Name, q.Shape.TP, db.System.IntraNodeBandwidth/1e9))
	}
	return o, append(append(notes, more...), o.Notes()...), nil
}

// withNodes lays the prior's tensor-parallel group out on hw's nodes
// (fpm.Ops.WithNodes), refusing a degree hw cannot lay out.
func withNodes(o *fpm.Ops, hw catalog.Hardware, s catalog.Shape) (*fpm.Ops, error) {
	l, err := hw.Layout(s.TPDegree())
	if err != nil {
		return nil, fmt.Errorf("TP=%d on %s: %w", s.TPDegree(), hw.Name, err)
	}
	return o.WithNodes(l, hw.Roofline.AllReduceEff), nil
}

// treeAt is the tree at path, or the installed one for "".
func treeAt(path string) (Tree, error) {
	if path == "" {
		return InstalledTree()
	}
	return FindTree(path)
}

// checkProvenance refuses a database measured on another GPU than the
// run's (unless anyGPU, then noted) and notes a framework version other
// than the run's.
func checkProvenance(db *fpm.OpDB, q Query, version string, anyGPU bool) ([]string, error) {
	var notes []string
	gpu, err := DatabaseGPU(db)
	if err != nil {
		return nil, err
	}
	if gpu != q.Hardware.Name {
		if !anyGPU {
			return nil, fmt.Errorf("database %s was measured on %s, the run's GPU is %s: pricing one GPU with another's kernels is refused (use ops for the database shipped for %s, or add ,any-gpu to price it anyway)",
				db.Name, gpu, q.Hardware.Name, q.Hardware.Name)
		}
		notes = append(notes, fmt.Sprintf("ops: %s priced with kernels measured on %s (%s; any-gpu): expect the difference between the two GPUs in every step", q.Hardware.Name, gpu, db.Name))
	}
	if version != "" && db.Version != "" && db.Version != version {
		notes = append(notes, fmt.Sprintf("ops: %s measured under %s %s, the run's version is %s", db.Name, db.Framework, db.Version, version))
	}
	return notes, nil
}

// DatabaseGPU is the catalogue's name of the GPU a database was measured
// on (its system file's data_dir, resolved through the catalogue's names
// and aliases).
func DatabaseGPU(db *fpm.OpDB) (string, error) {
	hw, err := catalog.LookupHardware(db.System.GPU)
	if err != nil {
		return "", fmt.Errorf("database %s: %s: data_dir names GPU %q, which the hardware catalogue does not know: add it (or an alias) to a catalogue entry (docs/catalog.md)",
			db.Name, SystemFile, db.System.GPU)
	}
	return hw.Name, nil
}

// FromArtifact builds the prior an ops artifact (form ops) describes; a
// relative database directory is read relative to the artifact. Package
// pricing calls it for that form.
func FromArtifact(a *fpm.Artifact) (fpm.FPM, error) {
	var p fpm.OpsParams
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
	o, err := fpm.NewOps(db, p.Shape)
	if err != nil {
		return nil, fmt.Errorf("ops artifact: %w", err)
	}
	// The artifact names no GPU: its tensor-parallel group sits on the
	// nodes of the GPU the database was measured on (one node where the
	// catalogue does not know that GPU, as before nodes were modelled).
	if p.Shape.TPDegree() > 1 {
		if hw, err := catalog.LookupHardware(db.System.GPU); err == nil {
			if o, err = withNodes(o, hw, p.Shape); err != nil {
				return nil, fmt.Errorf("ops artifact: %w", err)
			}
		}
	}
	if o, err = o.WithEngine(p.Engine); err != nil {
		return nil, err
	}
	if a.Residuals != nil {
		return o.WithResiduals(a.Residuals), nil
	}
	return o, nil
}

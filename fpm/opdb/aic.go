package opdb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/internal/yamldoc"
)

// AIConfigurator keeps its measurements as one tree for every GPU,
// operation, framework and version:
//
//	systems/<system>.yaml                               the GPU (data_dir: data/<system>)
//	systems/data/<system>/<op>/<framework>/<version>/   one operation's tables
//
// A Tree reads that tree as it is (a checkout of the repository or the
// installed aiconfigurator package), choosing the system by the run's GPU
// and the version nearest the run's framework version.
type Tree struct {
	// Dir is the systems folder: the system files and data/.
	Dir string
}

// aicTables are the operation folders the prior reads, each with the
// files it takes from them, in the layout LoadFS reads.
var aicTables = []struct {
	op    string
	files []string
}{
	{"gemm", []string{GEMMFile}},
	{"attention", []string{ContextAttentionFile, GenerationAttentionFile}},
	{"comm", []string{AllReduceFile}},
	{"moe", []string{MoEFile}},
}

// FindTree finds the systems folder of an AIConfigurator tree at root:
// root itself, root/systems (the installed package's aiconfigurator_core),
// or the repository's aic-core/src/aiconfigurator_core/systems.
func FindTree(root string) (Tree, error) {
	for _, dir := range []string{root, filepath.Join(root, "systems"),
		filepath.Join(root, "aic-core", "src", "aiconfigurator_core", "systems"),
		filepath.Join(root, "src", "aiconfigurator_core", "systems")} {
		if st, err := os.Stat(filepath.Join(dir, "data")); err == nil && st.IsDir() {
			return Tree{Dir: dir}, nil
		}
	}
	return Tree{}, fmt.Errorf("opdb: %s holds no AIConfigurator systems folder (systems/<gpu>.yaml beside systems/data/): point at a checkout of the repository, its systems folder or the installed aiconfigurator_core package", root)
}

// InstalledTree finds the systems folder of an installed aiconfigurator
// package in the usual Python locations (a virtual environment first).
func InstalledTree() (Tree, error) {
	var patterns []string
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		patterns = append(patterns, filepath.Join(v, "lib", "python3*", "site-packages"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		patterns = append(patterns, filepath.Join(h, ".local", "lib", "python3*", "site-packages"),
			filepath.Join(h, ".pyenv", "versions", "*", "lib", "python3*", "site-packages"))
	}
	patterns = append(patterns, "/usr/local/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages",
		"/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages")
	for _, p := range patterns {
		dirs, _ := filepath.Glob(filepath.Join(p, "aiconfigurator_core", "systems"))
		slices.Sort(dirs)
		for _, d := range dirs {
			if t, err := FindTree(d); err == nil {
				return t, nil
			}
		}
	}
	return Tree{}, fmt.Errorf("opdb: no installed aiconfigurator package found (looked in the virtual environment, ~/.local, pyenv and the system's site-packages): point at a checkout with ops:aic:PATH")
}

// System is one GPU of a tree: its system file's name and the catalogue
// hardware that name resolves to.
type System struct {
	Name     string // e.g. "h200_sxm"
	Hardware string // the catalogue's name, e.g. "H200-SXM"; "" when the catalogue lacks it
}

// Systems lists the tree's GPUs that have measurements, sorted by name.
func (t Tree) Systems() ([]System, error) {
	files, err := filepath.Glob(filepath.Join(t.Dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []System
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if st, err := os.Stat(filepath.Join(t.Dir, "data", name)); err != nil || !st.IsDir() {
			continue // not a GPU's file (a manifest of the tree), or no measurements
		}
		s := System{Name: name}
		if hw, err := catalog.LookupHardware(name); err == nil {
			s.Hardware = hw.Name
		}
		out = append(out, s)
	}
	return out, nil
}

// Choice says which tables of a tree a database was assembled from.
type Choice struct {
	System    string
	Framework string
	// Version is the version asked for ("" for the newest), Versions the
	// version each operation's tables were taken at.
	Version  string
	Versions map[string]string
	// Reused lists the tables a version folder takes from another
	// version's (its reuse.yaml).
	Reused []Reuse
}

// Reuse is one table of an operation's folder taken from another version.
type Reuse struct {
	Op, File, From string
}

// Notes says what was chosen, and where a table's version is not the one
// asked for.
func (c Choice) Notes() []string {
	gemm := c.Versions["gemm"]
	var out []string
	what := "newest"
	if c.Version != "" {
		what = "nearest " + c.Version
	}
	out = append(out, fmt.Sprintf("ops: %s kernels of %s %s (%s version measured)", c.System, c.Framework, gemm, what))
	for _, t := range aicTables[1:] {
		if v, ok := c.Versions[t.op]; ok && v != gemm {
			out = append(out, fmt.Sprintf("ops: %s's %s tables are of %s %s (none measured at %s)", c.System, t.op, c.Framework, v, gemm))
		}
	}
	for _, r := range c.Reused {
		out = append(out, fmt.Sprintf("ops: %s's %s at %s %s is %s's measurement (reuse.yaml)", c.System, r.File, c.Framework, c.Versions[r.Op], r.From))
	}
	return out
}

// reuse reads a version folder's reuse.yaml: the tables it takes from
// another version's folder, by table name (none without the file).
func (t Tree) reuse(dir string) (map[string]string, error) {
	name := filepath.Join(t.Dir, filepath.FromSlash(dir), "reuse.yaml")
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opdb: %w", err)
	}
	var y struct {
		Reuse []struct {
			Table       string `yaml:"table"`
			FromVersion string `yaml:"from_version"`
		} `yaml:"reuse"`
	}
	if err := yamldoc.Unmarshal(b, &y); err != nil {
		return nil, fmt.Errorf("opdb: %s: %w", name, err)
	}
	out := map[string]string{}
	for i, r := range y.Reuse {
		if r.Table == "" || r.FromVersion == "" || strings.ContainsAny(r.FromVersion, `/\`) || r.FromVersion == ".." {
			return nil, fmt.Errorf("opdb: %s: reuse[%d] needs a table and a from_version folder name", name, i)
		}
		out[r.Table] = r.FromVersion
	}
	return out, nil
}

// Load assembles the database of the tree's system measured on hw, under
// framework, at the version nearest version (the newest when version is
// ""). Each operation's tables come from the version nearest the GEMMs'.
func (t Tree) Load(hw catalog.Hardware, framework, version string) (*fpm.OpDB, Choice, error) {
	systems, err := t.Systems()
	if err != nil {
		return nil, Choice{}, err
	}
	var sys string
	var known []string
	for _, s := range systems {
		if s.Hardware == hw.Name {
			sys = s.Name
		}
		if s.Hardware != "" {
			known = append(known, s.Hardware)
		}
	}
	if sys == "" {
		return nil, Choice{}, fmt.Errorf("opdb: %s has no measurements of %s (it has %s)", t.Dir, hw.Name, strings.Join(known, ", "))
	}
	return t.LoadSystem(sys, framework, version)
}

// LoadSystem is Load for a system named as the tree names it.
func (t Tree) LoadSystem(sys, framework, version string) (*fpm.OpDB, Choice, error) {
	c := Choice{System: sys, Framework: framework, Version: version, Versions: map[string]string{}}
	files := map[string]string{SystemFile: sys + ".yaml"}
	for i, tb := range aicTables {
		dir := path.Join("data", sys, tb.op, framework)
		want := version
		if i > 0 {
			want = c.Versions["gemm"]
		}
		v, err := nearestVersion(filepath.Join(t.Dir, filepath.FromSlash(dir)), want)
		if errors.Is(err, fs.ErrNotExist) && (tb.op == "comm" || tb.op == "moe") {
			continue // the all-reduce and MoE tables are optional
		}
		if err != nil {
			return nil, c, fmt.Errorf("opdb: %s: %s %s tables: %w", t.Dir, sys, tb.op, err)
		}
		c.Versions[tb.op] = v
		reused, err := t.reuse(path.Join(dir, v))
		if err != nil {
			return nil, c, err
		}
		for _, f := range tb.files {
			from := v
			if r, ok := reused[strings.TrimSuffix(path.Base(f), ".parquet")]; ok {
				from = r
				c.Reused = append(c.Reused, Reuse{Op: tb.op, File: path.Base(f), From: r})
			}
			files[f] = path.Join(dir, from, path.Base(f))
			files[path.Join(path.Dir(f), MetaFile)] = path.Join(dir, from, MetaFile)
		}
	}
	name := fmt.Sprintf("%s-%s-%s", strings.ReplaceAll(sys, "_", "-"), framework, c.Versions["gemm"])
	db, err := LoadFS(remap{os.DirFS(t.Dir), files}, name)
	if err != nil {
		return nil, c, fmt.Errorf("opdb: %s: %w", t.Dir, err)
	}
	return db, c, nil
}

// remap presents some files of fsys under other names: the tree's folders
// as one database's layout.
type remap struct {
	fsys  fs.FS
	names map[string]string
}

func (r remap) Open(name string) (fs.File, error) {
	real, ok := r.names[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return r.fsys.Open(real)
}

// nearestVersion is the version folder in dir nearest want (the newest
// when want is ""), a tie going to the newer.
func nearestVersion(dir, want string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var versions []string
	for _, e := range entries {
		if e.IsDir() {
			versions = append(versions, e.Name())
		}
	}
	if len(versions) == 0 {
		return "", fmt.Errorf("%s: no version folders: %w", dir, fs.ErrNotExist)
	}
	return nearest(versions, want), nil
}

// nearest is the release of versions nearest want (the newest when want
// is ""), a tie going to the newer.
func nearest(versions []string, want string) string {
	versions = slices.SortedFunc(slices.Values(versions), compareVersions)
	best := versions[len(versions)-1]
	if want == "" {
		return best
	}
	for _, v := range versions {
		if versionDistance(v, want) <= versionDistance(best, want) {
			best = v
		}
	}
	return best
}

// versionParts reads the leading numbers of a release ("0.24.0" → 0 24 0;
// "0.1.dev19262" → 0 1; a "v" prefix is dropped).
func versionParts(v string) [3]float64 {
	var out [3]float64
	for i, p := range strings.SplitN(strings.TrimPrefix(v, "v"), ".", 4) {
		if i == len(out) {
			break
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			break
		}
		out[i] = float64(n)
	}
	return out
}

func compareVersions(a, b string) int {
	pa, pb := versionParts(a), versionParts(b)
	for i := range pa {
		if pa[i] != pb[i] {
			if pa[i] < pb[i] {
				return -1
			}
			return 1
		}
	}
	return strings.Compare(a, b)
}

// versionDistance is how far apart two releases are on one line of
// releases: a major release weighs a thousand minor ones, a minor one a
// thousand patches (so a version newer than every one measured is nearest
// the newest).
func versionDistance(a, b string) float64 {
	key := func(v string) float64 {
		p := versionParts(v)
		return p[0]*1e6 + min(p[1], 999)*1e3 + min(p[2], 999)
	}
	d := key(a) - key(b)
	if d < 0 {
		return -d
	}
	return d
}

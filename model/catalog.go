package model

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// builtinFS holds the built-in catalogue: hardware/*.yaml spec files and
// models/<name>/config.json Hugging Face configs (SOURCES.md beside them
// says where each came from).
//
//go:embed catalog
var builtinFS embed.FS

// CatalogEnv names the environment variable listing user catalogue
// directories (os.PathListSeparator-separated), read after the built-ins.
const CatalogEnv = "STEPLAB_CATALOG"

// Catalog is a set of hardware specs and model shapes, resolvable by name.
// Sources are read in order: the built-ins first, then each directory; an
// entry of a later source shadows an earlier one of the same name (a note
// says so). Each directory may hold hardware/*.yaml (or *.yml) and
// models/*.json or models/<name>/config.json, with an optional
// models/<name>/aliases.txt (one alias per line).
type Catalog struct {
	hardware []Hardware
	hwKeys   map[string]int // normalised name or alias → index
	hwSource []int          // source of each entry (0: built-in)

	models      []Shape
	modelKeys   map[string]int // lower-case name or alias → index
	modelSource []int

	notes []string
}

// LoadCatalog reads the built-in catalogue and then dirs.
func LoadCatalog(dirs ...string) (*Catalog, error) {
	c := &Catalog{hwKeys: map[string]int{}, modelKeys: map[string]int{}}
	sub, err := fs.Sub(builtinFS, "catalog")
	if err != nil {
		return nil, err
	}
	if err := c.addFS(sub, "builtin:", 0); err != nil {
		return nil, fmt.Errorf("model: built-in catalogue: %w", err)
	}
	for i, d := range dirs {
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() {
			return nil, fmt.Errorf("model: catalogue directory %q (%s): not a readable directory", d, CatalogEnv)
		}
		if err := c.addFS(os.DirFS(d), d+string(filepath.Separator), i+1); err != nil {
			return nil, fmt.Errorf("model: catalogue %s: %w", d, err)
		}
	}
	return c, nil
}

// CatalogDirs is the directories STEPLAB_CATALOG lists (empty entries
// skipped).
func CatalogDirs() []string {
	var out []string
	for _, d := range filepath.SplitList(os.Getenv(CatalogEnv)) {
		if strings.TrimSpace(d) != "" {
			out = append(out, d)
		}
	}
	return out
}

var defaultCatalog struct {
	sync.Mutex
	env   string
	built bool
	c     *Catalog
	err   error
}

// DefaultCatalog is the built-ins plus the directories of STEPLAB_CATALOG:
// the one place the environment is read. It is built once per value of
// the variable.
func DefaultCatalog() (*Catalog, error) {
	d := &defaultCatalog
	d.Lock()
	defer d.Unlock()
	env := os.Getenv(CatalogEnv)
	if !d.built || env != d.env {
		d.c, d.err = LoadCatalog(CatalogDirs()...)
		d.env, d.built = env, true
	}
	return d.c, d.err
}

// LookupHardware resolves a hardware reference in the default catalogue:
// a catalogue name in any spelling (see Catalog.LookupHardware) or the
// path of a spec file.
func LookupHardware(ref string) (Hardware, error) {
	c, err := DefaultCatalog()
	if err != nil {
		return Hardware{}, err
	}
	return c.LookupHardware(ref)
}

// LookupModel resolves a model reference in the default catalogue: a
// catalogue name (see Catalog.LookupModel) or the path of a config.json
// or of a directory holding one.
func LookupModel(ref string) (Shape, error) {
	c, err := DefaultCatalog()
	if err != nil {
		return Shape{}, err
	}
	return c.LookupModel(ref)
}

// Hardware lists the catalogue's hardware, sorted by name.
func (c *Catalog) Hardware() []Hardware { return append([]Hardware(nil), c.hardware...) }

// Models lists the catalogue's models, sorted by name.
func (c *Catalog) Models() []Shape { return append([]Shape(nil), c.models...) }

// Notes are what loading said (user entries shadowing others).
func (c *Catalog) Notes() []string { return append([]string(nil), c.notes...) }

// addFS reads one source's hardware and models.
func (c *Catalog) addFS(fsys fs.FS, label string, source int) error {
	hwFiles, err := globFS(fsys, "hardware/*.yaml", "hardware/*.yml")
	if err != nil {
		return err
	}
	for _, f := range hwFiles {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return err
		}
		hw, err := ParseHardwareSpec(label+f, b)
		if err != nil {
			return err
		}
		if err := c.addHardware(hw, source); err != nil {
			return err
		}
	}
	flat, err := globFS(fsys, "models/*.json")
	if err != nil {
		return err
	}
	nested, err := globFS(fsys, "models/*/config.json")
	if err != nil {
		return err
	}
	for _, f := range append(flat, nested...) {
		name := strings.TrimSuffix(path.Base(f), ".json")
		if path.Base(f) == "config.json" {
			name = path.Base(path.Dir(f))
		}
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return err
		}
		s, err := ParseHFConfig(name, b)
		if err != nil {
			return fmt.Errorf("%s%s: %w", label, f, err)
		}
		s.File = label + f
		aliases, err := readAliases(fsys, path.Join(path.Dir(f), "aliases.txt"), path.Base(f) == "config.json")
		if err != nil {
			return fmt.Errorf("%s%s: %w", label, f, err)
		}
		if err := c.addModel(s, aliases, source); err != nil {
			return err
		}
	}
	sort.Sort(byHWName{c})
	sort.Sort(byModelName{c})
	return nil
}

func globFS(fsys fs.FS, patterns ...string) ([]string, error) {
	var out []string
	for _, p := range patterns {
		m, err := fs.Glob(fsys, p)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	sort.Strings(out)
	return out, nil
}

// readAliases reads a model directory's aliases.txt (absent: none).
func readAliases(fsys fs.FS, name string, nested bool) ([]string, error) {
	if !nested {
		return nil, nil
	}
	b, err := fs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// addHardware registers an entry under its name and aliases. A key an
// earlier source holds moves to the new entry (with a note; taking the
// name shadows the whole entry); a key the same source holds twice is an
// error.
func (c *Catalog) addHardware(hw Hardware, source int) error {
	idx := len(c.hardware)
	keys, err := entryKeys(hw.Name, hw.Aliases, hardwareKey)
	if err != nil {
		return fmt.Errorf("%s: %w", hw.File, err)
	}
	for i, k := range keys {
		old, ok := c.hwKeys[k]
		if !ok || old == idx {
			continue
		}
		prev := c.hardware[old]
		if c.hwSource[old] == source {
			return fmt.Errorf("%s and %s both claim the hardware name %q", prev.File, hw.File, k)
		}
		if i == 0 || hardwareKey(prev.Name) == k {
			msg := fmt.Sprintf("hardware %s (%s) shadows %s (%s)", hw.Name, hw.File, prev.Name, prev.File)
			hw.Notes = append(hw.Notes, msg)
			c.notes = append(c.notes, msg)
			for pk, pi := range c.hwKeys {
				if pi == old {
					c.hwKeys[pk] = idx
				}
			}
		} else {
			msg := fmt.Sprintf("alias %q now names %s (%s), not %s", k, hw.Name, hw.File, prev.Name)
			hw.Notes = append(hw.Notes, msg)
			c.notes = append(c.notes, msg)
		}
	}
	for _, k := range keys {
		c.hwKeys[k] = idx
	}
	c.hardware = append(c.hardware, hw)
	c.hwSource = append(c.hwSource, source)
	c.dropUnreferenced()
	return nil
}

// addModel registers a shape under its name and aliases, with the same
// shadowing rules as addHardware.
func (c *Catalog) addModel(s Shape, aliases []string, source int) error {
	idx := len(c.models)
	keys, err := entryKeys(s.Name, aliases, modelKey)
	if err != nil {
		return fmt.Errorf("%s: %w", s.File, err)
	}
	for i, k := range keys {
		old, ok := c.modelKeys[k]
		if !ok || old == idx {
			continue
		}
		prev := c.models[old]
		if c.modelSource[old] == source {
			return fmt.Errorf("%s and %s both claim the model name %q", prev.File, s.File, k)
		}
		msg := fmt.Sprintf("alias %q now names model %s (%s), not %s", k, s.Name, s.File, prev.Name)
		if i == 0 || modelKey(prev.Name) == k {
			msg = fmt.Sprintf("model %s (%s) shadows %s (%s)", s.Name, s.File, prev.Name, prev.File)
			for pk, pi := range c.modelKeys {
				if pi == old {
					c.modelKeys[pk] = idx
				}
			}
		}
		s.Notes = append(s.Notes, msg)
		c.notes = append(c.notes, msg)
	}
	for _, k := range keys {
		c.modelKeys[k] = idx
	}
	c.models = append(c.models, s)
	c.modelSource = append(c.modelSource, source)
	c.dropUnreferenced()
	return nil
}

// entryKeys is an entry's lookup keys, its name's first; a key claimed
// twice within the entry is harmless, an empty one an error.
func entryKeys(name string, aliases []string, key func(string) string) ([]string, error) {
	var keys []string
	seen := map[string]bool{}
	for _, a := range append([]string{name}, aliases...) {
		k := key(a)
		if k == "" {
			return nil, fmt.Errorf("name or alias %q normalises to nothing", a)
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// dropUnreferenced removes shadowed entries (no key points to them) and
// renumbers the keys.
func (c *Catalog) dropUnreferenced() {
	c.hardware, c.hwSource = compact(c.hardware, c.hwSource, c.hwKeys)
	c.models, c.modelSource = compact(c.models, c.modelSource, c.modelKeys)
}

func compact[T any](entries []T, sources []int, keys map[string]int) ([]T, []int) {
	used := make([]bool, len(entries))
	for _, i := range keys {
		used[i] = true
	}
	remap := make([]int, len(entries))
	var outE []T
	var outS []int
	for i := range entries {
		if used[i] {
			remap[i] = len(outE)
			outE = append(outE, entries[i])
			outS = append(outS, sources[i])
		}
	}
	for k, i := range keys {
		keys[k] = remap[i]
	}
	return outE, outS
}

// byHWName and byModelName sort a catalogue's entries by name, keeping the
// key maps in step.
type byHWName struct{ c *Catalog }

func (s byHWName) Len() int { return len(s.c.hardware) }
func (s byHWName) Less(i, j int) bool {
	return strings.ToLower(s.c.hardware[i].Name) < strings.ToLower(s.c.hardware[j].Name)
}
func (s byHWName) Swap(i, j int) {
	c := s.c
	c.hardware[i], c.hardware[j] = c.hardware[j], c.hardware[i]
	c.hwSource[i], c.hwSource[j] = c.hwSource[j], c.hwSource[i]
	swapKeys(c.hwKeys, i, j)
}

type byModelName struct{ c *Catalog }

func (s byModelName) Len() int { return len(s.c.models) }
func (s byModelName) Less(i, j int) bool {
	return strings.ToLower(s.c.models[i].Name) < strings.ToLower(s.c.models[j].Name)
}
func (s byModelName) Swap(i, j int) {
	c := s.c
	c.models[i], c.models[j] = c.models[j], c.models[i]
	c.modelSource[i], c.modelSource[j] = c.modelSource[j], c.modelSource[i]
	swapKeys(c.modelKeys, i, j)
}

func swapKeys(keys map[string]int, i, j int) {
	for k, v := range keys {
		switch v {
		case i:
			keys[k] = j
		case j:
			keys[k] = i
		}
	}
}

// vendorWords are dropped when normalising a hardware name: they tell no
// device apart ("NVIDIA GeForce RTX 4090" is "RTX4090").
var vendorWords = map[string]bool{"nvidia": true, "amd": true, "geforce": true, "instinct": true, "tesla": true}

// hardwareKey normalises a hardware name: lower case, vendor words
// dropped, spaces, underscores, hyphens and other punctuation removed
// ("NVIDIA H100 80GB HBM3" and "H100_80GB_HBM3" are both "h10080gbhbm3").
func hardwareKey(name string) string {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	var b strings.Builder
	for _, w := range words {
		if !vendorWords[w] {
			b.WriteString(w)
		}
	}
	return b.String()
}

// modelKey normalises a model name: lower case, without an "org/" prefix.
func modelKey(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndex(n, "/"); i >= 0 {
		n = n[i+1:]
	}
	return n
}

// variantWords are fine-tune suffixes that do not change the architecture
// ("Llama-3.1-8B-Instruct" is shaped like "Llama-3.1-8B"); four-digit
// date tags ("-2507") are dropped too.
var variantWords = map[string]bool{"instruct": true, "chat": true, "it": true, "base": true, "hf": true}

// baseModelKey drops variant words and date tags from a model key.
func baseModelKey(key string) string {
	parts := strings.Split(key, "-")
	out := parts[:1]
	for _, p := range parts[1:] {
		if variantWords[p] || (len(p) == 4 && isDigits(p)) {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, "-")
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// LookupHardware resolves ref: the path of a spec file (*.yaml, *.yml, or
// any path that exists), or a catalogue name or alias in any spelling —
// names are compared after hardwareKey's normalisation (case, spaces,
// underscores, hyphens and vendor words ignored). An unknown name is an
// error listing the nearest known names and how to pass a spec file.
func (c *Catalog) LookupHardware(ref string) (Hardware, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Hardware{}, errors.New("model: hardware: empty name: give a catalogue name (steplab catalog hardware) or a spec file path")
	}
	if isPathRef(ref, false, ".yaml", ".yml") {
		return LoadHardwareFile(ref)
	}
	if i, ok := c.hwKeys[hardwareKey(ref)]; ok {
		return c.hardware[i], nil
	}
	names := make(map[string]string, len(c.hwKeys))
	for k, i := range c.hwKeys {
		names[k] = c.hardware[i].Name
	}
	return Hardware{}, fmt.Errorf("model: unknown hardware %q%s; list the catalogue with `steplab catalog hardware`, or pass the path of a spec file (hardware: my-gpu.yaml) or add one to a %s directory (docs/catalog.md)",
		ref, nearestNote(hardwareKey(ref), names), CatalogEnv)
}

// LookupModel resolves ref: the path of a config.json or of a directory
// holding one (any path that exists, or a *.json), or a catalogue name or
// alias, case-insensitively and with or without an "org/" prefix. A
// "-TP<n>" suffix sets the tensor-parallel degree ("Llama-3.1-70B-TP4").
// A name that matches no entry but does once fine-tune suffixes are
// dropped ("Qwen/Qwen3-30B-A3B-Instruct-2507" → Qwen3-30B-A3B) resolves
// to that entry with a note. An unknown name is an error listing the
// nearest known names.
func (c *Catalog) LookupModel(ref string) (Shape, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Shape{}, errors.New("model: model: empty name: give a catalogue name (steplab catalog models) or a config.json path")
	}
	if isPathRef(ref, true, ".json") {
		return LoadModelConfig(ref)
	}
	key, tp := modelKey(ref), 0
	if i := strings.LastIndex(key, "-tp"); i > 0 {
		if n, err := strconv.Atoi(key[i+3:]); err == nil {
			if n < 1 {
				return Shape{}, fmt.Errorf("model: %q: tensor parallel -TP%d must be >= 1", ref, n)
			}
			key, tp = key[:i], n
		}
	}
	s, ok := c.modelByKey(key, ref)
	if !ok {
		names := make(map[string]string, len(c.modelKeys))
		for k, i := range c.modelKeys {
			names[k] = c.models[i].Name
		}
		return Shape{}, fmt.Errorf("model: unknown model %q%s; list the catalogue with `steplab catalog models`, or pass the path of a Hugging Face config.json (or of its directory), or add one to a %s directory (docs/catalog.md)",
			ref, nearestNote(key, names), CatalogEnv)
	}
	if tp > 0 {
		s = s.WithTP(tp)
		if err := s.Validate(); err != nil {
			return Shape{}, err
		}
	}
	return s, nil
}

func (c *Catalog) modelByKey(key, ref string) (Shape, bool) {
	if i, ok := c.modelKeys[key]; ok {
		return c.models[i], true
	}
	base := baseModelKey(key)
	var found []int
	for k, i := range c.modelKeys {
		if baseModelKey(k) == base && !slices.Contains(found, i) {
			found = append(found, i)
		}
	}
	if len(found) != 1 {
		return Shape{}, false
	}
	s := c.models[found[0]]
	return s.withNote(fmt.Sprintf("%q resolved to catalogue model %s: fine-tune suffixes (instruct, chat, it, base, date tags) do not change the architecture", ref, s.Name)), true
}

// isPathRef reports whether ref names a file rather than a catalogue
// entry: it ends with one of exts, or is an existing regular file, or
// (configDir) a directory holding a config.json.
func isPathRef(ref string, configDir bool, exts ...string) bool {
	if st, err := os.Stat(ref); err == nil {
		if st.Mode().IsRegular() {
			return true
		}
		if _, err := os.Stat(filepath.Join(ref, "config.json")); configDir && st.IsDir() && err == nil {
			return true
		}
	}
	for _, e := range exts {
		if strings.HasSuffix(strings.ToLower(ref), e) {
			return true
		}
	}
	return false
}

// nearestNote is ": nearest known: A, B, C" for the (up to three) entry
// names whose keys are closest to key by edit distance.
func nearestNote(key string, names map[string]string) string {
	best := map[string]int{}
	for k, name := range names {
		d := editDistance(key, k)
		if old, ok := best[name]; !ok || d < old {
			best[name] = d
		}
	}
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for n, d := range best {
		cs = append(cs, cand{n, d})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].name < cs[j].name
	})
	var out []string
	for _, c := range cs[:min(3, len(cs))] {
		out = append(out, c.name)
	}
	if len(out) == 0 {
		return ""
	}
	return ": nearest known: " + strings.Join(out, ", ")
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

package catalog

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

	"github.com/steplab/steplab/internal/suggest"
)

// builtinFS holds the built-in catalogue: hardware/*.yaml spec files and
// models/<name>/config.json Hugging Face configs (SOURCES.md beside them
// says where each came from).
//
//go:embed data
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
	hardware registry[Hardware]
	models   registry[Shape]
	notes    []string
}

// LoadCatalog reads the built-in catalogue and then dirs.
func LoadCatalog(dirs ...string) (*Catalog, error) {
	c := &Catalog{
		hardware: registry[Hardware]{kind: "hardware", key: hardwareKey,
			name: func(h *Hardware) string { return h.Name }, file: func(h *Hardware) string { return h.File },
			note: func(h *Hardware, n string) { h.Notes = append(h.Notes, n) }},
		models: registry[Shape]{kind: "model", key: modelKey,
			name: func(s *Shape) string { return s.Name }, file: func(s *Shape) string { return s.File },
			note: func(s *Shape, n string) { s.Notes = append(s.Notes, n) }},
	}
	sub, err := fs.Sub(builtinFS, "data")
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
func (c *Catalog) Hardware() []Hardware { return append([]Hardware(nil), c.hardware.entries...) }

// Models lists the catalogue's models, sorted by name.
func (c *Catalog) Models() []Shape { return append([]Shape(nil), c.models.entries...) }

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
		if err := c.hardware.add(hw, hw.Aliases, source, &c.notes); err != nil {
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
		if err := c.models.add(s, aliases, source, &c.notes); err != nil {
			return err
		}
	}
	c.hardware.sortByName()
	c.models.sortByName()
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

// registry holds one kind of catalogue entry under lookup keys (the
// normalised name and aliases of each).
type registry[T any] struct {
	kind    string
	entries []T
	sources []int          // the source each entry came from (0: built-in)
	keys    map[string]int // key → entry
	key     func(string) string
	name    func(*T) string
	file    func(*T) string
	note    func(*T, string)
}

// add registers an entry under its name and aliases. A key an earlier
// source holds moves to the new entry, with a note (taking the name
// shadows the whole entry, its aliases included); a key the same source
// holds twice is an error.
func (r *registry[T]) add(e T, aliases []string, source int, notes *[]string) error {
	if r.keys == nil {
		r.keys = map[string]int{}
	}
	idx := len(r.entries)
	keys, err := entryKeys(r.name(&e), aliases, r.key)
	if err != nil {
		return fmt.Errorf("%s: %w", r.file(&e), err)
	}
	for i, k := range keys {
		old, ok := r.keys[k]
		if !ok || old == idx {
			continue
		}
		prev := &r.entries[old]
		if r.sources[old] == source {
			return fmt.Errorf("%s and %s both claim the %s name %q", r.file(prev), r.file(&e), r.kind, k)
		}
		msg := fmt.Sprintf("alias %q now names %s %s (%s), not %s", k, r.kind, r.name(&e), r.file(&e), r.name(prev))
		if i == 0 || r.key(r.name(prev)) == k {
			msg = fmt.Sprintf("%s %s (%s) shadows %s (%s)", r.kind, r.name(&e), r.file(&e), r.name(prev), r.file(prev))
			for pk, pi := range r.keys {
				if pi == old {
					r.keys[pk] = idx
				}
			}
		}
		r.note(&e, msg)
		*notes = append(*notes, msg)
	}
	for _, k := range keys {
		r.keys[k] = idx
	}
	r.entries = append(r.entries, e)
	r.sources = append(r.sources, source)
	r.dropUnreferenced()
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

// dropUnreferenced removes shadowed entries (no key points to them).
func (r *registry[T]) dropUnreferenced() {
	used := make([]bool, len(r.entries))
	for _, i := range r.keys {
		used[i] = true
	}
	var order []int
	for i, u := range used {
		if u {
			order = append(order, i)
		}
	}
	r.reorder(order)
}

// sortByName orders the entries by name, case-insensitively.
func (r *registry[T]) sortByName() {
	order := make([]int, len(r.entries))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return strings.ToLower(r.name(&r.entries[order[a]])) < strings.ToLower(r.name(&r.entries[order[b]]))
	})
	r.reorder(order)
}

// reorder keeps the entries at the indices order lists, in that order,
// and renumbers the keys.
func (r *registry[T]) reorder(order []int) {
	at := make(map[int]int, len(order))
	entries, sources := make([]T, len(order)), make([]int, len(order))
	for n, i := range order {
		at[i] = n
		entries[n], sources[n] = r.entries[i], r.sources[i]
	}
	for k, i := range r.keys {
		r.keys[k] = at[i]
	}
	r.entries, r.sources = entries, sources
}

// lookup is the entry under key.
func (r *registry[T]) lookup(key string) (T, bool) {
	i, ok := r.keys[key]
	if !ok {
		var zero T
		return zero, false
	}
	return r.entries[i], true
}

// nearest is ": nearest known: A, B, C" for the (up to three) entries
// whose keys are closest to key by edit distance.
func (r *registry[T]) nearest(key string) string {
	best := map[string]int{}
	for k, i := range r.keys {
		name, d := r.name(&r.entries[i]), suggest.Distance(key, k)
		if old, ok := best[name]; !ok || d < old {
			best[name] = d
		}
	}
	names := make([]string, 0, len(best))
	for n := range best {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if best[names[i]] != best[names[j]] {
			return best[names[i]] < best[names[j]]
		}
		return names[i] < names[j]
	})
	if len(names) == 0 {
		return ""
	}
	return ": nearest known: " + strings.Join(names[:min(3, len(names))], ", ")
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
		return Hardware{}, errors.New("model: empty hardware name: give a catalogue name (steplab catalog hardware) or a spec file path")
	}
	if isPathRef(ref, false, ".yaml", ".yml") {
		return LoadHardwareFile(ref)
	}
	if hw, ok := c.hardware.lookup(hardwareKey(ref)); ok {
		return hw, nil
	}
	return Hardware{}, fmt.Errorf("model: unknown hardware %q%s; list the catalogue with `steplab catalog hardware`, or pass the path of a spec file (hardware: my-gpu.yaml) or add one to a %s directory (docs/catalog.md)",
		ref, c.hardware.nearest(hardwareKey(ref)), CatalogEnv)
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
		return Shape{}, errors.New("model: empty model name: give a catalogue name (steplab catalog models) or a config.json path")
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
		return Shape{}, fmt.Errorf("model: unknown model %q%s; list the catalogue with `steplab catalog models`, or pass the path of a Hugging Face config.json (or of its directory), or add one to a %s directory (docs/catalog.md)",
			ref, c.models.nearest(key), CatalogEnv)
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
	if s, ok := c.models.lookup(key); ok {
		return s, true
	}
	base := baseModelKey(key)
	var found []int
	for k, i := range c.models.keys {
		if baseModelKey(k) == base && !slices.Contains(found, i) {
			found = append(found, i)
		}
	}
	if len(found) != 1 {
		return Shape{}, false
	}
	s := c.models.entries[found[0]]
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

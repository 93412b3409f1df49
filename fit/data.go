package fit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
)

// Data is a set of steps ready to fit or evaluate: their features and
// measured durations (ns). StepIDs and Kinds are optional (nil, or one per
// row); they name rows in errors and reports. Kinds default to
// Features.Kind().
type Data struct {
	Features []fpm.Features
	Y        []float64
	StepIDs  []int64
	Kinds    []string
	// Benchmark marks the rows that are measured benchmark points
	// (benchmark_id ≥ 0, role measured); nil when none is known. The
	// recipe interpolates between them.
	Benchmark []bool
	// Target names the timing column Y came from (e.g. "gpu_time_ns").
	Target string
	// Unrecorded counts, per term, the rows whose source left the steps
	// column behind it Unknown (num_new_reqs, payload_new_bytes = −1, as
	// an imported Dynamo FPM stream does). FeaturesOf reads those as 0 so
	// that predictions stay finite; a fit must not price them, so Linear
	// drops or refuses such terms. Subset keeps the counts of the whole.
	Unrecorded map[string]int
	// GraphTokens is the largest CUDA graph the datasets' engine captured
	// (manifest cuda_graph_capture_sizes): a prefill or mixed step of more
	// scheduled tokens runs eagerly, so FitRecipe bounds regimes of
	// scheduled_tokens there. 0: not recorded, or the datasets disagree.
	GraphTokens int
	// SMs and KVHeads are the GPU's SM count and the model's KV heads per
	// GPU (manifest.DecodeAttentionOf), when the datasets' manifests
	// agree: what the decode attention term of the recipe
	// (fpm.TermDecodeAttnKV) is written with. 0: not known.
	SMs, KVHeads int
	// AttnPerSM is the hardware catalogue's decode attention programs per
	// SM of that GPU (catalog.Hardware.AttnProgramsPerSM), 0 when it has
	// none, measured with AttnTile-token KV tiles (0: not recorded).
	AttnPerSM, AttnTile int
	// Kernel is the decode attention kernel's split-KV launch rule, when
	// the manifests agree on it (zero: not known, no split priced);
	// KernelSource says where it was read (manifest.DecodeRule.Source).
	Kernel       fpm.DecodeKernel
	KernelSource string
	// Experts is the experts-reached term of the model's mixture of
	// experts (features.ExpertsTerm), when the datasets' manifests agree
	// on it: what the recipe's fpm.TermExpertsReached is written with. ""
	// for a dense model or where they disagree. ExpertsNotes are what it
	// assumed or why it is missing, for the fit to warn with.
	Experts      string
	ExpertsNotes []string
}

// Len is the number of rows.
func (d *Data) Len() int { return len(d.Y) }

// Kind returns the step kind of row i.
func (d *Data) Kind(i int) string {
	if i < len(d.Kinds) && d.Kinds[i] != "" {
		return d.Kinds[i]
	}
	return d.Features[i].Kind()
}

// StepID returns the step_id of row i, or −1.
func (d *Data) StepID(i int) int64 {
	if i < len(d.StepIDs) {
		return d.StepIDs[i]
	}
	return -1
}

// Subset returns the rows idx (copied).
func (d *Data) Subset(idx []int) *Data {
	out := &Data{Features: make([]fpm.Features, len(idx)), Y: make([]float64, len(idx)), Target: d.Target, Unrecorded: d.Unrecorded,
		GraphTokens: d.GraphTokens, SMs: d.SMs, KVHeads: d.KVHeads, AttnPerSM: d.AttnPerSM, AttnTile: d.AttnTile, Kernel: d.Kernel,
		KernelSource: d.KernelSource, Experts: d.Experts, ExpertsNotes: d.ExpertsNotes}
	if d.StepIDs != nil {
		out.StepIDs = make([]int64, len(idx))
	}
	if d.Kinds != nil {
		out.Kinds = make([]string, len(idx))
	}
	if d.Benchmark != nil {
		out.Benchmark = make([]bool, len(idx))
	}
	for k, i := range idx {
		out.Features[k], out.Y[k] = d.Features[i], d.Y[i]
		if d.StepIDs != nil {
			out.StepIDs[k] = d.StepIDs[i]
		}
		if d.Kinds != nil {
			out.Kinds[k] = d.Kinds[i]
		}
		if d.Benchmark != nil {
			out.Benchmark[k] = d.Benchmark[i]
		}
	}
	return out
}

// Design evaluates the basis terms on every row and checks the result
// (empty, bad timings or features, too few rows, all-zero or constant
// terms; the rank is checked by the solvers). With relative set, rows are
// weighted 1/y² so that least squares minimises squared relative error (a
// 1 ms miss on a 2 ms step counts as much as 50 ms on a 100 ms step).
func (d *Data) Design(terms []string, relative bool) (*Design, error) {
	ds, err := d.design(terms, relative)
	if err != nil {
		return nil, err
	}
	if err := checkDesign(ds); err != nil {
		return nil, err
	}
	return ds, nil
}

func (d *Data) design(terms []string, relative bool) (*Design, error) {
	if d.Len() == 0 {
		return nil, dataErr(ErrEmptySelection, "no rows to fit")
	}
	if len(d.Features) != d.Len() {
		return nil, fmt.Errorf("fit: data has %d feature rows for %d timings", len(d.Features), d.Len())
	}
	b, err := fpm.NewBasis(terms)
	if err != nil {
		return nil, err
	}
	n, p := d.Len(), b.Len()
	ds := &Design{Terms: append([]string(nil), terms...), X: make([]float64, n*p), Y: d.Y, StepIDs: d.StepIDs}
	for i, f := range d.Features {
		b.Eval(f, ds.X[i*p:(i+1)*p])
	}
	if relative {
		ds.W = make([]float64, n)
		for i, y := range d.Y {
			if y > 0 && !math.IsInf(y, 0) {
				ds.W[i] = 1 / (y * y)
			}
		}
	}
	return ds, nil
}

// Selection chooses the rows of a steps table to fit or evaluate on.
type Selection struct {
	// Roles to keep; nil means DefaultRoles (measured and production).
	// Scaffolding rows (warm-ups, admission steps a policy discards) are
	// never fitted: naming that role is an error.
	Roles []string
	// Kinds to keep (prefill, decode, mixed); nil means all.
	Kinds []string
	// AllowInvalid keeps rows marked valid=false (by default they are
	// dropped).
	AllowInvalid bool
	// Half keeps one half of the rows (1 or 2, HalfOf their step_id); 0
	// keeps all. Two commands given the two halves see disjoint rows: a
	// calibration split and the data it is tested on.
	Half int
	// Uniform keeps only the rows a uniform B × context benchmark records
	// (Dynamo's FPM self-benchmark, AIConfigurator's grids): prefill steps,
	// and decode steps whose requests all read one context. Mixed steps and
	// ragged decode batches are left out: what a fit from such a grid
	// alone predicts of them is what it is measured on.
	Uniform bool
}

// UniformStep says whether a step is one a uniform benchmark records: a
// prefill step, or a decode step whose contexts do not vary (its variance
// recorded as 0).
func UniformStep(st *datasets.Step) bool {
	switch st.Kind {
	case datasets.KindPrefill:
		return true
	case datasets.KindDecode:
		return st.VarDecodeKVTokens == 0
	}
	return false
}

// HalfOf assigns a step to half 1 or 2 by a hash of its step_id
// (SplitMix64's finaliser): fixed per row, whatever the other rows, and
// close to an even split on any run of ids.
func HalfOf(stepID int64) int {
	z := uint64(stepID) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return 1 + int((z^z>>31)&1)
}

// DefaultRoles are the roles fitted when none are named.
var DefaultRoles = []string{datasets.RoleMeasured, datasets.RoleProduction}

// Check refuses unknown roles and kinds, and the scaffolding role.
func (s Selection) Check() error {
	for _, r := range s.Roles {
		switch r {
		case datasets.RoleMeasured, datasets.RoleProduction:
		case datasets.RoleScaffolding:
			return fmt.Errorf("fit: selection: role %q is never fitted (its rows are warm-ups or admission steps, not the steps being modelled)", r)
		default:
			return fmt.Errorf("fit: selection: unknown role %q (want %s or %s)", r, datasets.RoleMeasured, datasets.RoleProduction)
		}
	}
	for _, k := range s.Kinds {
		switch k {
		case datasets.KindPrefill, datasets.KindDecode, datasets.KindMixed:
		default:
			return fmt.Errorf("fit: selection: unknown kind %q (want prefill, decode or mixed)", k)
		}
	}
	if s.Half < 0 || s.Half > 2 {
		return fmt.Errorf("fit: selection: half %d: want 1 or 2 (0 for all rows)", s.Half)
	}
	return nil
}

// Record returns the selection as recorded in a model artifact.
func (s Selection) Record(policy string) fpm.Selection {
	roles := s.Roles
	if roles == nil {
		roles = DefaultRoles
	}
	kinds := s.Kinds
	if kinds == nil {
		kinds = []string{datasets.KindPrefill, datasets.KindDecode, datasets.KindMixed}
	}
	return fpm.Selection{Roles: slices.Clone(roles), Kinds: slices.Clone(kinds), Valid: !s.AllowInvalid, Policy: policy, Half: s.Half, Uniform: s.Uniform}
}

// Keep says whether a step passes the selection.
func (s Selection) Keep(st *datasets.Step) bool {
	roles := s.Roles
	if roles == nil {
		roles = DefaultRoles
	}
	if st.Role == datasets.RoleScaffolding || !slices.Contains(roles, st.Role) {
		return false
	}
	if s.Kinds != nil && !slices.Contains(s.Kinds, st.Kind) {
		return false
	}
	if s.Half != 0 && HalfOf(st.StepID) != s.Half {
		return false
	}
	if s.Uniform && !UniformStep(st) {
		return false
	}
	return st.Valid || s.AllowInvalid
}

// Select returns the steps that pass the selection; none is an
// ErrEmptySelection that says how many rows each filter removed.
func Select(steps []datasets.Step, s Selection) ([]datasets.Step, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	var out []datasets.Step
	var byRole, byKind, byHalf, byUniform, byValid int
	roles := s.Roles
	if roles == nil {
		roles = DefaultRoles
	}
	for i := range steps {
		st := &steps[i]
		switch {
		case st.Role == datasets.RoleScaffolding || !slices.Contains(roles, st.Role):
			byRole++
		case s.Kinds != nil && !slices.Contains(s.Kinds, st.Kind):
			byKind++
		case s.Half != 0 && HalfOf(st.StepID) != s.Half:
			byHalf++
		case s.Uniform && !UniformStep(st):
			byUniform++
		case !st.Valid && !s.AllowInvalid:
			byValid++
		default:
			out = append(out, *st)
		}
	}
	if len(out) == 0 {
		return nil, dataErr(ErrEmptySelection, fmt.Sprintf("no rows of %d left: %d removed by role (keeping %v), %d by kind (keeping %v), %d by half, %d not uniform, %d invalid", len(steps), byRole, roles, byKind, s.Kinds, byHalf, byUniform, byValid))
	}
	return out, nil
}

// unrecordedTerms counts every term a row's unknown features leave unknown.
func (d *Data) unrecordedTerms(f fpm.Features) {
	for _, name := range fpm.KnownTerms() {
		if fn, err := fpm.Term(name); err == nil && math.IsNaN(fn(f)) {
			d.unrecorded(name)
		}
	}
}

func (d *Data) unrecorded(term string) {
	if d.Unrecorded == nil {
		d.Unrecorded = map[string]int{}
	}
	d.Unrecorded[term]++
}

// Timing targets of DataFromSteps.
const (
	TargetGPU  = "gpu_time_ns"  // device time of the forward pass
	TargetWall = "wall_time_ns" // inter-update period (Dynamo's FPM wall_time)
	// TargetAuto takes gpu_time_ns when every row has it, wall_time_ns
	// otherwise (never a mix of the two).
	TargetAuto = "auto"
)

// DataFromSteps builds fitting data from (selected) steps, reading the
// timing named by target (TargetGPU, TargetWall or TargetAuto) and the
// features of each row (features.Of; complete older rows from their
// step_requests first with features.CompleteSteps, as LoadDatasets does).
// A row whose timing is unknown (−1) or not positive is an ErrBadTarget
// naming the row and its step_id.
func DataFromSteps(steps []datasets.Step, target string) (*Data, error) {
	b := newBuilder(0, 0)
	for i := range steps {
		b.add(&steps[i])
	}
	return b.finish(target)
}

// dataBuilder gathers fitting data a step at a time, so that a table can
// be streamed through it without holding its rows: it keeps both timings
// until finish knows which one the target reads. With a sampler it keeps
// a bounded uniform sample of the rows instead of all of them.
type dataBuilder struct {
	d         Data
	gpu, wall []float64
	// read counts the rows added; orig[i] is the number of the row held in
	// builder row i (kept only when sampling).
	read   int
	orig   []int
	sample *sampler
	// What finish needs to know of every row, sampled or not: whether any
	// gpu_time_ns is unknown, and the first non-positive timing of each.
	gpuUnknown      bool
	badGPU, badWall badRow
}

// badRow is the first row whose timing cannot be fitted (row < 0: none).
type badRow struct {
	row    int
	stepID int64
	value  int64
}

func newBuilder(perKind int, seed uint64) *dataBuilder {
	b := &dataBuilder{badGPU: badRow{row: -1}, badWall: badRow{row: -1}}
	if perKind > 0 {
		b.sample = newSampler(perKind, seed)
	}
	return b
}

func (b *dataBuilder) len() int { return len(b.d.StepIDs) }

func (b *dataBuilder) add(st *datasets.Step) {
	f := features.Of(st)
	if len(f.Unknown()) > 0 {
		b.d.unrecordedTerms(f)
	}
	row := b.read
	b.read++
	b.watch(row, st)
	kind, bench := internKind(st.Kind), st.BenchmarkID >= 0 && st.Role == datasets.RoleMeasured
	slot := appendRow
	if b.sample != nil {
		slot = b.sample.place(kind, bench, b.len())
	}
	switch slot {
	case skipRow:
		return
	case appendRow:
		b.d.Features = append(b.d.Features, f)
		b.gpu, b.wall = append(b.gpu, float64(st.GPUTimeNs)), append(b.wall, float64(st.WallTimeNs))
		b.d.StepIDs = append(b.d.StepIDs, st.StepID)
		b.d.Kinds = append(b.d.Kinds, kind)
		b.d.Benchmark = append(b.d.Benchmark, bench)
		if b.sample != nil {
			b.orig = append(b.orig, row)
		}
	default:
		b.d.Features[slot], b.gpu[slot], b.wall[slot] = f, float64(st.GPUTimeNs), float64(st.WallTimeNs)
		b.d.StepIDs[slot], b.d.Kinds[slot], b.d.Benchmark[slot], b.orig[slot] = st.StepID, kind, bench, row
	}
}

// watch notes what finish must know of row, whether or not it is kept.
func (b *dataBuilder) watch(row int, st *datasets.Step) {
	b.gpuUnknown = b.gpuUnknown || st.GPUTimeNs < 0
	if st.GPUTimeNs <= 0 && b.badGPU.row < 0 {
		b.badGPU = badRow{row, st.StepID, st.GPUTimeNs}
	}
	if st.WallTimeNs <= 0 && b.badWall.row < 0 {
		b.badWall = badRow{row, st.StepID, st.WallTimeNs}
	}
}

// internKind shares the known kinds' strings among rows, which would
// otherwise each hold a copy read from the file.
func internKind(k string) string {
	for _, known := range []string{datasets.KindDecode, datasets.KindMixed, datasets.KindPrefill} {
		if k == known {
			return known
		}
	}
	return k
}

func (b *dataBuilder) finish(target string) (*Data, error) {
	if b.len() == 0 {
		return nil, dataErr(ErrEmptySelection, "no steps")
	}
	if target == "" || target == TargetAuto {
		target = TargetGPU
		if b.gpuUnknown {
			target = TargetWall
		}
	}
	d := &b.d
	bad := b.badGPU
	switch target {
	case TargetGPU:
		d.Y = b.gpu
	case TargetWall:
		d.Y, bad = b.wall, b.badWall
	default:
		return nil, fmt.Errorf("fit: unknown target %q (want %s, %s or %s)", target, TargetGPU, TargetWall, TargetAuto)
	}
	b.gpu, b.wall = nil, nil
	d.Target = target
	if bad.row >= 0 {
		e := dataErr(ErrBadTarget, fmt.Sprintf("%s is %d (unknown or not positive)", target, bad.value))
		e.Row, e.StepID = bad.row, bad.stepID
		return nil, e
	}
	if b.sampled() {
		// A reservoir holds its rows out of order: put them back in the
		// order they were read, which the folds and reports see.
		perm := make([]int, b.len())
		for i := range perm {
			perm[i] = i
		}
		slices.SortFunc(perm, func(i, j int) int { return b.orig[i] - b.orig[j] })
		out := d.Subset(perm)
		for i, p := range perm {
			perm[i] = b.orig[p]
		}
		b.orig = perm
		return out, nil
	}
	return d, nil
}

// sampled says whether the builder dropped rows.
func (b *dataBuilder) sampled() bool { return b.read > b.len() }

// offsets maps the first row of each dataset (counted in rows read) to
// the first row of the dataset in the data finish returned.
func (b *dataBuilder) offsets(first []int) []int {
	if !b.sampled() {
		return first
	}
	out := make([]int, len(first))
	for i, f := range first {
		out[i], _ = slices.BinarySearch(b.orig, f)
	}
	return out
}

const (
	appendRow = -1
	skipRow   = -2
)

// sampler keeps at most perKind rows of each stratum (a step kind, its
// measured benchmark points apart, so that a grid is not drowned by the
// traffic beside it) as a uniform reservoir (Vitter's algorithm R), with
// its own seeded generator: the sample depends only on the rows, their
// order and the seed. Under perKind rows a stratum keeps every row, so a
// dataset that fits in the bound is fitted exactly as without one.
type sampler struct {
	perKind int
	seed    uint64
	rng     *rand.Rand
	strata  []stratum
}

type stratum struct {
	kind  string
	bench bool
	seen  int
	slots []int // builder rows holding this stratum's sample
}

func newSampler(perKind int, seed uint64) *sampler {
	return &sampler{perKind: perKind, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x73616d706c65))}
}

// place says where the next row of (kind, bench) goes: appendRow, skipRow
// or the builder row it replaces; next is the builder row an append makes.
func (s *sampler) place(kind string, bench bool, next int) int {
	var st *stratum
	for i := range s.strata {
		if s.strata[i].kind == kind && s.strata[i].bench == bench {
			st = &s.strata[i]
			break
		}
	}
	if st == nil {
		s.strata = append(s.strata, stratum{kind: kind, bench: bench})
		st = &s.strata[len(s.strata)-1]
	}
	st.seen++
	if len(st.slots) < s.perKind {
		st.slots = append(st.slots, next)
		return appendRow
	}
	if j := s.rng.IntN(st.seen); j < s.perKind {
		return st.slots[j]
	}
	return skipRow
}

package fit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/catalog/manifest"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
)

// DecodeTerms is the basis of a decode-only model (a decode benchmark grid,
// or the decode steps of a trace): a fixed cost, a per-request cost and a
// per-KV-token attention read. The padded batch is left out because on a
// grid of CUDA-graph sizes it equals decode_requests (collinear).
var DecodeTerms = []string{fpm.TermConst, fpm.TermDecodeRequests, fpm.TermDecodeKVTokens}

// ResolveTerms turns a --terms value into term names: "" or "default" is
// fpm.DefaultTerms, "decode" is DecodeTerms, anything else a
// comma-separated list of model term names (checked).
func ResolveTerms(s string) ([]string, error) {
	switch strings.TrimSpace(s) {
	case "", "default":
		return slices.Clone(fpm.DefaultTerms), nil
	case "decode":
		return slices.Clone(DecodeTerms), nil
	}
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	if _, err := fpm.NewBasis(out); err != nil {
		return nil, err
	}
	return out, nil
}

// DefaultMaxRowsPerKind is `steplab fit`'s bound on the rows of a step
// kind it keeps: a fit's memory grows about 0.6 kB a row, and a million
// rows of a kind pin its coefficients far tighter than the steps' own
// scatter, while the longest committed datasets stay under it.
const DefaultMaxRowsPerKind = 1_000_000

// LoadOptions says which rows of which timing LoadDatasets reads.
type LoadOptions struct {
	Selection Selection
	// Target is TargetAuto (default), TargetGPU or TargetWall. With several
	// datasets, auto resolves once over all selected rows.
	Target string
	// BenchmarkCoords reads each measured decode benchmark point at the
	// coordinate the benchmark recorded — B requests decoding, reading
	// their context — whichever engine step measured it. Under the
	// admission_step policy that step is the batch's admission step, which
	// the steps table (rightly) classifies as prefill: B new requests
	// computing one token each on top of their resident context. A
	// benchmark database (Dynamo's, AIConfigurator's) stores it as a decode
	// point, contamination included; this option reproduces what a model
	// fitted to such a database sees (docs/architecture.md#r3-admission-step-contamination). Rows it re-reads
	// become kind decode with num_decode_requests = B and
	// sum_decode_kv_tokens = the context they read; their admission
	// columns (num_new_reqs, payload) are kept. Steady-state points are
	// decode steps already and are not touched.
	BenchmarkCoords bool
	// KeepSteps keeps the selected rows themselves in Loaded.Steps; without
	// it only their features and timing are kept.
	KeepSteps bool
	// MaxRowsPerKind bounds the rows kept of each step kind (measured
	// benchmark points counted apart) to a uniform sample drawn with
	// SampleSeed, so that memory is bounded by it rather than by the
	// datasets' length; 0 keeps every selected row. Loaded.Sample says
	// when rows were left out. It excludes KeepSteps.
	MaxRowsPerKind int
	SampleSeed     uint64
	// Policy says which datasets' decode measurement policies are fitted
	// together (measurementPolicies): "" reads every dataset (eval, check);
	// PolicyAuto (fit's default) keeps the steady-state datasets of a mix
	// with admission-step ones and leaves those out; PolicyAll pools them;
	// a policy name keeps the datasets of that policy alone.
	Policy string
}

// Measurement-policy choices of LoadOptions.Policy.
const (
	PolicyAuto = "auto"
	PolicyAll  = "all"
)

// Loaded is the result of LoadDatasets: the selected rows of every
// dataset, concatenated, and their provenance.
type Loaded struct {
	// Steps are the selected rows, with LoadOptions.KeepSteps.
	Steps []datasets.Step
	Data  *Data
	// Refs identify the datasets (id, path, SHA-256, selected rows).
	Refs []fpm.DatasetRef
	// Offsets[i] is the first row of dataset i in Steps and Data.
	Offsets []int
	// Policy is the decode measurement policy of the data ("" when no
	// manifest says; "mixed" when the datasets disagree).
	Policy string
	// Warnings are the loud notes of the load (admission-step data); each
	// has been logged with slog.Warn too.
	Warnings []string
	// Relabelled counts the rows BenchmarkCoords re-read as decode points.
	Relabelled int
	// Kinds are the step kinds the selected rows have (prefill, decode,
	// mixed order): what a model fitted on them has seen.
	Kinds []string
	// Sample is set when MaxRowsPerKind left rows out: Data is a uniform
	// sample of the selected rows.
	Sample *fpm.Sample
	// FittedOn are the distinct settings the datasets' manifests record
	// (fpm.Training.FittedOn).
	FittedOn []catalog.FittedOn
	// LeftOut names the datasets LoadOptions.Policy left out, each as
	// "PATH (measurement_policy.decode POLICY)".
	LeftOut []string
}

// Record returns the selection s as recorded in a model artifact or a
// report: its kinds are the ones the loaded rows have, not the ones the
// selection would have let through.
func (l *Loaded) Record(s Selection) fpm.Selection {
	rec := s.Record(l.Policy)
	rec.Kinds = slices.Clone(l.Kinds)
	rec.LeftOut = slices.Clone(l.LeftOut)
	rec.Sample = l.Sample
	return rec
}

// ProvenanceNotes are fpm.ProvenanceNotes of the artifact a (named
// name) on the loaded datasets' settings, each logged with slog.Warn.
func (l *Loaded) ProvenanceNotes(name string, a *fpm.Artifact) []string {
	notes := fpm.ProvenanceNotes(name, a, l.FittedOn...)
	for _, n := range notes {
		slog.Warn("model fitted elsewhere", "note", n)
	}
	return notes
}

// DatasetOf names the dataset of row i (its id).
func (l *Loaded) DatasetOf(i int) string {
	k := sort.SearchInts(l.Offsets, i+1) - 1
	if k < 0 || k >= len(l.Refs) {
		return ""
	}
	return l.Refs[k].ID
}

// AdmissionWarning is the warning for a dataset whose manifest says its
// decode points were measured on the admission step.
func AdmissionWarning(path string) string {
	return fmt.Sprintf("%s: measurement_policy.decode is admission_step: its decode points were measured on the step that admits the batch, "+
		"whose time includes admission work (full prompts shipped through scheduled_new_reqs, first-step worker bookkeeping) that production decode steps never pay; "+
		"a model fitted to them over-predicts real decode traffic, more so at large batch and context, and more such points make it worse (docs/architecture.md#r3-admission-step-contamination). "+
		"Re-measure with the steady_state_second_step policy", path)
}

// LoadDatasets opens each dataset directory, reads its steps table, keeps
// the rows the selection passes (after BenchmarkCoords) and builds the
// fitting data. A manifest whose measurement_policy.decode is
// admission_step gets a loud warning: slog.Warn, and Loaded.Warnings for
// the JSON result. An empty selection over all datasets is
// ErrEmptySelection, naming what each filter removed.
func LoadDatasets(paths []string, opt LoadOptions) (*Loaded, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("fit: no dataset given")
	}
	if err := opt.Selection.Check(); err != nil {
		return nil, err
	}
	if opt.KeepSteps && opt.MaxRowsPerKind > 0 {
		return nil, fmt.Errorf("fit: KeepSteps keeps every selected row; it cannot be combined with MaxRowsPerKind")
	}
	l := &Loaded{}
	opened := make([]*datasets.Dataset, len(paths))
	for i, p := range paths {
		d, err := datasets.Open(p)
		if err != nil {
			return nil, fmt.Errorf("fit: %w", err) // it names the dataset
		}
		opened[i] = d
	}
	keep, err := measurementPolicies(paths, opened, opt.Policy, l)
	if err != nil {
		return nil, err
	}
	policies := map[string]bool{}
	var settings engineSettings
	var total int
	b := newBuilder(opt.MaxRowsPerKind, opt.SampleSeed)
	for i, p := range paths {
		d := opened[i]
		if !keep[i] {
			continue
		}
		if !d.Has(datasets.TableSteps) {
			return nil, fmt.Errorf("fit: dataset %s has no %s table (fitting needs one row per engine step)", p, datasets.TableSteps)
		}
		ref, err := datasetRef(d)
		if err != nil {
			return nil, err
		}
		admission := false
		if m := d.Manifest; m != nil && m.MeasurementPolicy != nil && m.MeasurementPolicy.Decode != "" {
			policies[m.MeasurementPolicy.Decode] = true
			if m.MeasurementPolicy.Decode == datasets.PolicyAdmissionStep {
				admission = true
				w := AdmissionWarning(p)
				slog.Warn("admission-step decode measurements", "dataset", p, "warning", w)
				l.Warnings = append(l.Warnings, w)
			}
		}
		l.FittedOn = fpm.AddFittedOn(l.FittedOn, manifest.FittedOn(d.Manifest))
		settings.add(d.Manifest)
		first := b.read
		l.Offsets = append(l.Offsets, first)
		n, err := loadSteps(d, b, l, opt, admission)
		if err != nil {
			return nil, fmt.Errorf("fit: dataset %s: %w", p, err)
		}
		total += n
		ref.Rows = int64(b.read - first)
		l.Refs = append(l.Refs, ref)
	}
	switch len(policies) {
	case 0:
	case 1:
		for k := range policies {
			l.Policy = k
		}
	default:
		l.Policy = "mixed"
	}
	if b.read == 0 {
		return nil, dataErr(ErrEmptySelection, fmt.Sprintf("no rows of %d in %d dataset(s) pass the selection (roles %v, kinds %v, valid only %v)",
			total, len(paths), orDefault(opt.Selection.Roles, DefaultRoles), orDefault(opt.Selection.Kinds, []string{"all"}), !opt.Selection.AllowInvalid))
	}
	for _, k := range []string{datasets.KindPrefill, datasets.KindDecode, datasets.KindMixed} {
		if slices.Contains(b.d.Kinds, k) {
			l.Kinds = append(l.Kinds, k)
		}
	}
	data, err := b.finish(opt.Target)
	if err != nil {
		if de, ok := err.(*DataError); ok && de.Row >= 0 {
			de.Detail += " in dataset " + l.DatasetOf(de.Row)
		}
		return nil, err
	}
	settings.apply(data)
	if b.sampled() {
		l.Offsets = b.offsets(l.Offsets)
		l.Sample = &fpm.Sample{PerKind: opt.MaxRowsPerKind, Seed: opt.SampleSeed, Selected: int64(b.read), Kept: int64(data.Len())}
	}
	l.Data = data
	return l, nil
}

// loadSteps streams d's steps table through b, a batch of rows at a time
// (a simulated day is millions of steps; only their features are kept):
// completes the rows an older writer left without feature columns from
// step_requests, re-reads admission-step benchmark points (BenchmarkCoords)
// and keeps the rows the selection passes. It returns the rows read.
func loadSteps(d *datasets.Dataset, b *dataBuilder, l *Loaded, opt LoadOptions, admission bool) (int, error) {
	s, err := datasets.Scan[datasets.Step](d, datasets.TableSteps)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	var join *features.RequestJoin
	joining := false
	defer func() { join.Close() }()
	buf := make([]datasets.Step, 4096)
	total := 0
	for {
		n, err := s.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return total, err
		}
		for i := range buf[:n] {
			st := &buf[i]
			// Once a row needs completing, every later row goes through
			// the join, which follows the table in step order.
			if !joining && !features.Known(st) {
				joining = true
				if join, err = features.NewRequestJoin(d); err != nil {
					return total, err
				}
			}
			if joining {
				join.Complete(st)
			}
			if opt.BenchmarkCoords && admission && AsDecodePoint(st) {
				l.Relabelled++
			}
			if opt.Selection.Keep(st) {
				b.add(st)
				if opt.KeepSteps {
					l.Steps = append(l.Steps, *st)
				}
			}
		}
		total += n
	}
	if joining {
		if err := join.Err(); err != nil {
			return total, err
		}
		if join.Off() {
			slog.Warn("step_requests not joined: step ids repeat or are unordered; features the steps table lacks are derived from it alone", "dataset", d.Dir)
		}
	}
	return total, nil
}

// engineSettings gathers what the datasets' manifests say of the engine,
// GPU and model the recipe prices with: the largest CUDA graph of each
// dataset that records its sizes, the decode attention's wave and kernel
// (manifest.DecodeAttentionOf, where each rule came from), and the
// experts-reached term of a mixture of experts (features.ExpertsTerm)
// with its notes.
type engineSettings struct {
	graphs  []int
	attn    []manifest.DecodeAttention
	ruleSrc []string
	experts []string
	notes   []string
}

func (e *engineSettings) add(m *datasets.Manifest) {
	if m != nil && len(m.CUDAGraphSizes) > 0 && !slices.Contains(e.graphs, slices.Max(m.CUDAGraphSizes)) {
		e.graphs = append(e.graphs, slices.Max(m.CUDAGraphSizes))
	}
	a := manifest.DecodeAttentionOf(m)
	src := a.Rule.Source
	a.Rule.Source = "" // datasets agree on the rule, wherever each read it
	if !slices.Contains(e.attn, a) {
		e.attn = append(e.attn, a)
	}
	if src != "" && !slices.Contains(e.ruleSrc, src) {
		e.ruleSrc = append(e.ruleSrc, src)
	}
	term, note := features.ExpertsTerm(m)
	if !slices.Contains(e.experts, term) {
		e.experts = append(e.experts, term)
	}
	if note != "" && !slices.Contains(e.notes, note) {
		e.notes = append(e.notes, note)
	}
}

// apply sets on d the settings every dataset agrees on (Data.GraphTokens,
// SMs, AttnPerSM, AttnTile, KVHeads, Kernel); those they disagree on stay
// unknown.
func (e *engineSettings) apply(d *Data) {
	if len(e.graphs) == 1 {
		d.GraphTokens = e.graphs[0]
	}
	if len(e.attn) == 1 {
		a := e.attn[0]
		d.SMs, d.AttnPerSM, d.AttnTile, d.KVHeads = a.SMs, a.ProgramsPerSM, a.ProgramsTileTokens, a.KVHeads
		d.Kernel = fpm.DecodeKernel{TileTokens: a.Rule.TileTokens, SplitPrograms: a.Rule.SplitPrograms, SplitMax: a.Rule.SplitMax}
		d.KernelSource = strings.Join(e.ruleSrc, "; ")
	}
	d.ExpertsNotes = e.notes
	switch {
	case len(e.experts) == 1:
		d.Experts = e.experts[0]
	case slices.ContainsFunc(e.experts, func(t string) bool { return t != "" }):
		d.ExpertsNotes = append(d.ExpertsNotes, fmt.Sprintf("%s left out: the datasets' manifests record different mixtures of experts or routings (%q)",
			fpm.TermExpertsReached, e.experts))
	}
}

// decodePolicy is a dataset's measurement_policy.decode ("" when its
// manifest does not say).
func decodePolicy(d *datasets.Dataset) string {
	if m := d.Manifest; m != nil && m.MeasurementPolicy != nil {
		return m.MeasurementPolicy.Decode
	}
	return ""
}

// measurementPolicies says which datasets a load keeps under policy (see
// LoadOptions.Policy), noting those it leaves out in l (LeftOut and a
// warning). Steady-state benchmark points and production traffic time the
// same step, so they pool; admission-step points time another one
// (docs/architecture.md#r3-admission-step-contamination). Under
// PolicyAuto a mix of admission-step datasets with ones that record no
// policy cannot be separated and is refused, as is a named policy no
// dataset has, or one beside datasets that record none.
func measurementPolicies(paths []string, ds []*datasets.Dataset, policy string, l *Loaded) ([]bool, error) {
	keep := make([]bool, len(ds))
	var admission, steady, unknown []string
	for i, d := range ds {
		keep[i] = true
		switch decodePolicy(d) {
		case datasets.PolicyAdmissionStep:
			admission = append(admission, paths[i])
		case "":
			unknown = append(unknown, paths[i])
		default:
			steady = append(steady, paths[i])
		}
	}
	leave := func(i int) {
		keep[i] = false
		l.LeftOut = append(l.LeftOut, fmt.Sprintf("%s (measurement_policy.decode %s)", paths[i], decodePolicy(ds[i])))
	}
	switch policy {
	case "", PolicyAll:
		return keep, nil
	case PolicyAuto:
		if len(admission) == 0 || len(steady) == 0 && len(unknown) == 0 {
			return keep, nil
		}
		if len(unknown) > 0 {
			return nil, dataErr(ErrPolicyMix, fmt.Sprintf("%s record admission_step decode points and %s no measurement_policy: their rows cannot be told apart; "+
				"fit them apart, or name --policy all to pool them", strings.Join(admission, ", "), strings.Join(unknown, ", ")))
		}
		for i, d := range ds {
			if decodePolicy(d) == datasets.PolicyAdmissionStep {
				leave(i)
			}
		}
		w := fmt.Sprintf("left out %s: admission-step decode points time another step than the steady-state and production rows of %s, and pooled they bias the fit; "+
			"--policy admission_step fits them alone, --policy all pools them", strings.Join(l.LeftOut, ", "), strings.Join(steady, ", "))
		slog.Warn("measurement policies not pooled", "warning", w)
		l.Warnings = append(l.Warnings, w)
		return keep, nil
	}
	if known := []string{datasets.PolicySteadyStateSecondStep, datasets.PolicyAdmissionStep, datasets.PolicyProduction}; !slices.Contains(known, policy) {
		return nil, fmt.Errorf("fit: unknown --policy %q (want %s, %s or a decode measurement policy: %s)", policy, PolicyAuto, PolicyAll, strings.Join(known, ", "))
	}
	if len(unknown) > 0 {
		return nil, dataErr(ErrPolicyMix, fmt.Sprintf("--policy %s: %s record no measurement_policy, so it cannot say whether their rows are of that policy", policy, strings.Join(unknown, ", ")))
	}
	for i, d := range ds {
		if decodePolicy(d) != policy {
			leave(i)
		}
	}
	if !slices.Contains(keep, true) {
		return nil, dataErr(ErrPolicyMix, fmt.Sprintf("--policy %s: no dataset has it (%s)", policy, strings.Join(l.LeftOut, ", ")))
	}
	if len(l.LeftOut) > 0 {
		w := "left out " + strings.Join(l.LeftOut, ", ") + ": --policy " + policy
		slog.Warn("measurement policies not pooled", "warning", w)
		l.Warnings = append(l.Warnings, w)
	}
	return keep, nil
}

func orDefault(s, def []string) []string {
	if s == nil {
		return def
	}
	return s
}

// AsDecodePoint re-reads a measured decode benchmark point recorded on its
// admission step (kind prefill, benchmark_id ≥ 0, every scheduled request
// new and computing one token) as the decode point the benchmark meant:
// kind decode, num_decode_requests = B, sum_decode_kv_tokens = the context
// read, var_decode_kv_tokens = the prompt-length variance (each prompt is
// its context plus the token computed), the longest context unknown (Of
// derives it when the contexts are equal). It reports whether it changed
// the row.
func AsDecodePoint(st *datasets.Step) bool {
	n := st.NumPrefillRequests
	if st.Role != datasets.RoleMeasured || st.BenchmarkID < 0 || st.Kind != datasets.KindPrefill || n <= 0 ||
		st.NumDecodeRequests != 0 || st.SumPrefillTokens != int64(n) || st.NumNewReqs != n {
		return false
	}
	st.Kind = datasets.KindDecode
	st.NumDecodeRequests = n
	st.SumDecodeKVTokens = st.SumPrefillKVTokens
	st.VarDecodeKVTokens = st.VarPrefillLength
	st.MaxDecodeKVTokens = datasets.Unknown
	st.NumPrefillRequests, st.SumPrefillTokens, st.SumPrefillKVTokens, st.VarPrefillLength, st.SumPrefillAttn = 0, 0, 0, 0, 0
	return true
}

// datasetRef identifies a dataset: its manifest name, path, and the SHA-256
// of its manifest (which lists the SHA-256 of every part) followed, for a
// minimal manifest that lists no parts, by its steps parts in order.
func datasetRef(d *datasets.Dataset) (fpm.DatasetRef, error) {
	ref := fpm.DatasetRef{ID: d.Manifest.Name, Path: d.Dir}
	h := sha256.New()
	files := []string{filepath.Join(d.Dir, datasets.ManifestFile)}
	if len(d.Manifest.Tables[datasets.TableSteps].Parts) == 0 {
		parts, err := d.Parts(datasets.TableSteps)
		if err != nil {
			return ref, err
		}
		files = append(files, parts...)
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return ref, fmt.Errorf("fit: hashing %s: %w", f, err)
		}
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return ref, fmt.Errorf("fit: hashing %s: %w", f, err)
		}
	}
	ref.SHA256 = hex.EncodeToString(h.Sum(nil))
	return ref, nil
}

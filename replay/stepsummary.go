package replay

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/internal/hist"
)

// ErrStats is the error of one timing field over a group of steps. Times in
// ms; relative errors as fractions (0.05 = 5%).
type ErrStats struct {
	N          int64   `json:"n"`
	RecMeanMs  float64 `json:"recorded_mean_ms"`
	PredMeanMs float64 `json:"predicted_mean_ms"`
	// BiasMs is mean(pred − rec); MAEMs mean |pred − rec|; RMSEMs the root
	// mean square error.
	BiasMs float64 `json:"bias_ms"`
	MAEMs  float64 `json:"mae_ms"`
	RMSEMs float64 `json:"rmse_ms"`
	// MAPE is mean |pred − rec| / rec over steps with rec > 0.
	MAPE float64 `json:"mape"`
	// RelErrOfMean is (mean pred − mean rec) / mean rec: the error of the
	// total time.
	RelErrOfMean float64 `json:"rel_err_of_mean"`
	// AbsRel* are quantiles of |pred − rec| / rec: the middles of their
	// hist.Ratio buckets (within 6.3%).
	AbsRelP50 float64 `json:"abs_rel_err_p50"`
	AbsRelP90 float64 `json:"abs_rel_err_p90"`
	AbsRelP99 float64 `json:"abs_rel_err_p99"`
	// Exact counts steps predicted to the nanosecond.
	Exact int64 `json:"exact"`
}

// GroupStats is the error of every field over one group of steps.
type GroupStats struct {
	Group  string              `json:"group"`
	Steps  int64               `json:"steps"`
	Fields map[string]ErrStats `json:"fields"`
	// FirstSeq and LastSeq bound an over-time group (decile) in the
	// steps table's order.
	FirstSeq int64 `json:"first_seq,omitempty"`
	LastSeq  int64 `json:"last_seq,omitempty"`
}

// Attribution says which FPM term the device-time error comes from: the
// residual pred − rec of gpu_time_ns (wall_time_ns when the record has no
// device time) regressed on the basis terms (least squares), each term's
// share being mean |δ_i·x_i| over Σ_j mean |δ_j·x_j|.
type Attribution struct {
	Target string       `json:"target"`
	Terms  []AttribTerm `json:"terms"` // by share, largest first
	// Top is the term with the largest share.
	Top string `json:"top"`
	// Collinear lists terms nearly collinear with Top over these steps
	// (cosine > 0.98): the record cannot tell their errors apart, and the
	// error may belong to any of them.
	Collinear []string `json:"collinear_with_top,omitempty"`
	// R2 is the fraction of the residual's sum of squares the regression
	// explains (1: the error is entirely a linear function of the terms).
	R2 float64 `json:"r2"`
	// ResidualRMSMs is the root mean square of the residual, in ms.
	ResidualRMSMs float64 `json:"residual_rms_ms"`
}

// AttribTerm is one term of an Attribution.
type AttribTerm struct {
	Term string `json:"term"`
	// Coef is the regression coefficient δ (ns per unit of the term): the
	// model's coefficient minus the one the record implies.
	Coef float64 `json:"coef_ns"`
	// ModelCoef and RelCoef are the replayed model's coefficient and δ
	// relative to the record's implied coefficient (model − δ), when the
	// model is linear with this term.
	ModelCoef *float64 `json:"model_coef_ns,omitempty"`
	RelCoef   *float64 `json:"rel_coef_error,omitempty"`
	Share     float64  `json:"share"`
}

// TopStep is a step where prediction and record part most, with its
// composition.
type TopStep struct {
	Seq      int64               `json:"seq"`
	StepID   int64               `json:"step_id"`
	WorkerID string              `json:"worker_id,omitempty"`
	Kind     string              `json:"kind"`
	Role     string              `json:"role"`
	Field    string              `json:"field"`
	RecMs    float64             `json:"recorded_ms"`
	PredMs   float64             `json:"predicted_ms"`
	ErrMs    float64             `json:"error_ms"`
	RelErr   float64             `json:"rel_error"`
	Features fpm.Features        `json:"features"`
	Timing   map[string][2]int64 `json:"timing_ns"` // field → [recorded, predicted]
	// Contributions is the linear model's price of each term (ns).
	Contributions map[string]float64 `json:"contributions_ns,omitempty"`
}

// StepSummary is summary.json of a step replay.
type StepSummary struct {
	Dataset          string   `json:"dataset"`
	Model            string   `json:"model"`
	Steps            int64    `json:"steps"`
	Fields           []string `json:"fields"`
	UsedStepRequests bool     `json:"used_step_requests"`
	// PrimaryField is the field the top steps are ranked by.
	PrimaryField string       `json:"primary_field"`
	Overall      GroupStats   `json:"overall"`
	ByKind       []GroupStats `json:"by_kind"`
	ByRole       []GroupStats `json:"by_role"`
	ByBatch      []GroupStats `json:"by_batch_size"`
	OverTime     []GroupStats `json:"over_time"`
	Attribution  *Attribution `json:"attribution,omitempty"`
	Top          []TopStep    `json:"top_steps"`
	// Intervals is the coverage of the model's prediction intervals (nil
	// when the model has none).
	Intervals *StepIntervals `json:"intervals,omitempty"`
	// ExtrapolatedOps counts the operations the model priced past its
	// measured range (fpm.Extrapolating).
	ExtrapolatedOps int64                             `json:"extrapolated_ops"`
	Notes           []string                          `json:"notes,omitempty"`
	Series          *Series                           `json:"-"`
	cdf             map[string]*hist.Hist[hist.Ratio] // kind → |rel err| of the primary field
}

// StepIntervals is the empirical coverage of the replayed model's
// prediction intervals at a nominal level: the fraction of recorded steps
// whose time fell inside the interval of their prediction.
type StepIntervals struct {
	Level  float64         `json:"level"`
	Fields []FieldCoverage `json:"fields"`
}

// FieldCoverage is the coverage of one timing field, overall and by kind.
type FieldCoverage struct {
	Field   string                  `json:"field"`
	Overall fit.Coverage            `json:"overall"`
	ByKind  map[string]fit.Coverage `json:"by_kind"`
}

// Series is the binned recorded-vs-predicted time series behind the
// figures: bins of consecutive steps.
type Series struct {
	Field     string
	T         []float64 // mean t_schedule_start (s), or step index when unknown
	TIsIndex  bool
	Rec, Pred []float64 // mean recorded and predicted, ms
}

// ---- accumulation --------------------------------------------------------

type errAcc struct {
	n, exact           int64
	rec, pred, abs, sq float64
	rel                hist.Hist[hist.Ratio] // |relative error| where rec > 0
}

type groupAcc struct {
	steps    int64
	first    int64
	last     int64
	f        [nFields]errAcc
	firstSet bool
}

func (g *groupAcc) add(row *StepRow, rels *[nFields]float64) {
	g.steps++
	if !g.firstSet {
		g.first, g.firstSet = row.Seq, true
	}
	g.last = row.Seq
	for i := 0; i < nFields; i++ {
		rec := row.rec(i)
		if rec < 0 {
			continue
		}
		a := &g.f[i]
		p := row.pred(i)
		e := float64(p - rec)
		a.n++
		a.rec += float64(rec)
		a.pred += float64(p)
		a.abs += math.Abs(e)
		a.sq += e * e
		if e == 0 {
			a.exact++
		}
		if rec > 0 {
			a.rel.Add(rels[i])
		}
	}
}

func (g *groupAcc) stats(name string) GroupStats {
	out := GroupStats{Group: name, Steps: g.steps, Fields: map[string]ErrStats{}}
	for i, fld := range Fields {
		a := &g.f[i]
		if a.n == 0 {
			continue
		}
		n := float64(a.n)
		s := ErrStats{N: a.n, RecMeanMs: a.rec / n / 1e6, PredMeanMs: a.pred / n / 1e6,
			BiasMs: (a.pred - a.rec) / n / 1e6, MAEMs: a.abs / n / 1e6, RMSEMs: math.Sqrt(a.sq/n) / 1e6, Exact: a.exact}
		if a.rec > 0 {
			s.RelErrOfMean = (a.pred - a.rec) / a.rec
		}
		if a.rel.Count() > 0 {
			s.MAPE = a.rel.Mean()
			s.AbsRelP50, s.AbsRelP90, s.AbsRelP99 = a.rel.Bucket(0.5), a.rel.Bucket(0.9), a.rel.Bucket(0.99)
		}
		out.Fields[fld] = s
	}
	return out
}

// Batch-size buckets: 1, 2-4, 5-8, 9-16, ..., 257-512, >512.
var batchBuckets = []string{"1", "2-4", "5-8", "9-16", "17-32", "33-64", "65-128", "129-256", "257-512", ">512"}

func batchBucket(b int32) int {
	switch {
	case b <= 1:
		return 0
	case b > 512:
		return len(batchBuckets) - 1
	}
	// 2-4 → 1, 5-8 → 2, 9-16 → 3, ...
	k := 1
	for hi := int32(4); b > hi; hi *= 2 {
		k++
	}
	return k
}

var kindNames = [4]string{datasets.KindPrefill, datasets.KindDecode, datasets.KindMixed, "other"}
var roleNames = []string{datasets.RoleProduction, datasets.RoleMeasured, datasets.RoleScaffolding, "other"}

func kindIndex(k string) int {
	switch k {
	case datasets.KindPrefill:
		return 0
	case datasets.KindDecode:
		return 1
	case datasets.KindMixed:
		return 2
	}
	return 3
}

func roleIndex(r string) int {
	switch r {
	case datasets.RoleProduction:
		return 0
	case datasets.RoleMeasured:
		return 1
	case datasets.RoleScaffolding:
		return 2
	}
	return 3
}

type topEntry struct {
	key  float64
	row  StepRow
	f    fpm.Features
	used bool
}

type stepAcc struct {
	total   int64
	all     groupAcc
	kind    [4]groupAcc
	role    [4]groupAcc
	batch   [10]groupAcc
	decile  [10]groupAcc
	primary int // field index the top steps are ranked by; -1 until known

	// attribution: normal equations of the residual on the basis terms
	basis  *fpm.Basis
	lin    *fpm.Linear
	x      []float64
	xtx    []float64 // k×k
	xtr    []float64
	sumX   []float64
	rr, r1 float64
	nAttr  int64
	target int // field of the residual

	top    []topEntry
	topMin int

	// interval coverage of gpu_time_ns and wall_time_ns: overall, then by
	// kind index
	level float64
	cov   [2][1 + len(kindNames)]fit.Coverage

	bins    int
	binT    []float64
	binRec  []float64
	binPred []float64
	binN    []int64
	tIndex  bool
}

func newStepAcc(opts StepOptions, total int64) (*stepAcc, error) {
	a := &stepAcc{total: total, primary: -1, target: -1}
	terms := opts.Attrib
	if lin, ok := opts.FPM.(*fpm.Linear); ok {
		a.lin = lin
		if terms == nil {
			terms = lin.Terms
		}
	}
	if terms == nil {
		terms = fpm.DefaultTerms
	}
	b, err := fpm.NewBasis(terms)
	if err != nil {
		return nil, err
	}
	k := b.Len()
	a.basis, a.x, a.xtx, a.xtr, a.sumX = b, make([]float64, k), make([]float64, k*k), make([]float64, k), make([]float64, k)
	n := opts.TopN
	if n <= 0 {
		n = 20
	}
	a.top = make([]topEntry, n)
	a.bins = opts.TimeBin
	if a.bins <= 0 {
		a.bins = 400
	}
	if int64(a.bins) > total {
		a.bins = int(max(total, 1))
	}
	a.binT, a.binRec, a.binPred, a.binN = make([]float64, a.bins), make([]float64, a.bins), make([]float64, a.bins), make([]int64, a.bins)
	return a, nil
}

func (a *stepAcc) add(st *stepCols, row *StepRow, f *fpm.Features) {
	if a.primary < 0 {
		// Device time when the record has it, else the inter-update period.
		a.primary, a.target = fWall, fWall
		if row.RecGPU >= 0 {
			a.primary, a.target = fGPU, fGPU
		}
	}
	rels := [nFields]float64{math.Abs(row.RelErrGPU), math.Abs(row.RelErrPrep), math.Abs(row.RelErrSched),
		math.Abs(row.RelErrNarrow), math.Abs(row.RelErrWall)}
	a.all.add(row, &rels)
	a.kind[kindIndex(st.Kind)].add(row, &rels)
	a.role[roleIndex(st.Role)].add(row, &rels)
	a.batch[batchBucket(row.BatchSize)].add(row, &rels)
	dec := 0
	if a.total > 0 {
		dec = int(row.Seq * 10 / a.total)
	}
	a.decile[min(dec, 9)].add(row, &rels)

	if row.PredGPULo >= 0 {
		k := 1 + kindIndex(st.Kind)
		for i, v := range [2][4]int64{{row.RecGPU, row.PredGPU, row.PredGPULo, row.PredGPUHi},
			{row.RecWall, row.PredWall, row.PredWallLo, row.PredWallHi}} {
			if v[0] >= 0 {
				a.cov[i][0].Add(float64(v[0]), float64(v[1]), float64(v[2]), float64(v[3]))
				a.cov[i][k].Add(float64(v[0]), float64(v[1]), float64(v[2]), float64(v[3]))
			}
		}
	}

	// Attribution.
	if rec := row.rec(a.target); rec >= 0 {
		r := float64(row.pred(a.target) - rec)
		x := a.basis.Eval(*f, a.x)
		k := len(x)
		for i, xi := range x {
			if xi == 0 {
				continue
			}
			a.sumX[i] += xi
			a.xtr[i] += xi * r
			row := a.xtx[i*k : i*k+k]
			for j := i; j < k; j++ {
				row[j] += xi * x[j]
			}
		}
		a.rr += r * r
		a.r1 += r
		a.nAttr++
	}

	// Top steps.
	if rec := row.rec(a.primary); rec >= 0 {
		key := math.Abs(float64(row.pred(a.primary) - rec))
		if t := &a.top[a.topMin]; !t.used || key > t.key {
			t.key, t.row, t.f, t.used = key, *row, *f, true
			a.topMin = 0
			for i := range a.top {
				if !a.top[i].used {
					a.topMin = i
					break
				}
				if a.top[i].key < a.top[a.topMin].key {
					a.topMin = i
				}
			}
		}
	}

	// Time series of the primary field.
	if a.total > 0 {
		b := int(row.Seq * int64(a.bins) / a.total)
		if b >= a.bins {
			b = a.bins - 1
		}
		t := float64(row.TSchedule) / 1e9
		if row.TSchedule < 0 {
			t, a.tIndex = float64(row.Seq), true
		}
		a.binT[b] += t
		a.binRec[b] += float64(max(row.rec(a.primary), 0)) / 1e6
		a.binPred[b] += float64(row.pred(a.primary)) / 1e6
		a.binN[b]++
	}
}

func (a *stepAcc) summary() *StepSummary {
	s := &StepSummary{Steps: a.all.steps, Fields: Fields, Overall: a.all.stats("all"), cdf: map[string]*hist.Hist[hist.Ratio]{}}
	if a.primary >= 0 {
		s.PrimaryField = Fields[a.primary]
	}
	for i, g := range a.kind {
		if g.steps > 0 {
			s.ByKind = append(s.ByKind, g.stats(kindNames[i]))
			if a.primary >= 0 {
				s.cdf[kindNames[i]] = &a.kind[i].f[a.primary].rel
			}
		}
	}
	for i, g := range a.role {
		if g.steps > 0 {
			s.ByRole = append(s.ByRole, g.stats(roleNames[i]))
		}
	}
	for i, g := range a.batch {
		if g.steps > 0 {
			s.ByBatch = append(s.ByBatch, g.stats(batchBuckets[i]))
		}
	}
	for i := range a.decile {
		g := &a.decile[i]
		if g.steps > 0 {
			gs := g.stats(fmt.Sprintf("decile %d", i+1))
			gs.FirstSeq, gs.LastSeq = g.first, g.last
			s.OverTime = append(s.OverTime, gs)
		}
	}
	s.Attribution = a.attribution()
	s.Top = a.topSteps()
	s.Intervals = a.intervals()
	if a.primary >= 0 {
		ser := &Series{Field: Fields[a.primary], TIsIndex: a.tIndex}
		for b := range a.binN {
			if a.binN[b] == 0 {
				continue
			}
			n := float64(a.binN[b])
			ser.T = append(ser.T, a.binT[b]/n)
			ser.Rec = append(ser.Rec, a.binRec[b]/n)
			ser.Pred = append(ser.Pred, a.binPred[b]/n)
		}
		s.Series = ser
	}
	return s
}

func (a *stepAcc) intervals() *StepIntervals {
	if a.level <= 0 {
		return nil
	}
	out := &StepIntervals{Level: a.level}
	for i, field := range []string{FieldGPU, FieldWall} {
		c := &a.cov[i]
		if c[0].N == 0 {
			continue
		}
		fc := FieldCoverage{Field: field, ByKind: map[string]fit.Coverage{}}
		for k := range c {
			c[k].Finish()
		}
		fc.Overall = c[0]
		for k, name := range kindNames {
			if c[1+k].N > 0 {
				fc.ByKind[name] = c[1+k]
			}
		}
		out.Fields = append(out.Fields, fc)
	}
	return out
}

func (a *stepAcc) attribution() *Attribution {
	if a.nAttr == 0 {
		return nil
	}
	k := len(a.xtr)
	at := &Attribution{Target: Fields[a.target], ResidualRMSMs: math.Sqrt(a.rr/float64(a.nAttr)) / 1e6}
	if a.rr == 0 {
		at.R2 = 1
		for i, t := range a.basis.Names {
			at.Terms = append(at.Terms, a.attribTerm(t, i, 0, 0))
		}
		return at
	}
	// Columns that never occur are dropped; the rest are scaled to unit
	// diagonal and solved with a tiny ridge (collinear terms share).
	var idx []int
	for i := 0; i < k; i++ {
		if a.xtx[i*k+i] > 0 {
			idx = append(idx, i)
		}
	}
	m := len(idx)
	if m == 0 {
		return nil
	}
	A := mat.NewSymDense(m, nil)
	b := mat.NewVecDense(m, nil)
	scale := make([]float64, m)
	for p, i := range idx {
		scale[p] = math.Sqrt(a.xtx[i*k+i])
	}
	for p, i := range idx {
		for q := p; q < m; q++ {
			j := idx[q]
			v := a.xtx[i*k+j] / (scale[p] * scale[q])
			if p == q {
				v += 1e-10
			}
			A.SetSym(p, q, v)
		}
		b.SetVec(p, a.xtr[i]/scale[p])
	}
	var ch mat.Cholesky
	delta := make([]float64, k)
	if ch.Factorize(A) {
		var z mat.VecDense
		if err := ch.SolveVecTo(&z, b); err == nil {
			for p, i := range idx {
				delta[i] = z.AtVec(p) / scale[p]
			}
		}
	}
	// Explained sum of squares: δᵀXᵀr (least squares: = δᵀXᵀXδ).
	var explained float64
	for i := 0; i < k; i++ {
		explained += delta[i] * a.xtr[i]
	}
	at.R2 = math.Min(1, math.Max(0, explained/a.rr))
	var tot float64
	shares := make([]float64, k)
	for i := range delta {
		shares[i] = math.Abs(delta[i]) * a.sumX[i]
		tot += shares[i]
	}
	for i, t := range a.basis.Names {
		sh := 0.0
		if tot > 0 {
			sh = shares[i] / tot
		}
		at.Terms = append(at.Terms, a.attribTerm(t, i, delta[i], sh))
	}
	sort.SliceStable(at.Terms, func(i, j int) bool { return at.Terms[i].Share > at.Terms[j].Share })
	if len(at.Terms) > 0 && at.Terms[0].Share > 0 {
		at.Top = at.Terms[0].Term
		ti := -1
		for i, n := range a.basis.Names {
			if n == at.Top {
				ti = i
			}
		}
		for j, n := range a.basis.Names {
			if j == ti || a.xtx[j*k+j] == 0 {
				continue
			}
			lo, hi := min(ti, j), max(ti, j)
			if cos := a.xtx[lo*k+hi] / math.Sqrt(a.xtx[ti*k+ti]*a.xtx[j*k+j]); cos > 0.98 {
				at.Collinear = append(at.Collinear, n)
			}
		}
	}
	return at
}

func (a *stepAcc) attribTerm(term string, i int, delta, share float64) AttribTerm {
	t := AttribTerm{Term: term, Coef: delta, Share: share}
	if a.lin != nil {
		for j, name := range a.lin.Terms {
			if name == term {
				c := a.lin.Coef[j]
				t.ModelCoef = &c
				if implied := c - delta; implied != 0 {
					r := delta / implied
					t.RelCoef = &r
				}
			}
		}
	}
	return t
}

func (a *stepAcc) topSteps() []TopStep {
	var es []topEntry
	for _, t := range a.top {
		if t.used {
			es = append(es, t)
		}
	}
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].key != es[j].key {
			return es[i].key > es[j].key
		}
		return es[i].row.Seq < es[j].row.Seq
	})
	out := make([]TopStep, 0, len(es))
	for _, e := range es {
		r := &e.row
		rec, pred := r.rec(a.primary), r.pred(a.primary)
		ts := TopStep{Seq: r.Seq, StepID: r.StepID, WorkerID: r.WorkerID, Kind: r.Kind, Role: r.Role, Field: Fields[a.primary],
			RecMs: float64(rec) / 1e6, PredMs: float64(pred) / 1e6, ErrMs: float64(pred-rec) / 1e6, Features: e.f,
			Timing: map[string][2]int64{}}
		if rec > 0 {
			ts.RelErr = float64(pred-rec) / float64(rec)
		}
		for i, fld := range Fields {
			ts.Timing[fld] = [2]int64{r.rec(i), r.pred(i)}
		}
		if a.lin != nil {
			ts.Contributions = map[string]float64{}
			for i, c := range a.lin.Contributions(e.f) {
				ts.Contributions[a.lin.Terms[i]] = c
			}
		}
		out = append(out, ts)
	}
	return out
}

// ---- output ---------------------------------------------------------------

// Tables of a replay's output directory. They are replay's own tables, not
// the data contract's steps and requests: a replay output validates and
// inspects as what it is.
const (
	// TableStepComparison: one row per replayed step (StepRow).
	TableStepComparison = "step_comparison"
	// TableRequestComparison: one row per replayed request (RequestRow).
	TableRequestComparison = "request_comparison"
)

// Output names a replay's output directory: a dataset directory with
// manifest.json (source kind "replay"), the comparison table (step_comparison.parquet
// or request_comparison.parquet, a directory of parts), summary.json and the
// figures.
type Output struct {
	Dir       string
	Overwrite bool
	Command   []string
	// ModelName and DatasetDir are recorded in the manifest.
	ModelName  string
	DatasetDir string
	// NoFigures skips the PNG/SVG figures.
	NoFigures bool
}

func (o Output) create(kind string) (*datasets.Writer, error) {
	m := datasets.Manifest{
		Name:   filepath.Base(filepath.Clean(o.Dir)),
		Tool:   datasets.Tool{Name: "steplab", Version: "dev", Command: o.Command},
		Source: datasets.Source{Kind: "replay", Format: kind, Path: o.DatasetDir, Detail: map[string]string{"model": o.ModelName}},
		Notes:  []string{"replay output: its tables are comparisons (recorded vs predicted), not the data contract of docs/architecture.md; see docs/replay.md"},
	}
	return datasets.Create(o.Dir, m, datasets.CreateOptions{Overwrite: o.Overwrite})
}

// StepReport is what RunSteps returns.
type StepReport struct {
	Summary *StepSummary
	Files   []string
}

// RunSteps replays the steps of d and writes out/step_comparison.parquet,
// out/summary.json and the figures.
func RunSteps(d *datasets.Dataset, opts StepOptions, out Output) (*StepReport, error) {
	w, err := out.create("steps")
	if err != nil {
		return nil, err
	}
	tw, err := datasets.NewTableWriter[StepRow](w, TableStepComparison, datasets.DefaultTableOptions)
	if err != nil {
		return nil, err
	}
	buf := make([]StepRow, 0, 8192)
	user := opts.Row
	opts.Row = func(r *StepRow) error {
		buf = append(buf, *r)
		if len(buf) == cap(buf) {
			if err := tw.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		if user != nil {
			return user(r)
		}
		return nil
	}
	sum, err := ReplaySteps(d, opts)
	if err := finishTable(w, tw, buf, err); err != nil {
		return nil, err
	}
	sum.Dataset, sum.Model = out.DatasetDir, out.ModelName
	rep := &StepReport{Summary: sum, Files: []string{datasets.TableDir(out.Dir, TableStepComparison)}}
	p := filepath.Join(out.Dir, "summary.json")
	if err := writeJSONFile(p, sum); err != nil {
		return nil, err
	}
	rep.Files = append(rep.Files, p)
	if !out.NoFigures {
		f, err := StepFigures(sum, out.Dir)
		if err != nil {
			return nil, err
		}
		rep.Files = append(rep.Files, f...)
	}
	return rep, nil
}

// finishTable writes the rows left in buf and closes the table and the
// output. If the replay failed (err) or the table cannot be finished, the
// output is aborted instead, so that it is marked partial, not complete.
func finishTable[T any](w *datasets.Writer, tw *datasets.TableWriter[T], buf []T, err error) error {
	if err == nil {
		err = tw.Write(buf)
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		_ = w.Abort(err.Error())
		return err
	}
	return w.Close()
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return datasets.WriteFileAtomic(path, append(b, '\n'))
}

package fit

import (
	"fmt"
	"math"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
)

// Fits of the payload and host-overhead models (fpm.PayloadModel,
// fpm.HostModel) from captured steps. Both models are linear in a step's
// composition, so each is one non-negative least-squares problem: the
// payload bytes on PayloadStep.Terms, and each host window on its phase's
// terms. A term the data never varies (no preemptions, so no resumed
// requests) cannot be identified: its coefficient is kept from the prior
// and listed in Prior, never silently set to 0.

// TermFit is one NNLS fit of a linear sub-model: its terms and fitted
// coefficients (prior values where not identified), and its error.
type TermFit struct {
	Window string    `json:"window"` // payload_bytes, host_prep_ns, ...
	Terms  []string  `json:"terms"`
	Coef   []float64 `json:"coef"`
	// Prior lists the terms not identified by the data (all-zero in every
	// row); their coefficients are the prior's.
	Prior   []string `json:"prior,omitempty"`
	Rows    int      `json:"rows"`
	Metrics Metrics  `json:"metrics"`
}

// fitTerms solves y ≈ X·c, c ≥ 0, over the columns that are non-zero
// somewhere; the others keep prior[j]. x is row-major with len(names)
// columns.
func fitTerms(window string, names []string, x, y, prior []float64) (*TermFit, error) {
	if len(y) == 0 {
		return nil, dataErr(ErrEmptySelection, "no rows with a known "+window)
	}
	for i, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			e := dataErr(ErrBadTarget, fmt.Sprintf("%s is %v", window, v))
			e.Row = i
			return nil, e
		}
	}
	return solveTerms(window, names, x, y, prior)
}

// solveTerms is fitTerms for a target that may be negative on some rows
// (a difference of measured windows, whose noise crosses zero), finite on
// every row.
func solveTerms(window string, names []string, x, y, prior []float64) (*TermFit, error) {
	p := len(names)
	n := len(y)
	if n == 0 {
		return nil, dataErr(ErrEmptySelection, "no rows with a known "+window)
	}
	var keep []int
	tf := &TermFit{Window: window, Terms: append([]string(nil), names...), Coef: append([]float64(nil), prior...), Rows: n}
	for j := 0; j < p; j++ {
		nz := false
		for i := 0; i < n; i++ {
			if x[i*p+j] != 0 {
				nz = true
				break
			}
		}
		if nz {
			keep = append(keep, j)
		} else {
			tf.Prior = append(tf.Prior, names[j])
		}
	}
	if len(keep) == 0 {
		return nil, dataErr(ErrZeroColumn, "every term is zero on every row", names...)
	}
	if n < minRows(len(keep)) {
		return nil, dataErr(ErrTooFewRows, fmt.Sprintf("%d rows with a known %s for %d terms (need %d)", n, window, len(keep), minRows(len(keep))))
	}
	k := len(keep)
	xs := make([]float64, n*k)
	kn := make([]string, k)
	for c, j := range keep {
		kn[c] = names[j]
		for i := 0; i < n; i++ {
			xs[i*k+c] = x[i*p+j]
		}
	}
	g := NewGram(xs, y, nil, k)
	if err := g.CheckRank(kn); err != nil {
		return nil, fmt.Errorf("fit: %s: %w", window, err)
	}
	coef, _, err := g.SolveNNLS()
	if err != nil {
		return nil, fmt.Errorf("fit: %s: %w", window, err)
	}
	for c, j := range keep {
		tf.Coef[j] = coef[c]
	}
	pred := make([]float64, n)
	var pos []int
	for i := 0; i < n; i++ {
		for j := 0; j < p; j++ {
			pred[i] += tf.Coef[j] * x[i*p+j]
		}
		if y[i] > 0 {
			pos = append(pos, i)
		}
	}
	tf.Metrics = metricsOf(y, pred, pos)
	return tf, nil
}

// PayloadFit is a fitted payload model.
type PayloadFit struct {
	Model fpm.PayloadModel `json:"model"`
	Fit   *TermFit         `json:"fit"`
}

// FitPayload fits the payload model to measured bytes per step (NNLS on
// PayloadStep.Terms). Coefficients the rows cannot identify keep prior's.
func FitPayload(rows []fpm.PayloadStep, bytes []float64, prior fpm.PayloadModel) (*PayloadFit, error) {
	if len(rows) != len(bytes) {
		return nil, fmt.Errorf("fit: payload: %d steps for %d byte counts", len(rows), len(bytes))
	}
	p := len(fpm.PayloadTermNames)
	x := make([]float64, 0, len(rows)*p)
	for _, r := range rows {
		x = append(x, r.Terms()...)
	}
	tf, err := fitTerms("payload_bytes", fpm.PayloadTermNames, x, bytes, prior.Vector())
	if err != nil {
		return nil, err
	}
	m, err := fpm.PayloadModelFromVector(tf.Coef)
	if err != nil {
		return nil, err
	}
	return &PayloadFit{Model: m, Fit: tf}, nil
}

// PayloadStepsFromTables derives each step's payload composition from the
// steps and step_requests tables: a new request ships its prompt_len token
// ids and its block table after the step (ceil((computed + scheduled) /
// blockSize) ids); a cached request ships the blocks it gained
// (ceil((computed+scheduled)/bs) − ceil(computed/bs)), a resumed one all of
// them and its tokens; finished and preempted ids come from num_finished
// and num_preempted. It also returns payload_bytes per step. Steps with an
// unknown (negative) payload_bytes are left out.
func PayloadStepsFromTables(steps []datasets.Step, reqs []datasets.StepRequest, blockSize int) ([]fpm.PayloadStep, []float64, error) {
	if blockSize <= 0 {
		return nil, nil, fmt.Errorf("fit: payload: block size %d: want > 0 (the manifest's engine.block_size)", blockSize)
	}
	if len(reqs) == 0 {
		return nil, nil, fmt.Errorf("fit: payload: no step_requests rows: the payload fit needs per-request rows (prompt lengths, computed tokens)")
	}
	blocks := func(t int64) int { return int((t + int64(blockSize) - 1) / int64(blockSize)) }
	byStep := map[int64]*fpm.PayloadStep{}
	for i := range reqs {
		r := &reqs[i]
		ps := byStep[r.StepID]
		if ps == nil {
			ps = &fpm.PayloadStep{}
			byStep[r.StepID] = ps
		}
		after := blocks(r.NumComputedTokens + r.NumScheduledTokens)
		switch {
		case r.IsNew:
			ps.NewReqs++
			ps.NewTokens += int(r.PromptLen)
			ps.NewBlocks += after
		case r.IsResumed:
			ps.CachedReqs++
			ps.ResumedReqs++
			ps.ResumedTokens += int(r.NumComputedTokens + r.NumScheduledTokens)
			ps.CachedNewBlocks += after
		default:
			ps.CachedReqs++
			ps.CachedNewBlocks += after - blocks(r.NumComputedTokens)
		}
	}
	var rows []fpm.PayloadStep
	var y []float64
	for i := range steps {
		st := &steps[i]
		if st.PayloadBytes < 0 {
			continue
		}
		var ps fpm.PayloadStep
		if p := byStep[st.StepID]; p != nil {
			ps = *p
		}
		ps.FinishedReqs = int(st.NumFinished + st.NumPreempted)
		rows = append(rows, ps)
		y = append(y, float64(st.PayloadBytes))
	}
	return rows, y, nil
}

// Host windows fitted by FitHost, and the HostModel coefficients each
// one's terms map to.
var (
	HostPrepTermNames = []string{"prep_fixed_ns", "prep_per_req_ns", "prep_per_token_ns", "prep_per_new_req_ns", "prep_per_new_token_ns"}
	HostShipTermNames = []string{"ship_fixed_ns", "ship_ns_per_byte"}
)

// HostPrepTerms is the design row of the worker's input preparation
// (host_prep_ns): 1, requests, scheduled tokens, new requests, their
// prompt tokens.
func HostPrepTerms(s fpm.HostStep) []float64 {
	return []float64{1, float64(s.Requests), float64(s.ScheduledTokens), float64(s.NewRequests), float64(s.NewTokens)}
}

// HostShipTerms is the design row of the payload transfer
// (worker_recv_ns): 1, payload bytes.
func HostShipTerms(s fpm.HostStep) []float64 { return []float64{1, float64(s.PayloadBytes)} }

// HostWindows are measured host windows per step, in ns; a negative value
// is unknown and leaves the row out of that window's fit, and a nil slice
// skips the window.
type HostWindows struct {
	PrepNs []float64 // host_prep_ns
	ShipNs []float64 // worker_recv_ns
}

// HostFit is a fitted host model: the prior with the windows the data
// measured replaced by their fits.
type HostFit struct {
	Model fpm.HostModel `json:"model"`
	Fits  []*TermFit    `json:"fits"`
	// Unfitted are the windows FitHostSteps measured but could not fit
	// (their terms not separable on these steps, or too few rows), each
	// with why: their phases keep the prior's coefficients.
	Unfitted []string `json:"unfitted,omitempty"`
}

// FitHost fits the host-model phases whose windows were measured: the
// worker's input preparation on HostPrepTerms, and the payload transfer on
// HostShipTerms (its per-byte coefficient becomes ShipMBps = 1e3 / ns per
// byte). Phases not measured keep prior's coefficients.
func FitHost(rows []fpm.HostStep, w HostWindows, prior fpm.HostModel) (*HostFit, error) {
	out := &HostFit{Model: prior}
	window := func(name string, ys []float64, terms func(fpm.HostStep) []float64, names []string, pri []float64) (*TermFit, error) {
		if len(ys) != len(rows) {
			return nil, fmt.Errorf("fit: host: %d %s values for %d steps", len(ys), name, len(rows))
		}
		var x, y []float64
		for i, r := range rows {
			if ys[i] < 0 {
				continue
			}
			x = append(x, terms(r)...)
			y = append(y, ys[i])
		}
		return fitTerms(name, names, x, y, pri)
	}
	if w.PrepNs == nil && w.ShipNs == nil {
		return nil, fmt.Errorf("fit: host: no window to fit (host_prep_ns or worker_recv_ns)")
	}
	if w.PrepNs != nil {
		h := prior
		tf, err := window("host_prep_ns", w.PrepNs, HostPrepTerms, HostPrepTermNames,
			[]float64{h.PrepFixedNs, h.PrepPerReqNs, h.PrepPerTokenNs, h.PrepPerNewReqNs, h.PrepPerNewTokenNs})
		if err != nil {
			return nil, err
		}
		c := tf.Coef
		out.Model.PrepFixedNs, out.Model.PrepPerReqNs, out.Model.PrepPerTokenNs, out.Model.PrepPerNewReqNs, out.Model.PrepPerNewTokenNs = c[0], c[1], c[2], c[3], c[4]
		out.Fits = append(out.Fits, tf)
	}
	if w.ShipNs != nil {
		perByte := 0.0
		if prior.ShipMBps > 0 {
			perByte = 1e3 / prior.ShipMBps
		}
		tf, err := window("worker_recv_ns", w.ShipNs, HostShipTerms, HostShipTermNames, []float64{prior.ShipFixedNs, perByte})
		if err != nil {
			return nil, err
		}
		out.Model.ShipFixedNs = tf.Coef[0]
		out.Model.ShipMBps = 0
		if tf.Coef[1] > 0 {
			out.Model.ShipMBps = 1e3 / tf.Coef[1]
		}
		out.Fits = append(out.Fits, tf)
	}
	return out, out.Model.Validate()
}

// HostStepsFromTables derives each step's host composition and measured
// windows from the steps and step_requests tables (NewTokens: the
// new_req_tokens feature, completed from step_requests where the steps
// table does not record it; see features.Of).
func HostStepsFromTables(steps []datasets.Step, reqs []datasets.StepRequest) ([]fpm.HostStep, HostWindows) {
	batches := map[int64]*features.Batch{}
	for i := range reqs {
		b := batches[reqs[i].StepID]
		if b == nil {
			b = &features.Batch{}
			batches[reqs[i].StepID] = b
		}
		b.Add(&reqs[i])
	}
	rows := make([]fpm.HostStep, len(steps))
	w := HostWindows{PrepNs: make([]float64, len(steps)), ShipNs: make([]float64, len(steps))}
	anyRecv := false
	for i := range steps {
		st := steps[i]
		if b := batches[st.StepID]; b != nil {
			b.Complete(&st)
		}
		nt := int(features.Of(&st).NewReqTokens)
		rows[i] = fpm.HostStep{Requests: int(st.NumNewReqs + st.NumCachedReqs), NewRequests: int(st.NumNewReqs),
			ScheduledTokens: int(st.TotalScheduledTokens), NewTokens: nt, PayloadBytes: st.PayloadBytes}
		w.PrepNs[i] = float64(st.HostPrepNs)
		if st.HostPrepNs <= 0 {
			w.PrepNs[i] = -1
		}
		w.ShipNs[i] = float64(st.WorkerRecvNs)
		if st.WorkerRecvNs >= 0 {
			anyRecv = true
		}
	}
	if !anyRecv {
		w.ShipNs = nil
	}
	return rows, w
}

// OverheadFit is the payload and host fits of one set of datasets.
type OverheadFit struct {
	Payload *PayloadFit `json:"payload,omitempty"`
	Host    *HostFit    `json:"host,omitempty"`
}

// StepTables is the steps and step_requests of several runs read as one.
// Step ids are a run's own: each run's are moved past the previous runs',
// so that a step's requests stay its own.
type StepTables struct {
	Steps []datasets.Step
	Reqs  []datasets.StepRequest
	next  int64 // the first step id the next run may use
}

// Add appends a run's steps, read from d, and d's step_requests when it
// has the table.
func (t *StepTables) Add(d *datasets.Dataset, steps []datasets.Step) error {
	var reqs []datasets.StepRequest
	if d.Has(datasets.TableStepRequests) {
		var err error
		if reqs, err = datasets.ReadAll[datasets.StepRequest](d, datasets.TableStepRequests); err != nil {
			return err
		}
	}
	var maxID int64
	for k := range steps {
		maxID = max(maxID, steps[k].StepID)
		steps[k].StepID += t.next
	}
	for k := range reqs {
		reqs[k].StepID += t.next
	}
	t.next += maxID + 1
	t.Steps, t.Reqs = append(t.Steps, steps...), append(t.Reqs, reqs...)
	return nil
}

// FitOverheads fits the payload and host models from dataset directories
// (their steps and step_requests tables; every row but scaffolding is
// fine here — admission steps are exactly what prices admission payload
// and bookkeeping — so no role selection is applied).
func FitOverheads(paths []string, payloadPrior fpm.PayloadModel, hostPrior fpm.HostModel) (*OverheadFit, error) {
	var runs StepTables
	blockSize := 0
	for _, p := range paths {
		d, err := datasets.Open(p)
		if err != nil {
			return nil, fmt.Errorf("fit: %w", err) // it names the dataset
		}
		if d.Manifest != nil && d.Manifest.Engine != nil {
			if blockSize != 0 && blockSize != d.Manifest.Engine.BlockSize {
				return nil, fmt.Errorf("fit: %s: block size %d differs from the other datasets' %d", p, d.Manifest.Engine.BlockSize, blockSize)
			}
			blockSize = d.Manifest.Engine.BlockSize
		}
		s, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
		if err != nil {
			return nil, fmt.Errorf("fit: dataset %s: %w", p, err)
		}
		if err := runs.Add(d, s); err != nil {
			return nil, fmt.Errorf("fit: dataset %s: %w", p, err)
		}
	}
	out := &OverheadFit{}
	steps, reqs := runs.Steps, runs.Reqs
	hs, w := HostStepsFromTables(steps, reqs)
	h, err := FitHost(hs, w, hostPrior)
	if err != nil {
		return nil, err
	}
	out.Host = h
	if blockSize > 0 && len(reqs) > 0 {
		ps, y, err := PayloadStepsFromTables(steps, reqs, blockSize)
		if err != nil {
			return nil, err
		}
		if out.Payload, err = FitPayload(ps, y, payloadPrior); err != nil {
			return nil, err
		}
	}
	return out, nil
}

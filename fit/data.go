package fit

import (
	"fmt"
	"math"
	"slices"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
)

// Data is a set of steps ready to fit or evaluate: their features and
// measured durations (ns). StepIDs and Kinds are optional (nil, or one per
// row); they name rows in errors and reports. Kinds default to
// Features.Kind().
type Data struct {
	Features []model.Features
	Y        []float64
	StepIDs  []int64
	Kinds    []string
	// Target names the timing column Y came from (e.g. "gpu_time_ns").
	Target string
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
	out := &Data{Features: make([]model.Features, len(idx)), Y: make([]float64, len(idx)), Target: d.Target}
	if d.StepIDs != nil {
		out.StepIDs = make([]int64, len(idx))
	}
	if d.Kinds != nil {
		out.Kinds = make([]string, len(idx))
	}
	for k, i := range idx {
		out.Features[k], out.Y[k] = d.Features[i], d.Y[i]
		if d.StepIDs != nil {
			out.StepIDs[k] = d.StepIDs[i]
		}
		if d.Kinds != nil {
			out.Kinds[k] = d.Kinds[i]
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
	b, err := model.NewBasis(terms)
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
	return nil
}

// Record returns the selection as recorded in a model artifact.
func (s Selection) Record(policy string) model.Selection {
	roles := s.Roles
	if roles == nil {
		roles = DefaultRoles
	}
	kinds := s.Kinds
	if kinds == nil {
		kinds = []string{datasets.KindPrefill, datasets.KindDecode, datasets.KindMixed}
	}
	return model.Selection{Roles: slices.Clone(roles), Kinds: slices.Clone(kinds), Valid: !s.AllowInvalid, Policy: policy}
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
	return st.Valid || s.AllowInvalid
}

// Select returns the steps that pass the selection; none is an
// ErrEmptySelection that says how many rows each filter removed.
func Select(steps []datasets.Step, s Selection) ([]datasets.Step, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	var out []datasets.Step
	var byRole, byKind, byValid int
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
		case !st.Valid && !s.AllowInvalid:
			byValid++
		default:
			out = append(out, *st)
		}
	}
	if len(out) == 0 {
		return nil, dataErr(ErrEmptySelection, fmt.Sprintf("no rows of %d left: %d removed by role (keeping %v), %d by kind (keeping %v), %d invalid", len(steps), byRole, roles, byKind, s.Kinds, byValid))
	}
	return out, nil
}

// Timing targets of DataFromSteps.
const (
	TargetGPU  = "gpu_time_ns"  // device time of the forward pass
	TargetWall = "wall_time_ns" // inter-update period (Dynamo's FPM wall_time)
	// TargetAuto takes gpu_time_ns when every row has it, wall_time_ns
	// otherwise (never a mix of the two).
	TargetAuto = "auto"
)

// PayloadBytesPerToken is the serialized size assumed per prompt token when
// NewReqTokens has to be derived from payload_new_bytes: the payload
// model's token-id width, so that a simulated dataset maps back to the
// features the simulator priced. Block ids and sampling parameters ride in
// the same bytes, so the feature over-counts a little; it stays
// proportional to the admission work, which is what the coefficient prices.
var PayloadBytesPerToken = model.DefaultPayloadModel().TokenIDBytes

// FeaturesOf maps a steps row to model features:
//
//	PrefillTokens   = sum_prefill_tokens
//	PrefillKVTokens = sum_prefill_kv_tokens
//	PrefillAttn     ≈ T·K/n + (n·var + T²/n)/2   (see below)
//	PrefillRequests = num_prefill_requests
//	DecodeRequests  = num_decode_requests
//	DecodeKVTokens  = sum_decode_kv_tokens
//	PaddedBatch     = num_decode_requests + padded_tokens (the CUDA-graph padding) on a decode step
//	NewRequests     = num_new_reqs, 0 where Unknown (a source without it)
//	NewReqTokens    = payload_new_bytes / PayloadBytesPerToken
//
// PrefillAttn is Σ over prefill requests of chunk·(kv + chunk/2): a chunk of
// c tokens after k cached tokens attends causally to k + c/2 keys on
// average. The steps table keeps only T = Σc, K = Σk, n and the population
// variance of c, so Σc² = n·var + T²/n is exact and Σc·k is approximated by
// T·K/n (chunk length and context uncorrelated across the step's requests;
// exact when n = 1). With per-request rows use FeaturesWithRequests.
func FeaturesOf(st *datasets.Step) model.Features {
	n := float64(st.NumPrefillRequests)
	T := float64(st.SumPrefillTokens)
	K := float64(st.SumPrefillKVTokens)
	f := model.Features{
		PrefillTokens:   T,
		PrefillKVTokens: K,
		PrefillRequests: n,
		DecodeRequests:  float64(st.NumDecodeRequests),
		DecodeKVTokens:  float64(st.SumDecodeKVTokens),
		PaddedBatch:     float64(st.NumDecodeRequests),
		NewRequests:     float64(max(st.NumNewReqs, 0)),
	}
	if n > 0 {
		v := st.VarPrefillLength
		if v < 0 || math.IsNaN(v) {
			v = 0
		}
		f.PrefillAttn = T*K/n + (n*v+T*T/n)/2
	}
	if st.Kind == datasets.KindDecode && st.PaddedTokens > 0 {
		f.PaddedBatch += float64(st.PaddedTokens)
	}
	if st.PayloadNewBytes > 0 {
		f.NewReqTokens = math.Round(float64(st.PayloadNewBytes) / PayloadBytesPerToken)
	}
	return f
}

// FeaturesWithRequests refines FeaturesOf with the step's step_requests
// rows: PrefillAttn becomes exact (Σ chunk·(computed + chunk/2) over the
// prefill requests) and NewReqTokens becomes Σ prompt_len over the new
// requests (no payload approximation).
func FeaturesWithRequests(st *datasets.Step, reqs []datasets.StepRequest) model.Features {
	f := FeaturesOf(st)
	var attn, newTok float64
	var anyPrefill, anyNew bool
	for _, r := range reqs {
		if r.IsPrefill {
			c, k := float64(r.NumScheduledTokens), float64(r.NumComputedTokens)
			attn += c * (k + c/2)
			anyPrefill = true
		}
		if r.IsNew {
			newTok += float64(r.PromptLen)
			anyNew = true
		}
	}
	if anyPrefill {
		f.PrefillAttn = attn
	}
	if anyNew {
		f.NewReqTokens = newTok
	}
	return f
}

// DataFromSteps builds fitting data from (selected) steps, reading the
// timing named by target (TargetGPU, TargetWall or TargetAuto). A row
// whose timing is unknown (−1) or not positive is an ErrBadTarget naming
// the row and its step_id.
func DataFromSteps(steps []datasets.Step, target string) (*Data, error) {
	if len(steps) == 0 {
		return nil, dataErr(ErrEmptySelection, "no steps")
	}
	if target == "" || target == TargetAuto {
		target = TargetGPU
		for i := range steps {
			if steps[i].GPUTimeNs < 0 {
				target = TargetWall
				break
			}
		}
	}
	if target != TargetGPU && target != TargetWall {
		return nil, fmt.Errorf("fit: unknown target %q (want %s, %s or %s)", target, TargetGPU, TargetWall, TargetAuto)
	}
	d := &Data{Target: target, Features: make([]model.Features, len(steps)), Y: make([]float64, len(steps)),
		StepIDs: make([]int64, len(steps)), Kinds: make([]string, len(steps))}
	for i := range steps {
		st := &steps[i]
		y := st.GPUTimeNs
		if target == TargetWall {
			y = st.WallTimeNs
		}
		if y <= 0 {
			e := dataErr(ErrBadTarget, fmt.Sprintf("%s is %d (unknown or not positive)", target, y))
			e.Row, e.StepID = i, st.StepID
			return nil, e
		}
		d.Features[i] = FeaturesOf(st)
		d.Y[i] = float64(y)
		d.StepIDs[i] = st.StepID
		d.Kinds[i] = st.Kind
	}
	return d, nil
}

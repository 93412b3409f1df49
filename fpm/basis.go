package fpm

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/steplab/steplab/catalog"
)

// Term names of the linear basis (docs/architecture.md#forward-pass-model). Each term is a function of
// Features; a Linear model prices a step as Σ coef[i]·term[i](features).
//
// The basis is roofline-inspired: TermConst is the fixed cost of one forward
// pass (kernel launches, and streaming the weights once per step, which is
// why there is no separate "weights" term: it would be the same column as
// const and the fit would refuse it as collinear); the token terms are
// per-token compute; the KV terms are attention reads; the request terms are
// per-request overhead.
const (
	TermConst           = "const"             // 1 per step: fixed cost and weight streaming
	TermPrefillStep     = "prefill_step"      // 1 if the step has prefill work: prefill-only kernels
	TermPrefillTokens   = "prefill_tokens"    // tokens computed by prefill chunks
	TermPrefillKVTokens = "prefill_kv_tokens" // KV tokens those chunks read
	TermPrefillAttn     = "prefill_attn"      // Σ chunk·(kv + chunk/2): causal attention work
	TermPrefillRequests = "prefill_requests"  // prefill requests in the step
	TermDecodeRequests  = "decode_requests"   // decode requests (one token each)
	TermDecodeKVTokens  = "decode_kv_tokens"  // KV tokens the decode requests read
	// Ragged decode batches: a kernel with one program per (request, KV
	// head) waits for the request with the longest context, so a batch
	// costs what it would if every request were that long (padded to the
	// longest) when the grid is one wave, and the sum of contexts when it
	// is many. On a uniform-context grid decode_batch_max_kv equals
	// decode_kv_tokens: only heterogeneous points tell them apart.
	TermDecodeMaxKV      = "decode_max_kv"       // the longest decode context
	TermDecodeBatchMaxKV = "decode_batch_max_kv" // decode requests × the longest context
	TermDecodeKVStd      = "decode_kv_std"       // standard deviation of the decode contexts
	TermPaddedBatch      = "padded_batch"        // CUDA-graph bucket of the decode batch
	// TermDecodeAttnKV is the decode attention's KV walk (DecodeWalk):
	// the KV tokens per KV head the kernel's programs stream, at the
	// memory's saturated bandwidth while a wave of them or more stream at
	// once and at a program's own pace once fewer are left, written with
	// the wave, the model's KV heads per GPU and the kernel's launch rule
	// (DecodeKernel: KV tile, split target, most splits), e.g.
	// decode_attn_kv(wave=198,kv_heads=8,tile=64,split_programs=264,split_max=16)
	// (DecodeAttnKV). On a uniform batch that fills the wave it is
	// decode_kv_tokens (each request's last tile whole); a ragged batch
	// pays its longest requests' walk. Recipes fitted before it spelled
	// decode_attn_kv(sms=132,per_sm=3,kv_heads=8): the split regime of
	// SplitKVLength, read as it was.
	TermDecodeAttnKV = "decode_attn_kv"
	// TermExpertsReached is the distinct routed experts a step's tokens
	// (prefill tokens plus one a decode) reach in one MoE layer
	// (catalog.Routing.Reached), written with the model's routing:
	// experts_reached(experts=128,top_k=8), with skew=S,logit_std=L for a
	// tilted router (ExpertsReached). The expert GEMMs read each reached
	// expert's weights once: memory-bound in this count at small batches.
	TermExpertsReached = "experts_reached"
	TermNewRequests    = "new_requests"   // requests admitted (scheduled_new_reqs)
	TermNewReqTokens   = "new_req_tokens" // prompt tokens those requests ship
)

// TermFunc computes one basis term from a step's features.
type TermFunc func(f Features) float64

var termFuncs = map[string]TermFunc{
	TermConst: func(Features) float64 { return 1 },
	TermPrefillStep: func(f Features) float64 {
		if f.PrefillRequests > 0 || f.PrefillTokens > 0 {
			return 1
		}
		return 0
	},
	TermPrefillTokens:    func(f Features) float64 { return f.PrefillTokens },
	TermPrefillKVTokens:  func(f Features) float64 { return f.PrefillKVTokens },
	TermPrefillAttn:      func(f Features) float64 { return f.PrefillAttn },
	TermPrefillRequests:  func(f Features) float64 { return f.PrefillRequests },
	TermDecodeRequests:   func(f Features) float64 { return f.DecodeRequests },
	TermDecodeKVTokens:   func(f Features) float64 { return f.DecodeKVTokens },
	TermDecodeMaxKV:      func(f Features) float64 { return f.DecodeMaxKVTokens },
	TermDecodeBatchMaxKV: func(f Features) float64 { return f.DecodeRequests * f.DecodeMaxKVTokens },
	TermDecodeKVStd:      func(f Features) float64 { return math.Sqrt(max(f.DecodeKVVar, 0)) },
	TermPaddedBatch:      func(f Features) float64 { return f.PaddedBatch },
	TermNewRequests:      func(f Features) float64 { return f.NewRequests },
	TermNewReqTokens:     func(f Features) float64 { return f.NewReqTokens },
}

// DefaultTerms is the basis fitted when none is named: eight terms, the
// "1M steps × 8 features" of the NNLS target (docs/architecture.md#performance-targets).
var DefaultTerms = []string{
	TermConst,
	TermPrefillTokens,
	TermPrefillKVTokens,
	TermPrefillAttn,
	TermDecodeRequests,
	TermDecodeKVTokens,
	TermNewRequests,
	TermNewReqTokens,
}

// KnownTerms lists every term name, sorted.
func KnownTerms() []string {
	out := make([]string, 0, len(termFuncs))
	for k := range termFuncs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Term returns the function of a term name.
func Term(name string) (TermFunc, error) {
	if rest, ok := strings.CutPrefix(name, TermDecodeAttnKV+"("); ok {
		return decodeAttnKV(name, rest)
	}
	if rest, ok := strings.CutPrefix(name, TermExpertsReached+"("); ok {
		return expertsReached(name, rest)
	}
	fn, ok := termFuncs[name]
	if !ok {
		return nil, fmt.Errorf("fpm: unknown term %q (known: %v, %s(wave=W,kv_heads=H[,tile=T,split_programs=N,split_max=M]), %s(experts=E,top_k=K[,skew=S,logit_std=L]))",
			name, KnownTerms(), TermDecodeAttnKV, TermExpertsReached)
	}
	return fn, nil
}

// DecodeAttnKV names the TermDecodeAttnKV term of a wave of wave
// programs, a model of kvHeads KV heads per GPU and a kernel's launch rule
// (the zero DecodeKernel: none known, written without it).
func DecodeAttnKV(wave, kvHeads int, k DecodeKernel) string {
	if k == (DecodeKernel{}) {
		return fmt.Sprintf("%s(wave=%d,kv_heads=%d)", TermDecodeAttnKV, wave, kvHeads)
	}
	return fmt.Sprintf("%s(wave=%d,kv_heads=%d,tile=%d,split_programs=%d,split_max=%d)", TermDecodeAttnKV, wave, kvHeads,
		k.TileTokens, k.SplitPrograms, k.SplitMax)
}

// decodeAttnKV resolves decode_attn_kv(…), rest the name after its
// opening parenthesis: DecodeAttnKV's spelling, or the split regime's of
// recipes fitted before it (sms=S,per_sm=P,kv_heads=H).
func decodeAttnKV(name, rest string) (TermFunc, error) {
	if strings.HasPrefix(rest, "sms=") {
		return splitRegimeKV(name, rest)
	}
	bad := fmt.Errorf("fpm: term %q: want %s(wave=W,kv_heads=H[,tile=T,split_programs=N,split_max=M]), W and H positive integers, T, N and M not negative",
		name, TermDecodeAttnKV)
	var wave, kvh int
	var k DecodeKernel
	if n, err := fmt.Sscanf(rest, "wave=%d,kv_heads=%d,tile=%d,split_programs=%d,split_max=%d)", &wave, &kvh, &k.TileTokens, &k.SplitPrograms, &k.SplitMax); n < 2 ||
		(n < 5 && err == nil) {
		return nil, bad
	}
	if wave <= 0 || kvh <= 0 || k.Validate() != nil || DecodeAttnKV(wave, kvh, k) != name {
		return nil, bad
	}
	w, h := float64(wave), float64(kvh)
	return func(f Features) float64 { return DecodeWalk(f, w, h, k) }, nil
}

// splitRegimeKV resolves decode_attn_kv(sms=S,per_sm=P,kv_heads=H): the
// decode requests × SplitKVLength with a wave of S × P programs.
func splitRegimeKV(name, rest string) (TermFunc, error) {
	var sms, perSM, kvh int
	if n, err := fmt.Sscanf(rest, "sms=%d,per_sm=%d,kv_heads=%d)", &sms, &perSM, &kvh); err != nil || n != 3 || sms <= 0 || perSM <= 0 || kvh <= 0 ||
		fmt.Sprintf("%s(sms=%d,per_sm=%d,kv_heads=%d)", TermDecodeAttnKV, sms, perSM, kvh) != name {
		return nil, fmt.Errorf("fpm: term %q: want %s(sms=S,per_sm=P,kv_heads=H), S, P and H positive integers", name, TermDecodeAttnKV)
	}
	wave := float64(sms * perSM)
	return func(f Features) float64 {
		if f.DecodeRequests <= 0 {
			return 0
		}
		mean := f.DecodeKVTokens / f.DecodeRequests
		return f.DecodeRequests * SplitKVLength(mean, f.DecodeMaxKVTokens, f.DecodeRequests, wave, float64(kvh))
	}, nil
}

// ExpertsReached names the TermExpertsReached term of a routing (skew and
// logit_std only when it is skewed).
func ExpertsReached(r catalog.Routing) string {
	if r.Skew == 0 {
		return fmt.Sprintf("%s(experts=%d,top_k=%d)", TermExpertsReached, r.Experts, r.TopK)
	}
	return fmt.Sprintf("%s(experts=%d,top_k=%d,skew=%s,logit_std=%s)", TermExpertsReached, r.Experts, r.TopK,
		strconv.FormatFloat(r.Skew, 'g', -1, 64), strconv.FormatFloat(r.LogitStd, 'g', -1, 64))
}

// expertsReached resolves experts_reached(experts=E,top_k=K[,skew=S,logit_std=L]),
// rest the name after its opening parenthesis.
func expertsReached(name, rest string) (TermFunc, error) {
	bad := fmt.Errorf("fpm: term %q: want %s(experts=E,top_k=K) or %s(experts=E,top_k=K,skew=S,logit_std=L)", name, TermExpertsReached, TermExpertsReached)
	body, ok := strings.CutSuffix(rest, ")")
	if !ok {
		return nil, bad
	}
	var r catalog.Routing
	for i, kv := range strings.Split(body, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch {
		case i == 0 && k == "experts":
			r.Experts, err = strconv.Atoi(v)
		case i == 1 && k == "top_k":
			r.TopK, err = strconv.Atoi(v)
		case i == 2 && k == "skew":
			r.Skew, err = strconv.ParseFloat(v, 64)
		case i == 3 && k == "logit_std":
			r.LogitStd, err = strconv.ParseFloat(v, 64)
		default:
			return nil, bad
		}
		if err != nil {
			return nil, bad
		}
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("fpm: term %q: %w", name, err)
	}
	if ExpertsReached(r) != name {
		return nil, bad
	}
	probs := r.PickProbs()
	return func(f Features) float64 { return r.Reached(probs, f.PrefillTokens+f.DecodeRequests) }, nil
}

// Basis is an ordered list of resolved terms.
type Basis struct {
	Names []string
	funcs []TermFunc
}

// NewBasis resolves term names; it refuses unknown and duplicate names.
func NewBasis(names []string) (*Basis, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("fpm: empty basis: name at least one term")
	}
	b := &Basis{Names: append([]string(nil), names...), funcs: make([]TermFunc, len(names))}
	seen := map[string]bool{}
	for i, n := range names {
		if seen[n] {
			return nil, fmt.Errorf("fpm: term %q named twice", n)
		}
		seen[n] = true
		fn, err := Term(n)
		if err != nil {
			return nil, err
		}
		b.funcs[i] = fn
	}
	return b, nil
}

// Len is the number of terms.
func (b *Basis) Len() int { return len(b.funcs) }

// Eval writes the term values of f into dst (len(dst) ≥ Len()) and returns
// dst[:Len()].
func (b *Basis) Eval(f Features, dst []float64) []float64 {
	dst = dst[:len(b.funcs)]
	for i, fn := range b.funcs {
		dst[i] = fn(f)
	}
	return dst
}

package cluster

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	"github.com/steplab/steplab/sim/rng"
)

// Router names (RouterSpec.Name).
const (
	RouterRoundRobin    = "round_robin"
	RouterLeastRequests = "least_requests"
	RouterLeastKV       = "least_kv"
	RouterSession       = "session"
	RouterKV            = "kv"
	RouterVLLMDP        = "vllm_dp"
)

// RouterNames lists the routers a scenario may name.
var RouterNames = []string{RouterRoundRobin, RouterLeastRequests, RouterLeastKV, RouterSession, RouterKV, RouterVLLMDP}

// Router defaults.
const (
	// DefaultOverlapWeight is Dynamo's kv_overlap_score_weight default.
	DefaultOverlapWeight = 1.0
	// DefaultSessionTokens is the prompt depth that keys a session when the
	// trace has no session key: a system prompt and the first user turn.
	DefaultSessionTokens = 1024
	// DefaultStatsIntervalMs is vLLM's DP coordinator stats interval.
	DefaultStatsIntervalMs = 100.0
)

// Check refuses an unknown router name or bad parameters, naming
// the field and listing the valid names.
func (r RouterSpec) Check() error {
	name := r.Name
	if name == "" {
		name = RouterRoundRobin
	}
	known := false
	for _, n := range RouterNames {
		known = known || n == name
	}
	if !known {
		return fmt.Errorf("cluster.router.name %q: use one of %s", r.Name, strings.Join(RouterNames, ", "))
	}
	if r.OverlapWeight != nil && (*r.OverlapWeight < 0 || math.IsNaN(*r.OverlapWeight) || math.IsInf(*r.OverlapWeight, 0)) {
		return fmt.Errorf("cluster.router.overlap_weight is %g: use a finite weight >= 0 (0: load only)", *r.OverlapWeight)
	}
	if r.Temperature < 0 || math.IsNaN(r.Temperature) || math.IsInf(r.Temperature, 0) {
		return fmt.Errorf("cluster.router.temperature is %g: use 0 (lowest cost wins) or a positive temperature", r.Temperature)
	}
	if r.SessionTokens < 0 {
		return fmt.Errorf("cluster.router.session_tokens is %d: use a prompt depth in tokens, or 0 for %d", r.SessionTokens, DefaultSessionTokens)
	}
	if r.StatsIntervalMs != nil && !(*r.StatsIntervalMs >= 0) {
		return fmt.Errorf("cluster.router.stats_interval_ms is %g: use 0 (counts always current) or more", *r.StatsIntervalMs)
	}
	return nil
}

// routeReq is what a router sees of a request.
type routeReq struct {
	id     string
	at     int64
	prompt int
	hashes []uint64 // engine-block prefix hashes
}

// router picks a worker among candidates (one pool's engines, in pool
// order). It writes each candidate's score (lower is better; what it means
// depends on the router) into scores and returns the chosen index.
type router interface {
	route(r *routeReq, ws []*worker, scores []float64) int
}

// newRouter builds the router of a pool. The decode pool of a
// disaggregated cluster routes on load only (Dynamo's decode router sets
// the overlap weight to 0: the prompt's KV arrives with the request).
func newRouter(spec RouterSpec, decode bool, r *rng.Stream) router {
	switch spec.Name {
	case RouterLeastRequests:
		return &argmin{score: func(w *worker) float64 { return float64(w.outstanding) }}
	case RouterLeastKV:
		return &argmin{score: func(w *worker) float64 {
			l := w.eng.Load()
			return float64(l.KVBlocksUsed) / float64(max(1, l.KVBlocksTotal))
		}}
	case RouterSession:
		depth := spec.SessionTokens
		if depth == 0 {
			depth = DefaultSessionTokens
		}
		return &session{depth: depth, sticky: map[uint64]int{}}
	case RouterKV:
		wt := DefaultOverlapWeight
		if spec.OverlapWeight != nil {
			wt = *spec.OverlapWeight
		}
		if decode {
			wt = 0
		}
		return &kvRouter{weight: wt, temperature: spec.Temperature, rand: r}
	case RouterVLLMDP:
		iv := DefaultStatsIntervalMs
		if spec.StatsIntervalMs != nil {
			iv = *spec.StatsIntervalMs
		}
		return &vllmDP{intervalNs: int64(iv * 1e6), tick: -1}
	}
	return &roundRobin{}
}

// roundRobin sends requests to the workers in turn. Its score is how many
// turns away each worker was.
type roundRobin struct{ next int }

func (r *roundRobin) route(_ *routeReq, ws []*worker, scores []float64) int {
	c := r.next % len(ws)
	r.next = c + 1
	for i := range ws {
		scores[i] = float64((i - c + len(ws)) % len(ws))
	}
	return c
}

// argmin picks the lowest score; ties go to the first one after the
// previous choice, so an idle cluster still spreads its requests.
type argmin struct {
	score func(*worker) float64
	next  int
}

func (a *argmin) route(_ *routeReq, ws []*worker, scores []float64) int {
	for i, w := range ws {
		scores[i] = a.score(w)
	}
	c := lowestFrom(scores, a.next)
	a.next = c + 1
	return c
}

// lowestFrom is the index of the lowest score, scanning from start
// (cyclically): the first of equals after start wins.
func lowestFrom(scores []float64, start int) int {
	n := len(scores)
	best := start % n
	for k := 1; k < n; k++ {
		i := (start + k) % n
		if scores[i] < scores[best] {
			best = i
		}
	}
	return best
}

// session keeps a session on the worker its first request went to (the
// least loaded then). The key is the prompt's prefix hash at depth tokens
// (the last hash of a shorter prompt), or the request id without hashes.
type session struct {
	depth  int
	sticky map[uint64]int
	next   int
}

func (s *session) key(r *routeReq, blockSize int) uint64 {
	if len(r.hashes) == 0 {
		h := fnv.New64a()
		h.Write([]byte(r.id))
		return h.Sum64()
	}
	k := min(len(r.hashes), max(1, s.depth/blockSize)) - 1
	return r.hashes[k]
}

func (s *session) route(r *routeReq, ws []*worker, scores []float64) int {
	for i, w := range ws {
		scores[i] = float64(w.outstanding)
	}
	k := s.key(r, ws[0].eng.BlockSize())
	if c, ok := s.sticky[k]; ok {
		return c
	}
	c := lowestFrom(scores, s.next)
	s.next = c + 1
	s.sticky[k] = c
	return c
}

// kvRouter is Dynamo's KV-aware router (ai-dynamo/dynamo
// lib/llm/src/kv_router/scheduler.rs @ db19bd2a, DefaultWorkerSelector and
// softmax_sample; the loads of lib/llm/src/kv_router/sequence.rs): for
// each worker w with o cached leading blocks of the prompt (block size b,
// isl prompt tokens),
//
//	prefill_blocks = (active_prefill_tokens(w) + isl − o·b) / b
//	decode_blocks  = active_blocks(w) + ceil(isl/b) − o
//	logit          = overlap_weight · prefill_blocks + decode_blocks
//
// and the lowest logit wins (temperature 0), ties drawn at random; with a
// temperature T > 0 the worker is drawn with probability ∝
// exp(−logit/((max−min)·T)). active_prefill_tokens are the uncached
// prompt tokens of requests routed to w that have no first token yet;
// active_blocks are the KV blocks w holds (Dynamo predicts them from its
// routing decisions and KV events; the simulator reads them).
type kvRouter struct {
	weight, temperature float64
	rand                *rng.Stream
	ties                []int
}

func (k *kvRouter) logits(r *routeReq, ws []*worker, scores []float64) {
	for i, w := range ws {
		bs := float64(w.eng.BlockSize())
		o := float64(w.overlap(r.hashes))
		isl := float64(r.prompt)
		prefill := (float64(w.prefillTokens) + max(0, isl-o*bs)) / bs
		decode := float64(w.eng.Load().KVBlocksUsed) + math.Ceil(isl/bs) - o
		scores[i] = k.weight*prefill + decode
	}
}

func (k *kvRouter) route(r *routeReq, ws []*worker, scores []float64) int {
	k.logits(r, ws, scores)
	lo, hi := scores[0], scores[0]
	for _, s := range scores {
		lo, hi = min(lo, s), max(hi, s)
	}
	if k.temperature > 0 && hi > lo {
		// Softmax over −logit/(range·T), drawn with one uniform.
		var sum float64
		for _, s := range scores {
			sum += math.Exp((lo - s) / ((hi - lo) * k.temperature))
		}
		u := k.rand.Float64() * sum
		for i, s := range scores {
			u -= math.Exp((lo - s) / ((hi - lo) * k.temperature))
			if u <= 0 {
				return i
			}
		}
		return len(scores) - 1
	}
	k.ties = k.ties[:0]
	for i, s := range scores {
		if s == lo {
			k.ties = append(k.ties, i)
		}
	}
	if len(k.ties) == 1 {
		return k.ties[0]
	}
	return k.ties[k.rand.IntN(len(k.ties))]
}

// vllmDP is vLLM's data-parallel load balancer (vllm-project/vllm
// vllm/v1/engine/core_client.py @ 364631ab, DPLBAsyncMPClient
// .get_core_engine_for_request): the engine with the lowest
// waiting·4 + running wins, ties to the lowest rank. The counts are the
// coordinator's, published every stats interval; between publications the
// client adds one waiting request to each engine it picks.
type vllmDP struct {
	intervalNs int64
	tick       int64
	counts     [][2]int
}

func (v *vllmDP) route(r *routeReq, ws []*worker, scores []float64) int {
	tick := r.at
	if v.intervalNs > 0 {
		tick = r.at / v.intervalNs
	}
	if tick != v.tick || len(v.counts) != len(ws) {
		v.tick = tick
		v.counts = v.counts[:0]
		for _, w := range ws {
			l := w.eng.Load()
			v.counts = append(v.counts, [2]int{l.Waiting, l.Running})
		}
	}
	for i, c := range v.counts {
		scores[i] = float64(c[0]*4 + c[1])
	}
	c := lowestFrom(scores, 0)
	v.counts[c][0]++
	return c
}

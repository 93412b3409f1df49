package planner

import (
	"fmt"
	"slices"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/internal/hist"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim/cluster"
)

// Bounds are a candidate's analytic bounds from its prior: each pool
// engine's FPM, device time alone, with no queueing, host time, expert
// pricing or KV transfer, so the latencies are lower bounds and the rate
// an optimistic bound.
type Bounds struct {
	// TTFTZeroLoadMs is the percentile over the workload's prompts of
	// their prefill on an idle engine, chunked at max_num_batched_tokens.
	TTFTZeroLoadMs float64 `json:"ttft_zero_load_ms"`
	// ITLBatch1Ms is the percentile over the prompts of one decode step
	// alone at the prompt's context.
	ITLBatch1Ms float64 `json:"itl_batch1_ms"`
	// MaxRPS bounds the rate: the prefill and decode engine-time a mean
	// request needs, the decode batch at max_num_seqs, the KV cache and
	// the ITL objective's largest batch.
	MaxRPS float64 `json:"max_rps"`
}

// lengths are the workload's measured requests (warm-up excluded).
type lengths struct {
	prompt, output         []int64
	meanPrompt, meanOutput float64
}

// workloadLengths reads the plan's workload once (the lengths do not
// depend on the rate).
func workloadLengths(p *scenario.Plan) (lengths, error) {
	var l lengths
	src, _, cleanup, err := p.Source()
	if err != nil {
		return l, err
	}
	defer cleanup()
	if src == nil {
		return l, fmt.Errorf("workload.kind %s has no requests to plan for", p.Scenario.Workload.Kind)
	}
	for {
		a, ok := src.Next()
		if !ok {
			break
		}
		if a.Warmup {
			continue
		}
		l.prompt = append(l.prompt, int64(a.PromptTokens))
		l.output = append(l.output, int64(a.OutputTokens))
		l.meanPrompt += float64(a.PromptTokens)
		l.meanOutput += float64(a.OutputTokens)
	}
	if err := src.Err(); err != nil {
		return l, err
	}
	if len(l.prompt) == 0 {
		return l, fmt.Errorf("workload: no measured requests to plan for")
	}
	n := float64(len(l.prompt))
	l.meanPrompt, l.meanOutput = l.meanPrompt/n, l.meanOutput/n
	return l, nil
}

// prefillNs prices one request's prefill chunk of chunk tokens after
// computed tokens, shipped in full when it is the first.
func prefillNs(fpModel fpm.FPM, chunk, computed, prompt int64) float64 {
	var b features.Batch
	b.Prefill(chunk, computed, prompt)
	var st datasets.Step
	if computed == 0 {
		b.New(prompt)
		st.NumNewReqs = 1
	}
	b.Fill(&st)
	return fpModel.PredictNs(features.Of(&st))
}

// decodeNs prices a decode step of batch requests at context ctx each.
func decodeNs(fpModel fpm.FPM, batch int, ctx int64) float64 {
	var b features.Batch
	for range batch {
		b.Decode(ctx)
	}
	var st datasets.Step
	b.Fill(&st)
	return fpModel.PredictNs(features.Of(&st))
}

// zeroLoadPrefillNs is the prompt's prefill alone, in chunks of budget.
func zeroLoadPrefillNs(fpModel fpm.FPM, prompt, budget int64) float64 {
	t := 0.0
	for done := int64(0); done < prompt; done += budget {
		t += prefillNs(fpModel, min(budget, prompt-done), done, prompt)
	}
	return t
}

// percentile is the q-th percentile (0-100) of xs, nearest rank.
func percentile(xs []float64, q int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return hist.NearestRank(s, float64(q))
}

// bounds prices the candidate's analytic bounds.
func bounds(p *cluster.Plan, l lengths, slo SLO) Bounds {
	pre, dec := p.Pools[0], p.Pools[len(p.Pools)-1]
	ttft, itl := make([]float64, len(l.prompt)), make([]float64, len(l.prompt))
	budget := int64(pre.Engine.Sched.MaxNumBatchedTokens)
	for i, n := range l.prompt {
		ttft[i] = zeroLoadPrefillNs(pre.Engine.FPM, n, budget)
		itl[i] = decodeNs(dec.Engine.FPM, 1, n)
	}
	b := Bounds{TTFTZeroLoadMs: percentile(ttft, slo.Percentile) / 1e6, ITLBatch1Ms: percentile(itl, slo.Percentile) / 1e6}
	// Engine-seconds a mean request needs: its prompt at the full token
	// budget's per-token price, its output at the largest decode batch
	// the ITL objective, max_num_seqs and the KV cache allow.
	preS := prefillNs(pre.Engine.FPM, budget, 0, budget) / float64(budget) * l.meanPrompt / 1e9
	ctx := int64(l.meanPrompt + l.meanOutput/2)
	e := dec.Engine.Sched
	kvReqs := int(float64(e.NumGPUBlocks*e.BlockSize) / (l.meanPrompt + l.meanOutput))
	batch := decodeBatch(dec.Engine.FPM, max(1, min(e.MaxNumSeqs, kvReqs)), ctx, slo.ITLMs*1e6)
	decS := decodeNs(dec.Engine.FPM, batch, ctx) / float64(batch) * l.meanOutput / 1e9
	if len(p.Pools) == 1 {
		b.MaxRPS = float64(pre.Replicas) / (preS + decS)
	} else {
		b.MaxRPS = min(float64(pre.Replicas)/preS, float64(dec.Replicas)/decS)
	}
	return b
}

// decodeBatch is the largest batch up to maxB whose decode step at ctx
// stays within itlNs (1 when none does): the step time grows with the
// batch, so a bisection finds it.
func decodeBatch(fpModel fpm.FPM, maxB int, ctx int64, itlNs float64) int {
	lo, hi := 1, maxB
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if decodeNs(fpModel, mid, ctx) <= itlNs {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Summary is what a plan found over its candidates (in candidate order).
type Summary struct {
	Candidates int `json:"candidates"`
	Simulated  int `json:"simulated"`
	Feasible   int `json:"feasible"`
	// Excluded counts the candidates each constraint excluded (Constraints
	// order; zero counts left out).
	Excluded []Exclusion `json:"excluded,omitempty"`
	// Frontier are the indices of the feasible candidates no other beats
	// on every one of goodput per GPU, cost per million tokens, TTFT and
	// ITL, cheapest first.
	Frontier []int `json:"frontier"`
	// Chosen is the cheapest per token of the candidates that reach the
	// target (ties: fewer GPUs, then the earlier); -1 when none does, and
	// Why says why.
	Chosen int    `json:"chosen"`
	Why    string `json:"why,omitempty"`
	// Notes warn where a figure stands on less than it seems.
	Notes []string `json:"notes,omitempty"`
}

// burstFactor is how far above the prior's rate bound a goodput has to be
// to suggest that the workload ended before a queue could form: the bound
// leaves out what mixed prefill-decode steps save, which on the worked
// plans put goodputs up to a third above it.
const burstFactor = 2

// Exclusion is how many candidates a constraint excluded.
type Exclusion struct {
	Constraint string `json:"constraint"`
	Count      int    `json:"count"`
}

// Summarise takes the frontier and the choice of a plan's candidates.
func Summarise(cs []*Candidate) Summary {
	s := Summary{Candidates: len(cs), Chosen: -1, Frontier: []int{}}
	count := map[string]int{}
	for i, c := range cs {
		count[c.Pruned]++
		if c.Simulations > 0 {
			s.Simulated++
		}
		if !c.Feasible() {
			continue
		}
		s.Feasible++
		if !slices.ContainsFunc(cs, func(o *Candidate) bool { return o.Feasible() && dominates(o, c) }) {
			s.Frontier = append(s.Frontier, i)
		}
		if c.MeetsTarget && (s.Chosen < 0 || better(c, cs[s.Chosen])) {
			s.Chosen = i
		}
	}
	for _, k := range Constraints {
		if count[k] > 0 {
			s.Excluded = append(s.Excluded, Exclusion{k, count[k]})
		}
	}
	if n := countAbove(cs); n > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d candidates met the SLO at over %d times the prior's rate bound: the workload may be too short for a queue to form; give more requests (workload.limit, workload.requests)",
			n, burstFactor))
	}
	slices.SortStableFunc(s.Frontier, func(a, b int) int { return cmp.Compare(cs[a].CostPerMTokens, cs[b].CostPerMTokens) })
	switch {
	case s.Candidates == 0:
		s.Why = "the search space is empty"
	case s.Feasible == 0:
		most := slices.MaxFunc(s.Excluded, func(a, b Exclusion) int { return cmp.Compare(a.Count, b.Count) })
		var parts []string
		for _, e := range s.Excluded {
			parts = append(parts, fmt.Sprintf("%s %d", e.Constraint, e.Count))
		}
		s.Why = fmt.Sprintf("no feasible candidate of %d: %s excluded the most (%d; %s)", s.Candidates, describe(most.Constraint),
			most.Count, strings.Join(parts, ", "))
	case s.Chosen < 0:
		best := slices.MaxFunc(s.Frontier, func(a, b int) int { return cmp.Compare(cs[a].GoodputRPS, cs[b].GoodputRPS) })
		s.Why = fmt.Sprintf("no feasible candidate reaches plan.target_rps: the highest goodput is %.3g req/s (candidate %d, %d GPUs); search more replicas",
			cs[best].GoodputRPS, best, cs[best].GPUs)
	}
	return s
}

// countAbove counts the feasible candidates whose goodput exceeds
// burstFactor times their bound.
func countAbove(cs []*Candidate) int {
	n := 0
	for _, c := range cs {
		if c.Feasible() && c.GoodputRPS > burstFactor*c.Bounds.MaxRPS {
			n++
		}
	}
	return n
}

// describe names a constraint in a sentence.
func describe(c string) string {
	switch c {
	case ByMemory:
		return "memory (the model or its KV cache does not fit)"
	case ByGPUs:
		return "the GPU count on offer"
	case ByTTFTZeroLoad:
		return "TTFT at zero load"
	case ByITLBatch1:
		return "ITL at batch 1"
	case ByThroughput:
		return "the throughput bound against target_rps"
	}
	return "the SLO under simulated load"
}

// dominates: a is at least as good as b on every objective and better on
// one.
func dominates(a, b *Candidate) bool {
	ge := a.TokensPerSPerGPU >= b.TokensPerSPerGPU && a.CostPerMTokens <= b.CostPerMTokens && a.TTFTMs <= b.TTFTMs && a.ITLMs <= b.ITLMs
	gt := a.TokensPerSPerGPU > b.TokensPerSPerGPU || a.CostPerMTokens < b.CostPerMTokens || a.TTFTMs < b.TTFTMs || a.ITLMs < b.ITLMs
	return ge && gt
}

// better orders the choice: cheaper per token, then fewer GPUs.
func better(a, b *Candidate) bool {
	if a.CostPerMTokens != b.CostPerMTokens {
		return a.CostPerMTokens < b.CostPerMTokens
	}
	return a.GPUs < b.GPUs
}

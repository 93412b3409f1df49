package sim

import (
	"cmp"
	"fmt"
	"slices"
)

// Overload signs, judged from what the requests and steps of a run
// recorded (so the same run gives the same notes):
//   - any preemption: the KV cache could not hold the running requests;
//   - a growing queue: the median request of the last quarter of arrivals
//     waited for its first token over queueGrowth times as long as that of
//     the first quarter, and over a second (a median, so one long prompt
//     is no queue);
//   - TTFT beyond the run: a request waited for its first token longer
//     than the whole workload took to arrive.
const (
	queueGrowth     = 4
	queueGrowthMinS = 1.0
)

// arrivalTTFT is one finished request's arrival and time to first token.
type arrivalTTFT struct{ arrival, ttft int64 }

// overload returns the notes that say a run overloaded its engine; none
// for a run that kept up.
func (m *RunMetrics) overload(r Report) []string {
	var notes []string
	if r.Preemptions > 0 {
		notes = append(notes, fmt.Sprintf("%s: the KV cache could not hold the running requests (raise engine.num_gpu_blocks, engine.gpu_memory_utilization or tensor_parallel, or lower the load)",
			count(r.Preemptions, "preemption")))
	}
	if len(m.ttfts) < 8 || m.LastArrival <= m.FirstArrival {
		return notes
	}
	reqs := slices.Clone(m.ttfts)
	slices.SortStableFunc(reqs, func(a, b arrivalTTFT) int { return cmp.Compare(a.arrival, b.arrival) })
	q := len(reqs) / 4
	first, last := medianTTFT(reqs[:q]), medianTTFT(reqs[len(reqs)-q:])
	if last > queueGrowth*first && last > queueGrowthMinS*1e9 {
		notes = append(notes, fmt.Sprintf("the queue grows: requests arriving in the last quarter of the workload waited %.1f s for their first token (median), those of the first quarter %.3f s (the engine serves fewer requests per second than arrive)",
			last/1e9, first/1e9))
	}
	if span := m.LastArrival - m.FirstArrival; r.TTFT.Max*1e6 > float64(span) {
		notes = append(notes, fmt.Sprintf("TTFT beyond the run: a request waited %.1f s for its first token, longer than the %.1f s over which the workload arrived",
			r.TTFT.Max/1e3, float64(span)/1e9))
	}
	return notes
}

// medianTTFT is the upper median of the requests' TTFTs.
func medianTTFT(rs []arrivalTTFT) float64 {
	ts := make([]int64, len(rs))
	for i, r := range rs {
		ts[i] = r.ttft
	}
	slices.Sort(ts)
	return float64(ts[len(ts)/2])
}

// count is "1 preemption", "2 preemptions".
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

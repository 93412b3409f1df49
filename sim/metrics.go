package sim

import (
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/hist"
)

// Summary is the distribution of one latency, in milliseconds.
type Summary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// summarize is a latency histogram (ns) in milliseconds.
func summarize(h *hist.Hist[hist.Nanos]) Summary {
	const ms = 1e6
	return Summary{Count: h.Count(), Mean: h.Mean() / ms, P50: h.Quantile(0.5) / ms, P90: h.Quantile(0.9) / ms,
		P99: h.Quantile(0.99) / ms, Max: h.Max() / ms}
}

// RunMetrics accumulates the request metrics of a run: TTFT, inter-token
// latency (per request: (finish − first token)/(outputs − 1)), end-to-end
// latency, throughput, and step counts.
type RunMetrics struct {
	TTFT, ITL, E2E hist.Hist[hist.Nanos] // ns

	Requests, Finished, Unfinished, Aborted int64
	OutputTokens                            int64
	FirstArrival, LastArrival, LastFinish   int64
	Preemptions                             int64
	ttfts                                   []arrivalTTFT // finished requests, for the overload notes

	// Steps by kind, kinds in order of appearance. A run has two or three
	// kinds, so comparing strings (equal pointers first) costs less than
	// hashing the kind into a map every step.
	kinds     []string
	kindSteps []int64
}

// NewRunMetrics returns an empty accumulator.
func NewRunMetrics() *RunMetrics {
	return &RunMetrics{FirstArrival: -1}
}

// Step implements Sink.
func (m *RunMetrics) Step(s *datasets.Step, _ []datasets.StepRequest) error {
	m.countKind(s.Kind)
	m.Preemptions += int64(s.NumPreempted)
	return nil
}

func (m *RunMetrics) countKind(kind string) {
	for i, k := range m.kinds {
		if k == kind {
			m.kindSteps[i]++
			return
		}
	}
	m.kinds = append(m.kinds, kind)
	m.kindSteps = append(m.kindSteps, 1)
}

// Request implements Sink.
func (m *RunMetrics) Request(r *datasets.Request) error {
	m.Requests++
	if m.FirstArrival < 0 || r.ArrivalNs < m.FirstArrival {
		m.FirstArrival = r.ArrivalNs
	}
	m.LastArrival = max(m.LastArrival, r.ArrivalNs)
	switch r.Status {
	case datasets.StatusFinished:
		m.Finished++
		m.OutputTokens += r.OutputTokens
		m.LastFinish = max(m.LastFinish, r.FinishNs)
		if r.FirstTokenNs >= 0 {
			m.TTFT.Add(float64(r.FirstTokenNs - r.ArrivalNs))
			m.ttfts = append(m.ttfts, arrivalTTFT{r.ArrivalNs, r.FirstTokenNs - r.ArrivalNs})
			if r.OutputTokens > 1 {
				m.ITL.Add(float64((r.FinishNs - r.FirstTokenNs) / (r.OutputTokens - 1)))
			}
		}
		m.E2E.Add(float64(r.FinishNs - r.ArrivalNs))
	case datasets.StatusAborted:
		m.Aborted++
	default:
		m.Unfinished++
	}
	return nil
}

// Report is the JSON summary of a run.
type Report struct {
	Requests         int64            `json:"requests"`
	Finished         int64            `json:"finished"`
	Unfinished       int64            `json:"unfinished"`
	Rejected         int64            `json:"rejected"`
	Preemptions      int64            `json:"preemptions"`
	DurationS        float64          `json:"duration_s"`
	RequestsPerS     float64          `json:"throughput_requests_per_s"`
	OutputTokensPerS float64          `json:"throughput_output_tokens_per_s"`
	TTFT             Summary          `json:"ttft"`
	ITL              Summary          `json:"itl"`
	E2E              Summary          `json:"e2e"`
	Steps            map[string]int64 `json:"steps_by_kind"`
	// Overload says how the run overloaded its engine (preemptions, a
	// growing queue, TTFT beyond the run); empty when it kept up.
	Overload []string `json:"overload,omitempty"`
}

// Report summarises the run.
func (m *RunMetrics) Report() Report {
	r := Report{Requests: m.Requests, Finished: m.Finished, Unfinished: m.Unfinished, Rejected: m.Aborted,
		Preemptions: m.Preemptions, TTFT: summarize(&m.TTFT), ITL: summarize(&m.ITL), E2E: summarize(&m.E2E),
		Steps: make(map[string]int64, len(m.kinds))}
	for i, k := range m.kinds {
		r.Steps[k] = m.kindSteps[i]
	}
	if m.FirstArrival >= 0 && m.LastFinish > m.FirstArrival {
		r.DurationS = float64(m.LastFinish-m.FirstArrival) / 1e9
		r.RequestsPerS = float64(m.Finished) / r.DurationS
		r.OutputTokensPerS = float64(m.OutputTokens) / r.DurationS
	}
	r.Overload = m.overload(r)
	return r
}

// Tee sends everything to several sinks in order.
type Tee []Sink

// Step implements Sink.
func (t Tee) Step(s *datasets.Step, rs []datasets.StepRequest) error {
	for _, k := range t {
		if err := k.Step(s, rs); err != nil {
			return err
		}
	}
	return nil
}

// Request implements Sink.
func (t Tee) Request(r *datasets.Request) error {
	for _, k := range t {
		if err := k.Request(r); err != nil {
			return err
		}
	}
	return nil
}

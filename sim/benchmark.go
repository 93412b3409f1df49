package sim

import (
	"fmt"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/sim/sched"
	"github.com/steplab/steplab/sim/workload"
)

// Source is the grid as the arrivals a driver hands to e (package
// sim/cluster's Drive): one point at a time, each once e is idle after
// the one before and the gap has passed (1 ms when none), its deferred
// requests once its first step is scheduled. e tags each step it records:
// the step the policy measures is "measured", the others "scaffolding".
// A point e cannot schedule ends the source with an error naming it.
func (b Bench) Source(e *Engine) (workload.Peeker, error) {
	points, err := workload.BuildGrid(b.Grid)
	if err != nil {
		return nil, fmt.Errorf("benchmark: %w", err)
	}
	s := &benchSource{e: e, points: points, gap: b.GapNs, at: e.Now()}
	if s.gap <= 0 {
		s.gap = 1_000_000
	}
	e.Tag = s.tag
	return s, nil
}

// benchSource runs the grid's points in turn: a point of an eager shape
// twice, its first run a discarded warm-up replica.
type benchSource struct {
	e      *Engine
	points []workload.Point
	gap    int64

	i, run  int   // the point and its run, running or next
	at      int64 // when the next run starts
	running bool
	cur     *workload.Point
	replica bool // the run is an eager warm-up replica
	ordinal int  // the run's steps recorded so far
	// arr are the run's arrivals not handed over yet, late its deferred
	// ones; first is the steps e had scheduled before the run.
	arr, late []Arrival
	first     int64
	lateAt    bool // late carries its arrival time
	err       error
}

// NextAt implements workload.Peeker.
func (s *benchSource) NextAt() (int64, workload.Status) {
	switch {
	case s.err != nil:
		return 0, workload.Exhausted
	case len(s.arr) > 0:
		return s.arr[0].AtNs, workload.Ready
	case len(s.late) > 0:
		if s.e.Scheduled() == s.first {
			return 0, workload.Waiting
		}
		if !s.lateAt { // the first step is scheduled: the deferred requests join the next one
			for i := range s.late {
				s.late[i].AtNs = s.e.Now()
			}
			s.lateAt = true
		}
		return s.late[0].AtNs, workload.Ready
	case s.running && !s.e.Idle():
		return 0, workload.Waiting
	case s.running && s.e.Busy():
		s.err = fmt.Errorf("benchmark point %d (%s, B=%d) could not run: the engine cannot schedule its requests (KV blocks or budget too small)",
			s.cur.BenchmarkID, s.cur.Type, s.cur.BatchSize)
		return 0, workload.Exhausted
	case s.running:
		s.running, s.at = false, s.e.Now()+s.gap
		if s.run++; s.run == s.runs() {
			s.i, s.run = s.i+1, 0
		}
	}
	if s.i == len(s.points) {
		return 0, workload.Exhausted
	}
	s.start()
	return s.arr[0].AtNs, workload.Ready
}

// runs is how many times the current point runs.
func (s *benchSource) runs() int {
	if s.points[s.i].EagerWarmup {
		return 2
	}
	return 1
}

// start makes the next run's arrivals, at s.at.
func (s *benchSource) start() {
	s.cur = &s.points[s.i]
	s.replica, s.ordinal = s.run < s.runs()-1, 0
	arr := s.cur.Arrivals(fmt.Sprintf("bench-%d-%d-", s.i, s.run), s.at)
	n := len(arr) - s.cur.Plan.Deferred
	s.arr, s.late, s.lateAt = arr[:n], arr[n:], false
	s.first, s.running = s.e.Scheduled(), true
}

// Next implements workload.Source.
func (s *benchSource) Next() (Arrival, bool) {
	if _, st := s.NextAt(); st != workload.Ready {
		return Arrival{}, false
	}
	if len(s.arr) > 0 {
		a := s.arr[0]
		s.arr = s.arr[1:]
		return a, true
	}
	a := s.late[0]
	s.late = s.late[1:]
	return a, true
}

// Err implements workload.Source.
func (s *benchSource) Err() error { return s.err }

// tag classifies a step of the current run (Engine.Tag).
func (s *benchSource) tag(st *datasets.Step, rows []datasets.StepRequest, _ *sched.Output) {
	cur := s.cur
	st.Role = datasets.RoleScaffolding
	st.BenchmarkID = cur.BenchmarkID
	st.SampleReason = strings.Join(cur.SampleReasons, ",")
	switch {
	case cur.Warmup:
		st.SampleReason = workload.ReasonWarmup
	case s.replica:
		st.SampleReason = "eager_warmup"
	case s.ordinal == cur.Plan.MeasuredStep:
		st.Role = datasets.RoleMeasured
	}
	if cur.Type != workload.PointPrefill {
		asDecode(st, rows)
	}
	s.ordinal++
}

// asDecode records the decode requests of a benchmark step at their
// coordinate: each computes one token over its KV context. On the
// admission step those requests are new, so vLLM's classification (and
// Dynamo's FPM) would call them prefill; the benchmark point is a decode
// point whichever step measures it, as Dynamo's artifact records it. The
// new-request and payload columns still show that the step admitted them.
// A mixed point's chunk stays prefill.
func asDecode(s *datasets.Step, rows []datasets.StepRequest) {
	if s.NumPrefillRequests == 0 {
		return
	}
	var b features.Batch
	for i := range rows {
		if !strings.HasSuffix(rows[i].ReqID, workload.ChunkID) {
			rows[i].IsPrefill = false
		}
		b.Add(&rows[i])
	}
	shipped := s.NewReqTokens // the admission still shipped them in full
	b.Fill(s)
	s.NewReqTokens = shipped
	s.Kind = features.Of(s).Kind()
}

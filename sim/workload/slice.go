package workload

// Slice replays arrivals held in memory, in the order given (non-decreasing
// AtNs): a recorded trace already loaded, a hand-made workload.
type Slice struct {
	a []Arrival
	i int
}

// NewSlice replays a.
func NewSlice(a []Arrival) *Slice { return &Slice{a: a} }

// NextAt implements Peeker.
func (s *Slice) NextAt() (int64, Status) {
	if s.i < len(s.a) {
		return s.a[s.i].AtNs, Ready
	}
	return 0, Exhausted
}

// Next implements Source.
func (s *Slice) Next() (Arrival, bool) {
	if s.i < len(s.a) {
		s.i++
		return s.a[s.i-1], true
	}
	return Arrival{}, false
}

// Err implements Source: a slice never fails.
func (s *Slice) Err() error { return nil }

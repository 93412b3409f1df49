// Package slab hands out values of one type from chunks allocated a few
// hundred at a time: objects made once per request (an engine's and a
// scheduler's request state) then cost one allocation per chunk instead of
// one each, and the garbage collector sees fewer, larger objects. A chunk
// is freed once nothing points into it, so a slab suits objects that die
// roughly in the order they were made.
package slab

// chunk is the number of values allocated at once.
const chunk = 128

// Slab allocates values of type T. The zero Slab is ready to use; it is not
// safe for concurrent use.
type Slab[T any] struct{ free []T }

// New returns a pointer to a zero T.
func (s *Slab[T]) New() *T {
	if len(s.free) == 0 {
		s.free = make([]T, chunk)
	}
	v := &s.free[0]
	s.free = s.free[1:]
	return v
}

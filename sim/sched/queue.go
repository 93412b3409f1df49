package sched

// deque is a ring buffer of requests: the WAITING queue. Arrivals go to the
// back, preempted requests to the front.
type deque struct {
	buf  []*reqState
	head int
	n    int
}

func (q *deque) len() int { return q.n }

func (q *deque) at(i int) *reqState { return q.buf[(q.head+i)&(len(q.buf)-1)] }

func (q *deque) grow() {
	if q.n < len(q.buf) {
		return
	}
	size := 2 * len(q.buf)
	if size == 0 {
		size = 16
	}
	nb := make([]*reqState, size)
	for i := 0; i < q.n; i++ {
		nb[i] = q.at(i)
	}
	q.buf, q.head = nb, 0
}

func (q *deque) pushBack(st *reqState) {
	q.grow()
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = st
	q.n++
}

func (q *deque) pushFront(st *reqState) {
	q.grow()
	q.head = (q.head - 1) & (len(q.buf) - 1)
	q.buf[q.head] = st
	q.n++
}

func (q *deque) front() *reqState { return q.buf[q.head] }

func (q *deque) popFront() *reqState {
	st := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return st
}

// remove deletes st, keeping the order of the others. O(n); used for aborts
// and for requests that finish while preempted, both rare.
func (q *deque) remove(st *reqState) bool {
	for i := 0; i < q.n; i++ {
		if q.at(i) == st {
			for j := i; j < q.n-1; j++ {
				q.buf[(q.head+j)&(len(q.buf)-1)] = q.at(j + 1)
			}
			q.buf[(q.head+q.n-1)&(len(q.buf)-1)] = nil
			q.n--
			return true
		}
	}
	return false
}

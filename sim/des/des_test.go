package des

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/sim/rng"
)

func TestQueueOrdersByTimeThenSequence(t *testing.T) {
	tests := []struct {
		name string
		at   []int64
		want []int // indices in firing order
	}{
		{"empty", nil, nil},
		{"sorted", []int64{1, 2, 3}, []int{0, 1, 2}},
		{"reversed", []int64{3, 2, 1}, []int{2, 1, 0}},
		{"ties keep insertion order", []int64{5, 5, 5, 5}, []int{0, 1, 2, 3}},
		{"mixed ties", []int64{2, 1, 2, 1, 0}, []int{4, 1, 3, 0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Sim
			var got []int
			for i, at := range tt.at {
				s.Schedule(at, func(int64) { got = append(got, i) })
			}
			require.NoError(t, s.Run(Forever))
			assert.Equal(t, tt.want, got)
			assert.Equal(t, uint64(len(tt.at)), s.Fired())
		})
	}
}

func TestQueueMatchesStableSortOnRandomInput(t *testing.T) {
	r := rng.New(7, "des-test")
	var q Queue
	type key struct {
		at  int64
		seq uint64
	}
	var want []key
	for i := 0; i < 5000; i++ {
		at := int64(r.IntN(100)) // many ties
		s := q.Push(at, nil)
		want = append(want, key{at, s})
	}
	// Stable order: by time, then by insertion.
	for i := 1; i < len(want); i++ {
		for j := i; j > 0 && want[j].at < want[j-1].at; j-- {
			want[j], want[j-1] = want[j-1], want[j]
		}
	}
	for i := range want {
		ev, ok := q.Pop()
		require.True(t, ok)
		require.Equal(t, want[i], key{ev.At, ev.Seq}, "event %d", i)
	}
	_, ok := q.Pop()
	assert.False(t, ok)
}

func TestHandlersScheduleFurtherEventsAndClockAdvances(t *testing.T) {
	var s Sim
	var trace []int64
	s.Schedule(10, func(now int64) {
		trace = append(trace, now)
		s.After(0, func(now int64) { trace = append(trace, now) }) // same time, after
		s.After(5, func(now int64) { trace = append(trace, now) })
	})
	s.Schedule(12, func(now int64) { trace = append(trace, now) })
	require.NoError(t, s.Run(Forever))
	assert.Equal(t, []int64{10, 10, 12, 15}, trace)
	assert.Equal(t, int64(15), s.Now())
}

func TestRunUntilStopsBeforeLaterEvents(t *testing.T) {
	var s Sim
	n := 0
	for _, at := range []int64{1, 2, 3, 10} {
		s.Schedule(at, func(int64) { n++ })
	}
	require.NoError(t, s.Run(5))
	assert.Equal(t, 3, n)
	assert.Equal(t, 1, s.Pending())
	require.NoError(t, s.Run(Forever))
	assert.Equal(t, 4, n)
}

func TestSchedulingInThePastFails(t *testing.T) {
	var s Sim
	s.Schedule(10, func(int64) { s.Schedule(5, func(int64) {}) })
	err := s.Run(Forever)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "before now")
}

func TestClockNeverMovesBack(t *testing.T) {
	var c Clock
	require.NoError(t, c.AdvanceTo(5))
	require.NoError(t, c.AdvanceTo(5))
	require.Error(t, c.AdvanceTo(4))
	assert.Equal(t, int64(5), c.Now())
}

func BenchmarkQueuePushPop(b *testing.B) {
	var q Queue
	for i := 0; i < 1024; i++ {
		q.Push(int64(i*7%1024), nil)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev, _ := q.Pop()
		q.Push(ev.At+1024, nil)
	}
}

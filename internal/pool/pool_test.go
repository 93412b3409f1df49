package pool

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunEveryJobOnce(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 64} {
		var calls [100]atomic.Int32
		var last int
		err := Run(len(calls), workers, func(i int) error { calls[i].Add(1); return nil },
			func(done, total int) { require.Equal(t, 100, total); last = max(last, done) })
		require.NoError(t, err)
		for i := range calls {
			require.EqualValues(t, 1, calls[i].Load(), "job %d with %d workers", i, workers)
		}
		require.Equal(t, 100, last, "progress reaches the total")
	}
}

// The reported error is the lowest-numbered failure, whatever ran first.
func TestRunFirstErrorByIndex(t *testing.T) {
	for _, workers := range []int{1, 8} {
		err := Run(50, workers, func(i int) error {
			if i%7 == 3 {
				return fmt.Errorf("job %d", i)
			}
			return nil
		}, nil)
		require.EqualError(t, err, "job 3")
	}
	require.NoError(t, Run(0, 4, func(int) error { return errors.New("never") }, nil))
}

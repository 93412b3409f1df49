package pool

import (
	"runtime"
	"sync"
)

// Run calls work(i) for i in [0, n) on at most workers goroutines
// (GOMAXPROCS when workers <= 0), and progress(done, n) after each job
// when it is set. It returns the error of the lowest-numbered job that
// failed, so the error too is independent of scheduling.
func Run(n, workers int, work func(i int) error, progress func(done, total int)) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	next, done := 0, 0
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= n {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				errs[i] = work(i)
				mu.Lock()
				done++
				if progress != nil {
					progress(done, n)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

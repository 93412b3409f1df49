package distsweep

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/steplab/steplab/replay/sweep"
)

// benchSpec is a 200-point sweep of small, fast points: 20 rates × 10
// engine batch limits, 30 measured requests, one repetition.
func benchSpec(b *testing.B) Spec {
	b.Helper()
	raw, err := os.ReadFile(example)
	if err != nil {
		b.Fatal(err)
	}
	var rates, seqs []string
	for i := 1; i <= 20; i++ {
		rates = append(rates, fmt.Sprint(5*i))
	}
	for i := 1; i <= 10; i++ {
		seqs = append(seqs, fmt.Sprint(8*i))
	}
	return SpecFromFile(example, raw, []string{"load.requests=30", "load.repetitions=1", "load.warmup_requests=0", "load.startup_s=0", "load.drain_s=0"},
		[]sweep.Vary{{Key: "load.rate_rps", Values: rates}, {Key: "stages.generator.engine.limits.max_num_seqs", Values: seqs}})
}

// BenchmarkSweep200Local is the baseline: the local sweep on N goroutines.
func BenchmarkSweep200Local(b *testing.B) {
	spec := benchSpec(b)
	d, err := spec.Doc()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := sweep.Run(d, spec.Vary, sweep.Options{Jobs: n}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(200*b.N)/time.Since(start).Seconds(), "points/s")
		})
	}
}

// BenchmarkSweep200Queue submits the 200 points to an embedded JetStream
// server on loopback and runs 1, 2 and 4 workers: goroutines with their
// own connections, and, when STEPLAB_BIN names a steplab binary, worker
// processes (steplab worker). Points/s covers submission to merge.
func BenchmarkSweep200Queue(b *testing.B) {
	spec := benchSpec(b)
	bin := os.Getenv("STEPLAB_BIN")
	for _, mode := range []string{"goroutines", "processes"} {
		if mode == "processes" && bin == "" {
			continue
		}
		for _, n := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s=%d", mode, n), func(b *testing.B) {
				s := startServer(b)
				results := b.TempDir()
				if mode == "goroutines" {
					for i := 0; i < n; i++ {
						startWorker(b, s, WorkerOptions{Results: results, FetchWait: time.Second})
					}
				} else {
					for i := 0; i < n; i++ {
						cmd := exec.Command(bin, "worker", "--queue", s.ClientURL(), "--results", results, "-q", "--wait-queue", "60s")
						cmd.Stderr = os.Stderr
						if err := cmd.Start(); err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
					}
				}
				_, js := connect(b, s)
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					r, _, err := Run(ctx, js, spec, SubmitOptions{Results: results, Poll: 10 * time.Millisecond, Queue: QueueConfig{AckWait: 10 * time.Second}})
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					if len(r.Points) != 200 {
						b.Fatalf("%d points", len(r.Points))
					}
				}
				b.ReportMetric(float64(200*b.N)/time.Since(start).Seconds(), "points/s")
			})
		}
	}
}

package dist

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/steplab/steplab/planner"
	"github.com/steplab/steplab/sweep"
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

// benchPlanSpec is the Llama-3.1-70B example plan narrowed to 36
// candidates on 100 requests: a plan's candidates as a sweep's points.
func benchPlanSpec(b *testing.B) Spec {
	b.Helper()
	const path = "../../examples/plan/llama70b-gpus.yaml"
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	spec := SpecFromFile(path, raw, []string{"workload.limit=100", "plan.space.kv_cache_dtype=[fp8]", "plan.space.max_num_seqs=[256]"}, nil)
	d, err := spec.Doc()
	if err != nil {
		b.Fatal(err)
	}
	pd, err := planner.Decode(d)
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range pd.Plan.Axes() {
		spec.Vary = append(spec.Vary, sweep.Vary{Key: a.Key, Values: a.Values})
	}
	return spec
}

// BenchmarkPlan36 runs the narrowed plan locally on 2 goroutines and over
// an embedded JetStream server with 1 and 2 worker goroutines: candidates
// per second, submission to merge.
func BenchmarkPlan36(b *testing.B) {
	spec := benchPlanSpec(b)
	b.Run("local-jobs=2", func(b *testing.B) {
		d, err := spec.Doc()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for b.Loop() {
			if _, err := sweep.Run(d, spec.Vary, sweep.Options{Jobs: 2}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(36*b.N)/time.Since(start).Seconds(), "candidates/s")
	})
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("queue-workers=%d", n), func(b *testing.B) {
			s := startServer(b)
			results := b.TempDir()
			for range n {
				startWorker(b, s, WorkerOptions{Results: results, FetchWait: time.Second})
			}
			_, js := connect(b, s)
			start := time.Now()
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				r, _, err := Run(ctx, js, spec, SubmitOptions{Results: results, Poll: 10 * time.Millisecond, Queue: QueueConfig{AckWait: 10 * time.Second}})
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				if len(r.Points) != 36 {
					b.Fatalf("%d candidates", len(r.Points))
				}
			}
			b.ReportMetric(float64(36*b.N)/time.Since(start).Seconds(), "candidates/s")
		})
	}
}

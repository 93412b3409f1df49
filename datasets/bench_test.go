package datasets

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The steps benchmarks measure the Parquet targets of docs/architecture.md#performance-targets (write
// >= 2M rows/s, read >= 3M rows/s on one core). Run them with
//
//	go test -run XX -bench Steps -cpu 1 -count 5 ./datasets/
//
// Writing streams rows as the simulator does: a 1024-row batch is filled by
// a trace generator and written, over and over; the generator's time counts
// against the writer. Reading scans a 1M-row table written the same way.

const benchRows = 1 << 20

func writeBenchSteps(b testing.TB, dir string, rows int, append1 bool) {
	w, err := Create(dir, Manifest{Source: Source{Kind: "simulate"}}, CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	tw, err := NewTableWriter[Step](w, TableSteps, TableOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// A pool of generated rows, replayed with shifted step ids and times so
	// that every batch continues the trace (the shift is applied in place,
	// as a simulator fills the rows it then writes). Each 32Ki-row page is
	// compressed on its own, so the 64Ki-row period is never seen by zstd.
	pool := append([]Step(nil), benchPool()...)
	span := pool[len(pool)-1].TUpdateEnd
	const batch = 1024
	for done := 0; done < rows; done += batch {
		off := done % len(pool)
		buf := pool[off : off+batch]
		if done >= len(pool) {
			for i := range buf {
				s := &buf[i]
				s.StepID += int64(len(pool))
				s.TScheduleStart += span
				s.TScheduleEnd += span
				s.TDispatch += span
				s.TOutput += span
				s.TUpdateEnd += span
			}
		}
		if append1 {
			for i := range buf {
				if err := tw.Append(buf[i]); err != nil {
					b.Fatal(err)
				}
			}
		} else if err := tw.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

var benchPoolRows []Step

func benchPool() []Step {
	if benchPoolRows == nil {
		benchPoolRows = simSteps(1<<16, 1)
	}
	return benchPoolRows
}

func benchmarkWrite(b *testing.B, append1 bool) {
	b.ReportAllocs()
	root := b.TempDir()
	n := 0
	var size int64
	for b.Loop() {
		dir := filepath.Join(root, "ds")
		os.RemoveAll(dir)
		writeBenchSteps(b, dir, benchRows, append1)
		n += benchRows
		size = dirSize(b, dir)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(size)/(benchRows/1e6)/1e6, "MB/1Mrows")
}

func BenchmarkWriteSteps(b *testing.B)       { benchmarkWrite(b, false) }
func BenchmarkWriteStepsAppend(b *testing.B) { benchmarkWrite(b, true) }

func dirSize(b testing.TB, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func benchmarkRead[T any](b *testing.B) {
	dir := filepath.Join(b.TempDir(), "ds")
	writeBenchSteps(b, dir, benchRows, false)
	d, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]T, 1024)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		s, err := Scan[T](d, TableSteps)
		if err != nil {
			b.Fatal(err)
		}
		for {
			k, err := s.Read(buf)
			n += k
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		s.Close()
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkReadSteps(b *testing.B) { benchmarkRead[Step](b) }

// stepTimes is a projection a fitter reads: composition and wall time only.
type stepTimes struct {
	StepID            int64  `parquet:"step_id"`
	SumPrefillTokens  int64  `parquet:"sum_prefill_tokens"`
	NumDecodeRequests int32  `parquet:"num_decode_requests"`
	SumDecodeKVTokens int64  `parquet:"sum_decode_kv_tokens"`
	WallTimeNs        int64  `parquet:"wall_time_ns"`
	Valid             bool   `parquet:"valid"`
	Kind              string `parquet:"kind"`
}

func BenchmarkReadStepsProjected(b *testing.B) { benchmarkRead[stepTimes](b) }

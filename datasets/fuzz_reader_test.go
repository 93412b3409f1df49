package datasets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadSteps feeds arbitrary bytes to the readers as a part file: the
// seeds are a steplab part and the foreign fixtures, so the fuzzer starts
// from every codec, page version and type conversion. It must never panic,
// and every failure must be an error naming the file.
//
//	go test -run XX -fuzz FuzzReadSteps ./datasets/
func FuzzReadSteps(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "ds")
	w, err := Create(dir, Manifest{}, CreateOptions{})
	if err != nil {
		f.Fatal(err)
	}
	tw, err := NewTableWriter[Step](w, TableSteps, TableOptions{RowGroupRows: 40})
	if err != nil {
		f.Fatal(err)
	}
	if err := tw.Write(simSteps(100, 1)); err != nil {
		f.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(TableDir(dir, TableSteps), "part-000000.parquet"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	huge, err := hugePageClaim(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(huge)
	for _, n := range []int{0, 4, 8, len(good) / 3, len(good) / 2, len(good) - 8, len(good) - 1} {
		f.Add(good[:n])
	}
	for _, at := range []int{4, 10, 100, len(good) / 2, len(good) - 100, len(good) - 9} {
		b := append([]byte(nil), good...)
		b[at] ^= 0x5a
		f.Add(b)
	}
	// Files other tools wrote: every codec (and Hadoop-framed LZ4 besides),
	// pages v2, narrow, unsigned and float32 columns, TIMESTAMPs, nulls,
	// dictionaries; whole, and with a damaged page.
	foreign, _ := filepath.Glob(filepath.Join(foreignDir, "*", "fixtures", "seeds", "*.parquet"))
	foreign = append(foreign, filepath.Join(foreignDir, "pyarrow", "aiconfigurator", "custom_allreduce_perf.parquet"))
	for _, p := range foreign {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		d := append([]byte(nil), b...)
		for i := 60; i < 90 && i < len(d); i++ {
			d[i] ^= 0xa5
		}
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "part.parquet")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, read := range []func([]string) error{
			func(p []string) error { _, err := readAllFiles[Step](p); return err },
			func(p []string) error { _, err := readAllFiles[stepTimes](p); return err },
			func(p []string) error { _, err := readAllFiles[Request](p); return err },
			func(p []string) error { // renamed columns, with the schema's defaults
				s, err := ScanTable[Step](p, TableSteps, map[string]string{"step": "step_id", "wall_ns": "wall_time_ns"})
				if err != nil {
					return err
				}
				defer s.Close()
				for _, err := range s.All() {
					if err != nil {
						return err
					}
				}
				return nil
			},
		} {
			if err := read([]string{path}); err != nil && !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
		}
	})
}

package datasets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadSteps feeds arbitrary bytes to the steps reader as a part file.
// It must never panic, and every failure must be an error naming the file.
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
	for _, n := range []int{0, 4, 8, len(good) / 3, len(good) / 2, len(good) - 8, len(good) - 1} {
		f.Add(good[:n])
	}
	for _, at := range []int{4, 10, 100, len(good) / 2, len(good) - 100, len(good) - 9} {
		b := append([]byte(nil), good...)
		b[at] ^= 0x5a
		f.Add(b)
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
		} {
			if err := read([]string{path}); err != nil && !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
		}
	})
}

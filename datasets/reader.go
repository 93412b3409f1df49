package datasets

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// Dataset is an opened dataset directory.
type Dataset struct {
	Dir string
	// Manifest is nil for a directory that only holds tables (a table a
	// pandas user wrote); such a directory is read as the current schema.
	Manifest *Manifest
}

// Open opens the dataset at dir, checking its schema version.
func Open(dir string) (*Dataset, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a dataset directory (for a single Parquet file use `steplab inspect`)", dir)
	}
	m, err := ReadManifest(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m = nil
	case err != nil:
		return nil, err
	}
	d := &Dataset{Dir: dir, Manifest: m}
	if m == nil {
		found := false
		for _, t := range Tables {
			if d.Has(t) {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%s: not a dataset: no %s and no table files (%s.parquet, ...)", dir, ManifestFile, TableSteps)
		}
	}
	return d, nil
}

// Has reports whether the dataset holds table.
func (d *Dataset) Has(table string) bool {
	_, err := os.Stat(TableDir(d.Dir, table))
	return err == nil
}

// Parts lists the part files of table in order. A table is either one
// Parquet file <table>.parquet or a directory of part-NNNNNN.parquet files.
// Temporary parts of an interrupted writer are not listed.
func (d *Dataset) Parts(table string) ([]string, error) {
	path := TableDir(d.Dir, table)
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: dataset has no %s table (%s)", d.Dir, table, filepath.Base(path))
		}
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var parts []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".parquet") {
			continue
		}
		parts = append(parts, filepath.Join(path, name))
	}
	sort.Strings(parts)
	return parts, nil
}

// OpenParquet opens one Parquet file, turning every failure into an error
// that names the file and the problem.
func OpenParquet(path string) (*parquet.File, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if st.Size() == 0 {
		f.Close()
		return nil, nil, fmt.Errorf("%s: empty file, not Parquet", path)
	}
	pf, err := openParquetSafe(f, st.Size())
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: not a readable Parquet file (corrupt or truncated): %v", path, err)
	}
	if v, ok := pf.Lookup("steplab.schema_version"); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: bad steplab.schema_version %q", path, v)
		}
		if err := CheckSchemaVersion(path, n); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return pf, f, nil
}

func openParquetSafe(r io.ReaderAt, size int64) (pf *parquet.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			pf, err = nil, fmt.Errorf("%v", p)
		}
	}()
	return parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
}

// CheckColumns verifies that the file has every column the Go type T reads,
// naming the first missing one.
func CheckColumns[T any](path string, pf *parquet.File) error {
	want := parquet.SchemaOf(new(T))
	have := pf.Schema()
	for _, col := range want.Columns() {
		if _, ok := have.Lookup(col...); !ok {
			return fmt.Errorf("%s: missing column %q", path, strings.Join(col, "."))
		}
	}
	return nil
}

// Scanner reads a table as rows of T, part after part. T may be any struct
// whose parquet tags name a subset of the table's columns: only those
// columns are read (column projection).
type Scanner[T any] struct {
	parts []string
	next  int
	path  string
	f     *os.File
	r     *parquet.GenericReader[T]
}

// Scan starts reading table from d.
func Scan[T any](d *Dataset, table string) (*Scanner[T], error) {
	parts, err := d.Parts(table)
	if err != nil {
		return nil, err
	}
	return ScanFiles[T](parts), nil
}

// ScanFiles reads the given Parquet files as one table.
func ScanFiles[T any](parts []string) *Scanner[T] {
	return &Scanner[T]{parts: parts}
}

// Read fills buf and returns the number of rows read; io.EOF after the last.
func (s *Scanner[T]) Read(buf []T) (n int, err error) {
	for {
		if s.r == nil {
			if s.next >= len(s.parts) {
				return 0, io.EOF
			}
			if err := s.openNext(); err != nil {
				return 0, err
			}
		}
		n, err = s.readSafe(buf)
		if errors.Is(err, io.EOF) {
			s.closePart()
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err != nil {
			return n, fmt.Errorf("%s: %v", s.path, err)
		}
		return n, nil
	}
}

func (s *Scanner[T]) readSafe(buf []T) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, fmt.Errorf("corrupt data: %v", p)
		}
	}()
	return s.r.Read(buf)
}

func (s *Scanner[T]) openNext() error {
	path := s.parts[s.next]
	s.next++
	pf, f, err := OpenParquet(path)
	if err != nil {
		return err
	}
	if err := CheckColumns[T](path, pf); err != nil {
		f.Close()
		return err
	}
	s.path, s.f = path, f
	s.r = parquet.NewGenericReader[T](pf)
	return nil
}

func (s *Scanner[T]) closePart() {
	if s.r != nil {
		s.r.Close()
		s.f.Close()
		s.r, s.f = nil, nil
	}
}

// Close releases the open part.
func (s *Scanner[T]) Close() error {
	s.closePart()
	s.next = len(s.parts)
	return nil
}

// ReadAll reads a whole table into memory. Prefer Scan for large tables.
func ReadAll[T any](d *Dataset, table string) ([]T, error) {
	s, err := Scan[T](d, table)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out []T
	buf := make([]T, 4096)
	for {
		n, err := s.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

package validate

import (
	"errors"
	"io"
	"path/filepath"

	"github.com/steplab/steplab/datasets"
)

// validate reads the tables as the schema's own row types, so a column a
// source left out reads as its documented default (Unknown for timings,
// sizes and counts): the checks that need a known value skip it, and
// checkStructure warns, per table, which columns were defaulted.

// stream reads a table part by part as rows of R, and knows the 0-based
// row index across parts and the part file of the row it returned last.
// Memory: one buffer of rows.
type stream[R any] struct {
	dir   string
	parts []string
	rel   []string // parts relative to dir

	pi   int
	sc   *datasets.Scanner[R]
	buf  []R
	n, i int

	next int64 // index of the next row
	row  int64
	part string
	err  error
	// errPart is the part being read when err happened.
	errPart string
}

const streamBuf = 1024

func newStream[R any](dir string, parts []string) *stream[R] {
	rel := make([]string, len(parts))
	for i, p := range parts {
		rel[i] = relPart(dir, p)
	}
	return &stream[R]{dir: dir, parts: parts, rel: rel, buf: make([]R, streamBuf), row: -1}
}

// Next returns the next row, or nil at the end or on error (see err). The
// row is valid until the next call.
func (s *stream[R]) Next() *R {
	for s.i >= s.n {
		if s.err != nil {
			return nil
		}
		if s.sc == nil {
			if s.pi >= len(s.parts) {
				return nil
			}
			s.sc = datasets.ScanFiles[R]([]string{s.parts[s.pi]})
			s.pi++
		}
		n, err := s.sc.Read(s.buf)
		s.n, s.i = n, 0
		if err != nil {
			s.sc.Close()
			s.sc = nil
			if !errors.Is(err, io.EOF) {
				s.err = err
				s.errPart = s.rel[s.pi-1]
				s.n = 0
				return nil
			}
		}
	}
	r := &s.buf[s.i]
	s.i++
	s.row = s.next
	s.next++
	s.part = s.rel[s.pi-1]
	return r
}

func (s *stream[R]) Close() {
	if s.sc != nil {
		s.sc.Close()
		s.sc = nil
	}
}

func relPart(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil {
		return filepath.ToSlash(rel)
	}
	return path
}

package pq

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/steplab/steplab/internal/suggest"
)

// MissingColumnsError is the error of a reader for a file that lacks
// required columns: it names every one of them, with the file's columns
// whose names are close (a rename away).
type MissingColumnsError struct {
	Path    string
	Columns []string // the missing columns, in the row type's order
	// Notes says, per missing column, why a column of that name does not
	// count ("Null type: every value is null"); empty when it is absent.
	Notes []string
	// Similar lists, per missing column, the file's columns with close
	// names (SimilarColumns).
	Similar [][]string
}

func (e *MissingColumnsError) Error() string {
	names := make([]string, len(e.Columns))
	var close []string
	for i, c := range e.Columns {
		names[i] = strconv.Quote(c)
		if e.Notes[i] != "" {
			names[i] += " (" + e.Notes[i] + ")"
		}
		for _, h := range e.Similar[i] {
			close = append(close, fmt.Sprintf("%q, close to %q", h, c))
		}
	}
	what := "missing column "
	if len(e.Columns) > 1 {
		what = "missing columns "
	}
	msg := e.Path + ": " + what + strings.Join(names, ", ")
	if len(close) > 0 {
		msg += " (the file has " + strings.Join(close, "; ") + ")"
	}
	return msg
}

// ColumnTypeError is the error of a reader for a column whose type does not
// convert to the field's.
type ColumnTypeError struct {
	Path   string
	Column string
	Have   string // the column's Parquet type, physical then logical
	Want   string // what steplab reads it as
	Hint   string // what to change, when known
}

func (e *ColumnTypeError) Error() string {
	msg := fmt.Sprintf("%s: column %q has type %s, steplab reads it as %s", e.Path, e.Column, e.Have, e.Want)
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// missingColumn is a required column a file lacks; note says why when it is
// there but unusable (Null-typed).
type missingColumn struct{ name, note string }

// missingColumnsError builds the error; a column of the file the row type
// reads under its own name (in reads) is not suggested for another.
func missingColumnsError(path string, pf *parquet.File, missing []missingColumn, reads map[string]bool) error {
	var have []string
	for _, c := range pf.Root().Columns() {
		if !reads[c.Name()] {
			have = append(have, c.Name())
		}
	}
	e := &MissingColumnsError{Path: path}
	for _, m := range missing {
		e.Columns = append(e.Columns, m.name)
		e.Notes = append(e.Notes, m.note)
		e.Similar = append(e.Similar, SimilarColumns(m.name, have))
	}
	return e
}

// MissingColumns is the MissingColumnsError of the file at path (pf) for
// the columns missing, which it lacks outright; reads are the columns the
// row type reads, not suggested for another.
func MissingColumns(path string, pf *parquet.File, missing []string, reads map[string]bool) error {
	ms := make([]missingColumn, len(missing))
	for i, m := range missing {
		ms[i].name = m
	}
	return missingColumnsError(path, pf, ms, reads)
}

// SimilarColumns returns the names in have that look like name once case,
// punctuation, counting prefixes, abbreviations and unit suffixes are set
// aside ("WallTime", "wall_time_ms" and "wall_ns" for "wall_time_ns";
// "prefill_reqs" for "num_prefill_requests"), closest first, at most three.
// The table wrapper and the readers use it to suggest a rename.
func SimilarColumns(name string, have []string) []string {
	want, wantTok := normColumn(name), columnTokens(name)
	type cand struct {
		name string
		dist int
	}
	var cands []cand
	limit := max(1, len(want)/4)
	for _, h := range have {
		if h == name {
			continue
		}
		n := normColumn(h)
		if n == "" {
			continue
		}
		d := suggest.Distance(want, n)
		if (strings.Contains(want, n) && len(n) >= 3) || strings.Contains(n, want) || sameTokens(wantTok, columnTokens(h)) {
			d = min(d, limit)
		}
		if d <= limit {
			cands = append(cands, cand{h, d})
		}
	}
	// Stable insertion sort by distance: have's order breaks ties.
	for i := 1; i < len(cands); i++ {
		for j := i; j > 0 && cands[j].dist < cands[j-1].dist; j-- {
			cands[j], cands[j-1] = cands[j-1], cands[j]
		}
	}
	var out []string
	for _, c := range cands[:min(len(cands), 3)] {
		out = append(out, c.name)
	}
	return out
}

// columnTokens splits a column name into lowercase words (at punctuation
// and camelCase), leaving out the words that only say "a count of".
func columnTokens(s string) []string {
	var toks []string
	var cur strings.Builder
	flush := func() {
		if t := cur.String(); t != "" {
			switch t {
			case "num", "n", "sum", "total", "count", "of":
			default:
				toks = append(toks, t)
			}
		}
		cur.Reset()
	}
	prevLower := false
	for _, r := range s {
		switch {
		case r >= 'A' && r <= 'Z':
			if prevLower {
				flush()
			}
			cur.WriteRune(r + 'a' - 'A')
			prevLower = false
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			cur.WriteRune(r)
			prevLower = true
		default:
			flush()
			prevLower = false
		}
	}
	flush()
	return toks
}

// sameTokens matches two token lists word for word, a word matching its
// abbreviation ("req" and "reqs" match "requests": a common prefix of three
// letters or more, at least half the shorter word).
func sameTokens(a, b []string) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	used := make([]bool, len(b))
	for _, x := range a {
		found := false
		for j, y := range b {
			if used[j] {
				continue
			}
			p := 0
			for p < len(x) && p < len(y) && x[p] == y[p] {
				p++
			}
			if x == y || (p >= 3 && 2*p >= min(len(x), len(y))) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// normColumn lowercases a column name, keeps letters and digits, and drops
// a trailing unit (ns, us, ms, s) so that "WallTimeMs" meets "wall_time_ns".
func normColumn(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	n := b.String()
	for _, u := range []string{"ns", "us", "ms"} {
		if len(n) > len(u)+2 && strings.HasSuffix(n, u) {
			return n[:len(n)-len(u)]
		}
	}
	return n
}

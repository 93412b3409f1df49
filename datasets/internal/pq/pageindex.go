package pq

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Column statistics and page indexes.
//
// The columnar writer records, for every page, the smallest and largest
// value it holds (plain-encoded, in the column's type-defined order), where
// the page starts and its first row; for every column chunk, the bounds and
// null count over its pages. The chunk bounds go into the column chunk's
// Statistics (min_value/max_value, and the deprecated min/max for the
// numeric types, whose signed order old readers assume); the page bounds
// into a ColumnIndex and the page locations into an OffsetIndex, written
// after the last row group, before the footer. DuckDB, pyarrow and Spark
// use them to skip row groups and pages a filter rules out.
//
// Dictionary-encoded string pages take the bounds of the row group's
// dictionary so far, a superset of the page's values: the format allows
// bounds that are not values of the page, and it spares comparing strings
// row by row.

// pageIndexEntry is one data page of a column chunk.
type pageIndexEntry struct {
	min, max []byte // empty on a page with no values (only empty lists)
	nulls    int64
	nullPage bool
	nan      bool  // a float page holding a NaN: no bounds
	offset   int64 // of the page header, from the start of the chunk's data pages
	size     int32 // header and body
	firstRow int64 // within the row group
}

// chunkIndex is what the footer and the page indexes need of one written
// column chunk.
type chunkIndex struct {
	pages  []pageIndexEntry
	dataAt int64 // file offset of the first data page
	// noBounds: a float page held a NaN, which has no place in the order:
	// the chunk gets no min/max and no column index.
	noBounds bool
}

// pageBounds is the bounds and null count of c's open page, from what
// gather kept of its values.
func (c *colEnc) pageBounds() pageIndexEntry {
	var e pageIndexEntry
	switch c.f.kind {
	case kindInt64, kindInt64List:
		e.nulls = c.nulls
		if c.lo <= c.hi {
			e.min, e.max = appendInt64(nil, c.lo), appendInt64(nil, c.hi)
		}
	case kindInt32:
		if c.lo <= c.hi {
			e.min = binary.LittleEndian.AppendUint32(nil, uint32(c.lo))
			e.max = binary.LittleEndian.AppendUint32(nil, uint32(c.hi))
		}
	case kindFloat64:
		if c.nan {
			e.nan = true
			return e
		}
		if len(c.f64) > 0 {
			lo, hi := c.flo, c.fhi
			// The format's rule for zero: a min of 0 is written -0, a max +0.
			if lo == 0 {
				lo = math.Copysign(0, -1)
			}
			if hi == 0 {
				hi = math.Copysign(0, 1)
			}
			e.min = binary.LittleEndian.AppendUint64(nil, math.Float64bits(lo))
			e.max = binary.LittleEndian.AppendUint64(nil, math.Float64bits(hi))
		}
	case kindBool:
		if len(c.bools) > 0 {
			e.min, e.max = []byte{c.bAnd}, []byte{c.bOr}
		}
	case kindString:
		switch {
		case c.dict != nil:
			if len(c.dictVals) > 0 {
				e.min, e.max = []byte(c.dictMin), []byte(c.dictMax)
			}
		case len(c.plain) > 0:
			e.min, e.max = plainStringBounds(c.plain)
		}
	}
	e.nullPage = e.min == nil
	return e
}

func appendInt64(dst []byte, v int64) []byte {
	return binary.LittleEndian.AppendUint64(dst, uint64(v))
}

// plainStringBounds scans length-prefixed PLAIN strings.
func plainStringBounds(b []byte) (lo, hi []byte) {
	for len(b) >= 4 {
		n := binary.LittleEndian.Uint32(b)
		s := b[4 : 4+n]
		b = b[4+n:]
		if lo == nil || bytes.Compare(s, lo) < 0 {
			lo = s
		}
		if hi == nil || bytes.Compare(s, hi) > 0 {
			hi = s
		}
	}
	return bytes.Clone(lo), bytes.Clone(hi)
}

// noteDictValue keeps the bounds of a dictionary as values join it.
func (c *colEnc) noteDictValue(s string) {
	if len(c.dictVals) == 1 || s < c.dictMin {
		c.dictMin = s
	}
	if len(c.dictVals) == 1 || s > c.dictMax {
		c.dictMax = s
	}
}

// compareBounds orders two plain-encoded values of a column of kind k.
func compareBounds(k fieldKind, a, b []byte) int {
	switch k {
	case kindInt64, kindInt64List:
		return cmp.Compare(int64(binary.LittleEndian.Uint64(a)), int64(binary.LittleEndian.Uint64(b)))
	case kindInt32:
		return cmp.Compare(int32(binary.LittleEndian.Uint32(a)), int32(binary.LittleEndian.Uint32(b)))
	case kindFloat64:
		x, y := math.Float64frombits(binary.LittleEndian.Uint64(a)), math.Float64frombits(binary.LittleEndian.Uint64(b))
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	return bytes.Compare(a, b) // bool (one byte) and strings: unsigned bytewise
}

// statistics is the column chunk's Statistics from its pages.
func (ci *chunkIndex) statistics(k fieldKind) format.Statistics {
	var st format.Statistics
	var lo, hi []byte
	for _, p := range ci.pages {
		st.NullCount += p.nulls
		if p.nullPage || ci.noBounds {
			continue
		}
		if lo == nil || compareBounds(k, p.min, lo) < 0 {
			lo = p.min
		}
		if hi == nil || compareBounds(k, p.max, hi) > 0 {
			hi = p.max
		}
	}
	if lo != nil {
		st.MinValue, st.MaxValue = lo, hi
		if k != kindString {
			st.Min, st.Max = lo, hi // signed order: what pre-2.4 readers assume
		}
	}
	return st
}

// columnIndex is the chunk's ColumnIndex; ok is false when it has none.
func (ci *chunkIndex) columnIndex(k fieldKind) (idx format.ColumnIndex, ok bool) {
	if ci.noBounds {
		return idx, false
	}
	asc, desc := true, true
	var prev *pageIndexEntry
	for i := range ci.pages {
		p := &ci.pages[i]
		idx.NullPages = append(idx.NullPages, p.nullPage)
		idx.MinValues = append(idx.MinValues, p.min)
		idx.MaxValues = append(idx.MaxValues, p.max)
		idx.NullCounts = append(idx.NullCounts, p.nulls)
		if p.nullPage {
			continue
		}
		if prev != nil {
			asc = asc && compareBounds(k, prev.min, p.min) <= 0 && compareBounds(k, prev.max, p.max) <= 0
			desc = desc && compareBounds(k, prev.min, p.min) >= 0 && compareBounds(k, prev.max, p.max) >= 0
		}
		prev = p
	}
	switch {
	case asc:
		idx.BoundaryOrder = format.Ascending
	case desc:
		idx.BoundaryOrder = format.Descending
	default:
		idx.BoundaryOrder = format.Unordered
	}
	return idx, true
}

// offsetIndex is the chunk's OffsetIndex.
func (ci *chunkIndex) offsetIndex() format.OffsetIndex {
	var idx format.OffsetIndex
	for _, p := range ci.pages {
		idx.PageLocations = append(idx.PageLocations, format.PageLocation{
			Offset: ci.dataAt + p.offset, CompressedPageSize: p.size, FirstRowIndex: p.firstRow})
	}
	return idx
}

// writePageIndexes writes the column indexes of every chunk, then their
// offset indexes (the layout parquet-mr and Arrow use), and points the
// footer's column chunks at them.
func (w *Writer) writePageIndexes() error {
	proto := new(thrift.CompactProtocol)
	for r := range w.rowGroups {
		for c := range w.rowGroups[r].Columns {
			idx, ok := w.indexes[r][c].columnIndex(w.cols[c].f.kind)
			if !ok {
				continue
			}
			b, err := thrift.Marshal(proto, &idx)
			if err != nil {
				return err
			}
			cc := &w.rowGroups[r].Columns[c]
			cc.ColumnIndexOffset, cc.ColumnIndexLength = w.pos, int32(len(b))
			if err := w.write(b); err != nil {
				return err
			}
		}
	}
	for r := range w.rowGroups {
		for c := range w.rowGroups[r].Columns {
			idx := w.indexes[r][c].offsetIndex()
			b, err := thrift.Marshal(proto, &idx)
			if err != nil {
				return err
			}
			cc := &w.rowGroups[r].Columns[c]
			cc.OffsetIndexOffset, cc.OffsetIndexLength = w.pos, int32(len(b))
			if err := w.write(b); err != nil {
				return err
			}
		}
	}
	return nil
}

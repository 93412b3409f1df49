// Package pq is steplab's columnar Parquet codec: it reads and writes rows
// of flat Go structs (int32, int64, float64, bool, string and []int64 list
// fields, described by parquet struct tags) column by column, straight
// between the rows and the pages, with no per-value reflection. It knows
// Parquet and Go structs, not steplab's tables: the schema of those, the
// dataset directory, manifests, parts and digests are package datasets'.
//
// What it holds:
//
//	codec.go      Codec: a struct's fields as columns (name, kind, offset,
//	              encodings, default, the timestamp tag), Instants
//	writer.go     Writer: data pages v1 (DELTA_BINARY_PACKED, dictionary,
//	              BYTE_STREAM_SPLIT or PLAIN), zstd or raw zstd frames,
//	              CRC-32 on every page, statistics and the footer
//	pageindex.go  the column and offset indexes of the pages written
//	reader.go     Reader: columns bound to fields, values filled into rows;
//	              the page-header checks of every column chunk (CheckPages)
//	pages.go      the page decoder: v1 and v2 pages, levels, every codec
//	              writers use, each held to the size its header declares
//	convert.go    foreign types (any integer width, unsigned, TIMESTAMP,
//	              INT96, DECIMAL, FLOAT) converted to the field's type
//	columns.go    MissingColumnsError, ColumnTypeError, SimilarColumns
//
// The API is a Codec (CodecFor), a Reader (Codec.NewReader, ReadRows) and
// a Writer (Codec.NewWriter, WriteRows, WriteRow); ReadRows and WriteRows
// take []T and check that T is the codec's struct.
//
// # Why unsafe lives here
//
// Rows are read and written through field offsets: a column's values are
// gathered from, or stored into, every row at base+i*stride+offset, and a
// page's strings share one allocation. That needs package unsafe, and this
// package is the only one of the module that imports it (a test of
// cmd/steplab enforces it), so that the memory-unsafe code sits in one
// place beside the format it serves, reviewed and fuzzed with it, as
// pebble keeps its block format beside its own unsafe code. Every pointer
// the codec forms stays inside the rows it was given (never one past the
// last), and every size a file claims (footer, page header, decompressed
// length, value count, dictionary index) is checked before it is trusted,
// so that a damaged file is an error, never an allocation of what it
// claims or a read out of bounds.
package pq

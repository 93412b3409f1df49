// Package datasets is steplab's data contract: the Parquet schema of engine
// steps, the dataset directory that holds them, and streaming writers and
// typed readers for it.
//
// # Datasets
//
// A dataset is a directory with a manifest and up to five tables:
//
//	<name>/manifest.json                 provenance, engine and model, status
//	<name>/steps.parquet/part-NNNNNN.parquet
//	<name>/step_requests.parquet/...
//	<name>/requests.parquet/...
//	<name>/gpu_samples.parquet/...
//	<name>/engine_samples.parquet/...
//
// A table is either a directory of numbered part files (what steplab
// writes) or one Parquet file <table>.parquet (what pandas, DuckDB or
// pyarrow users write). A directory without a manifest is read as the
// current schema. A dataset holds the tables its source has: an imported
// trace only requests, a Dynamo artifact only steps.
//
// The row types Step, StepRequest, Request, GPUSample and EngineSample define the
// columns through their parquet struct tags. The files are plain Parquet:
// zstd pages (see below), DELTA_BINARY_PACKED for integer columns,
// dictionary encoding for repeated strings, no extension types, no
// statistics and no timestamps, so any Parquet reader (pyarrow, DuckDB,
// Spark, arrow-go) reads them, and the same rows give byte-identical files.
// Each part carries the key-value metadata steplab.schema_version and
// steplab.table.
//
// # Writing
//
// Create starts a dataset; NewTableWriter streams one table into it:
//
//	w, err := datasets.Create(dir, datasets.Manifest{Source: datasets.Source{Kind: "simulate"}}, datasets.CreateOptions{})
//	steps, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{})
//	for ... {
//		err = steps.Append(step) // or steps.Write(batch)
//	}
//	err = steps.Close()
//	err = w.Close() // marks the dataset complete
//
// Rows are buffered per row group (TableOptions.RowGroupRows) and written
// as part files of TableOptions.PartRows rows, so memory does not grow with
// the table. A part is written under a hidden temporary name
// (.part-NNNNNN.parquet.tmp), synced, renamed, and only then listed in the
// manifest, which is rewritten atomically after every part. A writer that
// dies therefore leaves a readable dataset whose manifest says "partial"
// and lists every completed part with its row count, size and SHA-256; at
// most one part's rows are lost. Checkpoint closes the open part early (a
// capture calls it periodically). Writer.Abort marks the dataset partial on
// purpose and discards open parts. Create refuses to write into a non-empty
// directory unless CreateOptions.Overwrite is set, and never overwrites a
// directory that is not a steplab dataset.
//
// Writing is columnar for flat row types (int32, int64, float64, bool,
// string and []int64 list fields): each column is gathered straight from
// the rows, encoded, and compressed with zstd. A column whose page zstd
// cannot shrink (random timing jitter after delta encoding) stores its
// next pages as zstd frames of raw blocks, which every zstd decoder reads,
// and tries compression again every few pages. Pages carry a CRC-32.
// Other row types go through parquet-go's generic writer.
//
// # Reading
//
// Open opens a dataset, refusing a schema version newer than SchemaVersion
// with a message that names both versions. Scan reads a table as rows of
// any struct whose parquet tags name a subset of its columns; only those
// columns are read:
//
//	type timing struct {
//		StepID     int64 `parquet:"step_id"`
//		WallTimeNs int64 `parquet:"wall_time_ns"`
//	}
//	s, err := datasets.Scan[timing](d, datasets.TableSteps)
//	for row, err := range s.All() { ... }
//
// ReadAll reads a whole table into memory. Readers accept INT32 where a
// field is int64 and FLOAT where it is float64, dictionary-encoded columns
// of any type, nullable columns and data pages v1 or v2, so tables written
// by pandas read without conversion. Every failure is one error that names
// the file and the problem: an empty, truncated or non-Parquet file, a
// corrupt page, a missing column (all missing columns are named), a column
// of the wrong type. Page headers and the footer are checked before they
// are trusted, so a damaged file cannot make the reader allocate what it
// claims.
//
// # Schema versions and column defaults
//
// SchemaVersion is the version this build writes; readers accept it and
// every older version. A column added after version 1, or one a source may
// leave out, carries a `default:"..."` struct tag: a file without it reads
// the default, and CheckColumns does not report it missing. The defaults
// (DefaultedColumns lists them):
//
//	steps.worker_recv_ns       -1 (Unknown)
//	steps.sample_ns            -1 (Unknown)
//	step_requests.is_resumed   false
//	requests.prefix_hash_ids   empty list
//
// A null in a nullable column reads as the column's default where it has
// one and as the zero value otherwise. Timing columns the source did not
// record hold Unknown (-1).
//
// # Checking a dataset
//
// Dataset.Check (and Dataset.PartsStatus for one table) compares the parts
// on disk with the manifest: each listed part is PartOK, PartMissing or
// PartMismatch (size, SHA-256 or row count differ); a completed part the
// manifest does not list is PartUnlisted (a writer killed between renaming
// the part and rewriting the manifest); the temporary part of an
// interrupted writer is PartTemporary and ignored by readers. The validator
// reports partial datasets from it.
package datasets

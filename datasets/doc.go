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
// A table is either a directory of Parquet files (steplab writes numbered
// part-NNNNNN.parquet files; any *.parquet names are read, also inside the
// key=value folders of a partitioned write) or one Parquet file
// <table>.parquet (what pandas, DuckDB or pyarrow users write). A dataset
// holds the tables its source has: an imported trace only requests, a
// Dynamo artifact only steps.
//
// The manifest may be minimal: a user who wrote steps.parquet with pandas
// adds a manifest.json naming only what the rows cannot say,
//
//	{"schema_version": 1, "hardware": {"gpu_name": "H200"},
//	 "model": {"name": "Llama-3.1-8B"},
//	 "measurement_policy": {"decode": "production", "prefill": "production"}}
//
// and Open reads it as complete, with the tables found on disk; each such
// assumption is a line of Dataset.Assumptions, which validate and inspect
// print as warnings. A directory of tables without any manifest is refused
// (ErrNoManifest) with an error that says how to write one, or to wrap the
// table with `steplab import table`.
//
// The row types Step, StepRequest, Request, GPUSample and EngineSample define the
// columns through their parquet struct tags. The files steplab writes are
// plain Parquet: zstd pages (see below), DELTA_BINARY_PACKED for integer
// columns, dictionary encoding for repeated strings, no extension types and
// no timestamps, so any Parquet reader (pyarrow, DuckDB, Spark, arrow-go)
// reads them, and the same rows give byte-identical files. Every column
// chunk carries min/max and null-count statistics, and every page its
// bounds and location in the column and offset indexes, so that DuckDB,
// pyarrow and Spark skip the row groups and pages a filter rules out. Each
// part carries the key-value metadata steplab.schema_version and
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
// most one part's rows are lost (bulk writers use PartRows, 65,536).
// Checkpoint closes the open part early (a capture calls it periodically).
// A writer whose tables refer to each other calls Writer.Hold: completed
// parts then keep their temporary names until Writer.Commit, so that the
// tables of a killed run end at the same step. Writer.Abort marks the
// dataset partial on purpose and discards open parts. Create refuses to
// write into a non-empty directory unless CreateOptions.Overwrite is set,
// never overwrites a directory that is not a steplab dataset, and with
// Overwrite writes beside the old dataset and swaps the new one in at
// Close. Leftovers names what killed runs left (staging directories,
// temporary files and parts); Create removes those whose process is gone.
//
// Writing is columnar for flat row types (int32, int64, float64, bool,
// string and []int64 list fields): each column is gathered straight from
// the rows, encoded, and compressed with zstd. A column whose page zstd
// cannot shrink (random timing jitter after delta encoding) stores its
// next pages as zstd frames of raw blocks, which every zstd decoder reads,
// and tries compression again every few pages. Pages carry a CRC-32. The
// bounds of each page are taken from the values it gathered (dictionary
// strings take the row group's dictionary bounds, which the format allows)
// and written after the last row group. The codec is internal/pq, the one
// package of the module that imports unsafe: this package holds the data
// contract and hands rows to it. Other row types go through parquet-go's
// generic writer.
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
// ReadAll reads a whole table into memory. ScanTable reads files another
// tool wrote under its own column names (theirs=ours renames).
//
// # Foreign Parquet
//
// Readers take any conforming Parquet file, as pandas, pyarrow, Polars,
// DuckDB or Spark write it, converting each column to the field's type:
//
//   - integers of any width, signed or unsigned (INT(8..64), UINT(8..64)),
//     into int64 and int32 fields; a value that does not fit an int32 field
//     is an error naming the column and the value;
//   - FLOAT and DOUBLE, and integers, into float64 fields;
//   - strings, plain or dictionary-encoded (a pandas categorical), and
//     integers (a request id of 17 reads "17") into string fields;
//   - TIMESTAMP of any unit (MILLIS, MICROS, NANOS) and the legacy INT96
//     into the instant columns (a `timestamp:"ns"` tag: t_schedule_start ...
//     t_update_end, arrival_ns, first_scheduled_ns, first_token_ns,
//     finish_ns, t_ns) as nanoseconds since the Unix epoch;
//   - a column of the Null type (pyarrow's type for a column of nothing but
//     None) reads as absent: its default applies, as for a missing column;
//   - nulls in a nullable column read as the column's default.
//
// A float into an integer field (pandas turns an integer column with a NaN
// into float64) or a TIMESTAMP into a duration is refused with an error
// that names the column, its Parquet type (physical, then logical) and
// what steplab reads, and says what to change. Pages v1 and v2 and every
// codec writers use are read: uncompressed, snappy, gzip, brotli, zstd,
// LZ4_RAW and the deprecated Hadoop-framed LZ4 (Spark's "lz4"); LZO is
// refused by name. Any row-group size is read. A file that lacks required
// columns gets one error naming all of them (MissingColumnsError), with the
// file's columns whose names are close ("the file has "wall_ns", close to
// "wall_time_ns""). Every other failure is one error that names the file
// and the problem: an empty, truncated or non-Parquet file, a corrupt page,
// a column of the wrong type (ColumnTypeError). Page headers and the footer
// are checked before they are trusted, and every decompressor is held to
// the size its page header declares, so a damaged file cannot make the
// reader allocate what it claims.
//
// # Schema versions and column defaults
//
// SchemaVersion is the version this build writes; readers accept it and
// every older version. A column a source may leave out carries a
// `default:"..."` struct tag: a file without it (or with it all null, or
// Null-typed) reads the default, and CheckColumns does not report it
// missing. The required columns are what every tool needs:
//
//	steps          step_id, kind, num_prefill_requests, sum_prefill_tokens,
//	               sum_prefill_kv_tokens, num_decode_requests,
//	               sum_decode_kv_tokens, wall_time_ns
//	step_requests  step_id, req_id, is_new, is_prefill, num_scheduled_tokens,
//	               num_computed_tokens, prompt_len
//	requests       req_id, arrival_ns, prompt_tokens, output_tokens
//	gpu_samples    every column
//
// The defaults (DefaultedColumns lists them) say "not recorded": Unknown
// (-1) for timings, sizes, counts, variances and gauges; the empty list for
// prefix_hash_ids; for labels what a plain source means: worker_id "" and
// dp_rank 0 (one worker), role production, benchmark_id -1, valid true,
// overlapped and is_resumed false, request status not_run (tools then use
// only a request's arrival and lengths). A projection read with Scan takes
// the schema's defaults for its fields that declare none.
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

// Package export writes the tables of a dataset as CSV (spreadsheets,
// pandas.read_csv) or as Arrow IPC files (pyarrow.ipc.open_file,
// polars.read_ipc, DuckDB), one file per table.
//
// Columns are mapped from each table's Parquet schema, not from the steplab
// structs, so a table with extra or fewer columns exports as it is. Types:
// BOOLEAN → bool, INT32 → int32, INT64 → int64, FLOAT → float32, DOUBLE →
// float64, BYTE_ARRAY with a STRING (or ENUM, JSON) logical type → utf8,
// other BYTE_ARRAY → binary, and a LIST of those → list<T> (list<int64> for
// prefix_hash_ids). Other nested types are refused with an error naming the
// column.
//
// CSV: one header row with the column names; booleans as true/false, floats
// in the shortest form that reads back exactly (NaN, inf, -inf), lists as a
// JSON array in one cell, nulls as an empty cell, binary as base64.
//
// Both formats stream: rows are read from Parquet in batches of
// Options.BatchRows and written as they come (an Arrow record batch per
// batch), so memory does not grow with the table. Each file is written under
// a temporary name in the output directory and renamed when complete.
package export

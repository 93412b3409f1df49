// Package inspect summarises a dataset directory (rows per table, time span,
// steps per kind and role, wall-time distributions by kind and batch size,
// payload sizes, requests, manifest highlights) or describes one Parquet file
// of any writer (schema, types, compression, row groups, metadata keys).
//
// Dataset streams the steps and requests tables through column projections
// (only the columns it summarises are read). Percentiles are exact: it keeps
// the wall times of each (kind, batch-size bucket) group and the token counts
// of the requests as []int64, 8 bytes per step and 16 per request: 80 MB for
// ten million steps. Percentiles use the nearest-rank method (the smallest
// value with at least p% of the values at or below it).
package inspect

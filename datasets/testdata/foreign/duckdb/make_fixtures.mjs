// Writes the DuckDB-made Parquet (and CSV) fixtures that steplab's tests
// read: the same synthetic engine steps and requests, written the ways a
// DuckDB user writes them. Rerun after changing it (the files are
// committed; the tests name them in foreignFixtures):
//
//   cd datasets/testdata/foreign/duckdb && npm ci && node make_fixtures.mjs
//
// The rows are deterministic. Steps: a prefill every 10th step, a mixed
// step every 10th from the 5th, decode otherwise; wall time linear in the
// composition plus a hashed jitter of ±10 µs, rounded to the microsecond;
// one synchronous engine loop per worker from 2024-05-01 00:00 UTC, so
// that t_output - t_schedule_start = wall_time_ns = narrow_time_ns and each
// step is scheduled when the previous update ends.
import { DuckDBInstance } from '@duckdb/node-api';
import fs from 'node:fs';
import path from 'node:path';

const out = path.join(path.dirname(new URL(import.meta.url).pathname), 'fixtures');
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });
const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
const run = (sql) => con.run(sql);

// steps(n, workers): the composition, wall time and timeline in int64
// nanoseconds, as a pandas user's int64 columns hold them.
const steps = (n, workers) => `
  WITH g AS (SELECT range AS i, range % ${workers} AS w FROM range(${n})),
  c AS (
    SELECT i, w,
      CASE WHEN i % 10 = 0 THEN 'prefill' WHEN i % 10 = 5 THEN 'mixed' ELSE 'decode' END AS kind,
      CASE WHEN i % 10 = 0 THEN 1 + (i // 10) % 4 WHEN i % 10 = 5 THEN 1 ELSE 0 END AS np,
      CASE WHEN i % 10 = 0 THEN 0 WHEN i % 10 = 5 THEN 4 + i % 12 ELSE 8 + i % 24 END AS nd
    FROM g),
  t AS (
    SELECT *,
      CASE WHEN kind = 'prefill' THEN np * (256 + (i % 7) * 64) WHEN kind = 'mixed' THEN 128 + (i % 5) * 32 ELSE 0 END AS spt,
      CASE WHEN kind = 'prefill' THEN (i % 3) * 128 * np WHEN kind = 'mixed' THEN 512 ELSE 0 END AS skv,
      nd * (400 + (13 * i) % 1500) AS dkv
    FROM c),
  wl AS (
    SELECT *, CAST(round((2000000 + 60 * spt + 25000 * nd + 9 * dkv + ((i * 2654435761) % 20001) - 10000) / 1000) AS BIGINT) * 1000 AS wall
    FROM t),
  tl AS (
    SELECT *, CAST(1714521600000000000 + coalesce(sum(wall + 150000) OVER (PARTITION BY w ORDER BY i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS BIGINT) AS tss
    FROM wl)
  SELECT i AS step_id, 'w' || w AS worker_id, kind, np::BIGINT AS num_prefill_requests, spt::BIGINT AS sum_prefill_tokens,
    skv::BIGINT AS sum_prefill_kv_tokens, nd::BIGINT AS num_decode_requests, dkv::BIGINT AS sum_decode_kv_tokens, wall AS wall_time_ns,
    tss AS t_schedule_start, tss + 40000 AS t_schedule_end, tss + 90000 AS t_dispatch, tss + wall AS t_output,
    tss + wall + 150000 AS t_update_end, wall AS narrow_time_ns, NULL::BIGINT AS gpu_time_ns, true AS valid
  FROM tl ORDER BY i`;

const copy = (select, file, opts) =>
  run(`COPY (${select}) TO '${path.join(out, file)}' (FORMAT parquet${opts ? ', ' + opts : ''})`);

// One file per codec DuckDB writes (its lz4 is LZ4_RAW).
for (const codec of ['uncompressed', 'snappy', 'gzip', 'zstd', 'brotli', 'lz4', 'lz4_raw']) {
  await copy(steps(600, 1), `steps_${codec}.parquet`, `COMPRESSION ${codec}`);
}

// Data pages v2 and the v2 encodings (DELTA_BINARY_PACKED,
// DELTA_LENGTH_BYTE_ARRAY).
await copy(steps(600, 1), 'steps_page_v2.parquet', 'COMPRESSION zstd, PARQUET_VERSION v2');

// Narrow and unsigned integers, float32, all-null columns, dictionary
// strings and TIMESTAMP columns of three units.
await copy(`
  SELECT step_id::INTEGER AS step_id, worker_id, 0::TINYINT AS dp_rank, kind,
    num_prefill_requests::SMALLINT AS num_prefill_requests, sum_prefill_tokens::UINTEGER AS sum_prefill_tokens,
    sum_prefill_kv_tokens::INTEGER AS sum_prefill_kv_tokens, num_decode_requests::UTINYINT AS num_decode_requests,
    sum_decode_kv_tokens::UBIGINT AS sum_decode_kv_tokens,
    (CASE WHEN num_prefill_requests > 1 THEN (sum_prefill_tokens % 97) / 4 ELSE 0 END)::REAL AS var_prefill_length,
    (sum_prefill_tokens + num_decode_requests)::UINTEGER AS total_scheduled_tokens,
    wall_time_ns,
    make_timestamp(t_schedule_start // 1000) AS t_schedule_start,
    epoch_ms(CAST(ceil(t_schedule_start / 1000000) AS BIGINT))::TIMESTAMP_MS AS t_schedule_end,
    make_timestamp(CAST(ceil(t_schedule_start / 1000000) AS BIGINT) * 1000 + 100) AS t_dispatch,
    make_timestamp_ns(t_output) AS t_output,
    make_timestamp(t_update_end // 1000) AS t_update_end,
    narrow_time_ns, gpu_time_ns, NULL::INTEGER AS num_running, valid
  FROM (${steps(600, 1)})`, 'steps_types.parquet', 'COMPRESSION zstd');

// Row groups of DuckDB's smallest size (2,048 rows).
await copy(steps(4200, 1), 'steps_row_groups.parquet', 'COMPRESSION zstd, ROW_GROUP_SIZE 2048');

// A folder of several files (data_0.parquet, ...), as DuckDB splits a large
// write.
await copy(steps(4200, 1), 'steps_files', 'COMPRESSION zstd, ROW_GROUP_SIZE 2048, FILE_SIZE_BYTES 1');

// A partitioned write: worker_id=w0/data_0.parquet, ...; the partition
// column lives in the directory names, not in the files.
await copy(steps(1200, 2), 'steps_partitioned', 'COMPRESSION zstd, PARTITION_BY (worker_id)');

// Partitioned by a column other than the engine's: each worker's steps
// are split between kind=decode/, kind=mixed/ and kind=prefill/, so the
// table's row order is no longer the steps' (validate checks the order
// within each partition).
await copy(steps(1200, 2), 'steps_by_kind', 'COMPRESSION zstd, PARTITION_BY (kind)');

// Integer sums as DuckDB types them, DECIMAL(18,0) (SUM of an integer
// window), and a DECIMAL(18,2) of whole numbers: both read at their scale.
await copy(`SELECT * REPLACE (sum_prefill_tokens::DECIMAL(18,0) AS sum_prefill_tokens,
    sum_decode_kv_tokens::DECIMAL(18,2) AS sum_decode_kv_tokens) FROM (${steps(600, 1)})`, 'steps_decimal.parquet', 'COMPRESSION zstd');
// A DECIMAL with fractions where steplab reads integers: refused with a cast.
await copy(`SELECT * REPLACE ((wall_time_ns / 1e6)::DECIMAL(18,3) AS wall_time_ns) FROM (${steps(100, 1)})`, 'steps_decimal_fraction.parquet', '');

// A requests table: integer request ids, TIMESTAMP event times, nulls
// where a request never finished.
await copy(`
  WITH r AS (SELECT range AS i, 1714521600000000 + range * 37000 + (range * 7919) % 5000 AS arrival_us FROM range(300))
  SELECT 1000 + i AS req_id, make_timestamp(arrival_us) AS arrival_ns,
    (200 + (i * 37) % 1800)::INTEGER AS prompt_tokens, (20 + (i * 11) % 300)::SMALLINT AS output_tokens,
    make_timestamp_ns((arrival_us + 25000 + (i % 9) * 1000) * 1000) AS first_token_ns,
    CASE WHEN i % 7 = 3 THEN NULL ELSE make_timestamp(arrival_us + 25000 + (i % 9) * 1000 + (20 + (i * 11) % 300) * 9000) END AS finish_ns,
    CASE WHEN i % 7 = 3 THEN 'unfinished' ELSE 'finished' END AS status,
    (i % 3)::UTINYINT AS num_preemptions
  FROM r`, 'requests.parquet', 'COMPRESSION zstd');

// Bad inputs. A wall time stored as a float (pandas turns an integer
// column with a NaN into float64):
await copy(`SELECT * REPLACE (wall_time_ns::DOUBLE AS wall_time_ns) FROM (${steps(100, 1)})`, 'steps_float_wall.parquet', '');
// A user's own column names, and a column steplab does not know: read as a
// dataset it is missing required columns; `steplab import table --map`
// renames them.
const renamed = `
  SELECT step_id AS step, kind AS batch_kind, num_prefill_requests AS prefill_reqs, sum_prefill_tokens AS prefill_tokens,
    sum_prefill_kv_tokens AS prefill_kv_tokens, num_decode_requests AS decode_reqs, sum_decode_kv_tokens AS decode_kv_tokens,
    wall_time_ns AS wall_ns, 'node-' || (step_id % 3) AS host
  FROM (${steps(600, 1)})`;
await copy(renamed, 'steps_renamed.parquet', 'COMPRESSION zstd');
await run(`COPY (${renamed}) TO '${path.join(out, 'steps_renamed.csv')}' (FORMAT csv, HEADER)`);

// Small files for the fuzz targets' seed corpus (seeds/): 20 rows of each
// codec, page v2, the converted types and requests.
fs.mkdirSync(path.join(out, 'seeds'));
for (const codec of ['uncompressed', 'snappy', 'gzip', 'zstd', 'brotli', 'lz4']) {
  await copy(steps(20, 1), `seeds/steps_${codec}.parquet`, `COMPRESSION ${codec}`);
}
await copy(steps(20, 1), 'seeds/steps_page_v2.parquet', 'COMPRESSION snappy, PARQUET_VERSION v2');
await copy(`SELECT step_id::INTEGER AS step_id, num_decode_requests::UTINYINT AS num_decode_requests,
    sum_decode_kv_tokens::UBIGINT AS sum_decode_kv_tokens, make_timestamp_ns(t_output) AS t_output, gpu_time_ns,
    (wall_time_ns / 1000)::REAL AS var_prefill_length, kind
  FROM (${steps(20, 1)})`, 'seeds/steps_types.parquet', 'COMPRESSION snappy');

// An operations database for the ops prior (fpm/opdb), written as a
// DuckDB user assembles one: BIGINT sizes, VARCHAR launch, DOUBLE latency
// and host issue time, in AIConfigurator's folder layout plus steplab's
// element-wise table. Latencies are power laws of the coordinates (ms).
const opdb = path.join(out, 'opdb');
for (const d of ['gemm', 'attention', 'elementwise']) fs.mkdirSync(path.join(opdb, d), { recursive: true });
fs.writeFileSync(path.join(opdb, 'system.yaml'),
  'data_dir: data/h200_sxm\ngpu:\n  mem_bw: 4800000000000\n  bfloat16_tc_flops: 989000000000000\n' +
  '  mem_bw_empirical_scaling_factor: 0.8\n  mem_empirical_constant_latency: 0.000003\n  sm_count: 132\n');
const launches = `(VALUES ('graph', 1.0, 0.0), ('eager', 1.5, 0.02)) AS l(launch, f, host)`;
await run(`COPY (
  SELECT 'bfloat16' AS gemm_dtype, m.range AS m, n.n, k.k, l.launch,
    (0.004 + 2.0 * m.range * n.n * k.k / 6e11) * l.f AS latency, l.host AS host_latency
  FROM range(1, 8193, 127) m, (VALUES (4096), (6144), (14336), (28672), (128256)) n(n),
    (VALUES (4096), (14336)) k(k), ${launches}
  ORDER BY ALL) TO '${path.join(opdb, 'gemm', 'gemm_perf.parquet')}' (FORMAT parquet)`);
for (const [file, q, isl] of [['context_attention_perf', 'isl * isl * 1e-8', 'range(16, 8193, 512)'],
  ['generation_attention_perf', 'isl * 2e-6', 'range(64, 16385, 1024)']]) {
  await run(`COPY (
    SELECT b.b AS batch_size, s.range AS isl, 32 AS num_heads, 8 AS num_key_value_heads, 128 AS head_dim,
      'bfloat16' AS kv_cache_dtype, l.launch, (0.005 + b.b * ${q.replaceAll('isl', 's.range')}) * l.f AS latency,
      l.host AS host_latency
    FROM (VALUES (1), (4), (16), (64), (256)) b(b), ${isl} s, ${launches}
    ORDER BY ALL) TO '${path.join(opdb, 'attention', file + '.parquet')}' (FORMAT parquet)`);
}
await run(`COPY (
  SELECT op, m.range AS m, w.n, 'bfloat16' AS dtype, l.launch, (0.002 + m.range * w.n * 2e-9) * l.f AS latency,
    l.host AS host_latency
  FROM (VALUES ('rmsnorm'), ('residual_add'), ('rope'), ('kv_write'), ('silu_mul'), ('embedding')) o(op),
    range(1, 8193, 255) m, (VALUES (1024), (4096), (5120), (14336)) w(n), ${launches}
  ORDER BY ALL) TO '${path.join(opdb, 'elementwise', 'elementwise_perf.parquet')}' (FORMAT parquet)`);

const version = (await con.runAndReadAll('SELECT version() AS v')).getRowObjects()[0].v;
fs.writeFileSync(path.join(out, 'WRITER'), `DuckDB ${version} (@duckdb/node-api), make_fixtures.mjs\n`);
console.log(`wrote ${out} with DuckDB ${version}`);

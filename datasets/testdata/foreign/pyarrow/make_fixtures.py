#!/usr/bin/env python3
"""Write the pandas/pyarrow fixtures steplab's tests read.

    python3 make_fixtures.py OUT_DIR

needs pandas and pyarrow (any 2x of both). It writes into OUT_DIR the files
that FIXTURES beside this script lists: the same engine
steps and requests as ../duckdb/make_fixtures.mjs (the same formulas, row
for row), written the ways a pandas or pyarrow user writes them. Commit
OUT_DIR as datasets/testdata/foreign/pyarrow/fixtures together with
OUT_DIR/WRITER, which records the versions used.
"""

import math
import os
import shutil
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ORIGIN_NS = 1714521600000000000  # 2024-05-01 00:00:00 UTC
UPDATE_NS = 150000


def steps_frame(n):
    """The steps of ../duckdb/make_fixtures.mjs steps(n, 1), as int64 columns."""
    rows = []
    tss = ORIGIN_NS
    for i in range(n):
        if i % 10 == 0:
            kind, np_, nd = "prefill", 1 + (i // 10) % 4, 0
        elif i % 10 == 5:
            kind, np_, nd = "mixed", 1, 4 + i % 12
        else:
            kind, np_, nd = "decode", 0, 8 + i % 24
        if kind == "prefill":
            spt, skv = np_ * (256 + (i % 7) * 64), (i % 3) * 128 * np_
        elif kind == "mixed":
            spt, skv = 128 + (i % 5) * 32, 512
        else:
            spt, skv = 0, 0
        dkv = nd * (400 + (13 * i) % 1500)
        x = 2000000 + 60 * spt + 25000 * nd + 9 * dkv + ((i * 2654435761) % 20001) - 10000
        wall = math.floor(x / 1000 + 0.5) * 1000  # DuckDB's round: half away from zero
        rows.append(dict(
            step_id=i, worker_id="w0", kind=kind, num_prefill_requests=np_, sum_prefill_tokens=spt,
            sum_prefill_kv_tokens=skv, num_decode_requests=nd, sum_decode_kv_tokens=dkv, wall_time_ns=wall,
            t_schedule_start=tss, t_schedule_end=tss + 40000, t_dispatch=tss + 90000, t_output=tss + wall,
            t_update_end=tss + wall + UPDATE_NS, narrow_time_ns=wall, gpu_time_ns=None, valid=True,
        ))
        tss += wall + UPDATE_NS
    df = pd.DataFrame(rows)
    for c in df.columns:
        if c not in ("worker_id", "kind", "gpu_time_ns", "valid"):
            df[c] = df[c].astype("int64")
    return df  # gpu_time_ns: all None, an object column pyarrow writes as the Null type


def requests_frame():
    """The requests of ../duckdb/make_fixtures.mjs."""
    rows = []
    for i in range(300):
        arrival_us = 1714521600000000 + i * 37000 + (i * 7919) % 5000
        out = 20 + (i * 11) % 300
        first_us = arrival_us + 25000 + (i % 9) * 1000
        rows.append(dict(
            req_id=1000 + i,
            arrival_ns=pd.Timestamp(arrival_us, unit="us"),
            prompt_tokens=200 + (i * 37) % 1800,
            output_tokens=out,
            first_token_ns=pd.Timestamp(first_us * 1000, unit="ns"),
            finish_ns=pd.NaT if i % 7 == 3 else pd.Timestamp(first_us + out * 9000, unit="us"),
            status="unfinished" if i % 7 == 3 else "finished",
            num_preemptions=i % 3,
        ))
    df = pd.DataFrame(rows)
    df["req_id"] = df["req_id"].astype("int64")
    df["arrival_ns"] = df["arrival_ns"].astype("datetime64[us]")
    df["prompt_tokens"] = df["prompt_tokens"].astype("int32")
    df["output_tokens"] = df["output_tokens"].astype("int16")
    df["finish_ns"] = df["finish_ns"].astype("datetime64[us]")
    df["num_preemptions"] = df["num_preemptions"].astype("uint8")
    return df


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    p = lambda name: os.path.join(out, name)
    steps = steps_frame(600)

    # What a pandas user writes: to_parquet with the defaults (snappy); the
    # all-None gpu_time_ns becomes the Null type.
    steps.to_parquet(p("steps_pandas.parquet"), index=False)

    # The Null type made explicit, on two columns.
    t = pa.Table.from_pandas(steps, preserve_index=False)
    t = t.set_column(t.schema.get_field_index("gpu_time_ns"), "gpu_time_ns", pa.nulls(len(steps)))
    t = t.append_column("host_prep_ns", pa.nulls(len(steps)))
    assert t.schema.field("gpu_time_ns").type == pa.null()
    pq.write_table(t, p("steps_none_column.parquet"))

    # Narrow and unsigned integers.
    narrow = steps.astype({"step_id": "int32", "num_prefill_requests": "int16", "num_decode_requests": "uint8",
                           "sum_prefill_tokens": "uint32", "sum_prefill_kv_tokens": "int32", "sum_decode_kv_tokens": "uint64"})
    narrow.to_parquet(p("steps_int32.parquet"), index=False)

    # Categorical strings: dictionary<int8, string> in Arrow.
    cat = steps.astype({"kind": "category", "worker_id": "category"})
    cat.to_parquet(p("steps_categorical.parquet"), index=False)

    table = pa.Table.from_pandas(steps, preserve_index=False)
    pq.write_table(table, p("steps_page_v2.parquet"), data_page_version="2.0", compression="zstd")
    for codec in ("snappy", "gzip", "brotli", "lz4", "zstd", "none"):
        pq.write_table(table, p(f"steps_{codec}.parquet"), compression=codec)

    # TIMESTAMP columns of three units (t_schedule_end and t_dispatch
    # rounded up to the millisecond, as in the DuckDB fixture, so the
    # window stays in order).
    def ms_up(col):
        return pd.to_datetime((steps[col] + 999_999) // 1_000_000 * 1_000_000, unit="ns").astype("datetime64[ms]")
    ts = steps.copy()
    ts["t_schedule_start"] = pd.to_datetime(ts["t_schedule_start"], unit="ns").astype("datetime64[us]")
    ts["t_schedule_end"] = ms_up("t_schedule_end")
    ts["t_dispatch"] = ms_up("t_dispatch")
    ts["t_output"] = pd.to_datetime(ts["t_output"], unit="ns")
    ts["t_update_end"] = pd.to_datetime(ts["t_update_end"], unit="ns").astype("datetime64[us]")
    ts.to_parquet(p("steps_timestamps.parquet"), index=False)

    pq.write_table(table, p("steps_small_row_groups.parquet"), row_group_size=50)

    # A partitioned write: worker_id=w0/part-0.parquet.
    pq.write_to_dataset(table, p("steps_partitioned"), partition_cols=["worker_id"],
                        basename_template="part-{i}.parquet")

    requests_frame().to_parquet(p("requests.parquet"), index=False)

    with open(p("WRITER"), "w") as f:
        f.write(f"pandas {pd.__version__}, pyarrow {pa.__version__}, make_fixtures.py\n")
    listed = os.path.join(os.path.dirname(os.path.abspath(__file__)), "FIXTURES")
    with open(listed) as f:
        want = sorted(line.split()[0] for line in f if line.strip() and not line.startswith("#"))
    wrote = sorted(n for n in os.listdir(out) if n != "WRITER")
    if wrote != want:
        sys.exit(f"wrote {wrote}, but FIXTURES lists {want}")
    print(f"wrote {len(wrote)} fixtures into {out} with pandas {pd.__version__}, pyarrow {pa.__version__}")


if __name__ == "__main__":
    main()

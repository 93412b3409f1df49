#!/usr/bin/env python3
"""Write dynamo_fpm_publisher.msgpack: ForwardPassMetrics payloads encoded the
way Dynamo's publisher encodes them, concatenated as a subscriber appends them.

Dynamo (ai-dynamo/dynamo @ 2712426f, components/src/dynamo/common/
forward_pass_metrics.py) declares ForwardPassMetrics, ScheduledRequestMetrics
and QueuedRequestMetrics as msgspec.Struct without array_like, and encodes
them with a default msgspec.msgpack.Encoder. _FpmPublisherThread
(components/src/dynamo/vllm/instrumented_scheduler.py) stamps counter_id with
its send sequence (itertools.count(), from 0; heartbeats take a number too)
and sends (b"", seq as 8 bytes big-endian, payload) on a ZMQ PUB socket.

msgspec encodes such a Struct as a msgpack map: one entry per field, in
declaration order, defaults included (omit_defaults is off), keys as str;
int in the smallest msgpack int format, float always as float64 (0xcb), str
as fixstr/str8/str16/str32. msgpack-python's packb of a dict in the same
insertion order, with use_bin_type=True and use_single_float=False (its
defaults), writes exactly those bytes, so this script needs only
python3-msgpack, not msgspec.

The field lists below mirror Dynamo's declarations (names and order). The
messages are invented: numbers of the magnitude a Llama-8B engine reports.
Run: python3 dynamo_fpm_publisher.py (rewrites the .msgpack beside it).
"""

import os

import msgpack

SCHEDULED = ["num_prefill_requests", "sum_prefill_tokens", "var_prefill_length",
             "sum_prefill_kv_tokens", "num_decode_requests", "sum_decode_kv_tokens",
             "var_decode_kv_tokens"]
QUEUED = ["num_prefill_requests", "sum_prefill_tokens", "var_prefill_length",
          "num_decode_requests", "sum_decode_kv_tokens", "var_decode_kv_tokens"]
# Since dynamo #7501 (17abc9de): version and counter_id.
FPM_V1 = ["version", "worker_id", "dp_rank", "counter_id", "wall_time",
          "scheduled_requests", "queued_requests"]
# Before #7501 (af30b779, cd4773fb): no version, no counter_id.
FPM_V0 = ["worker_id", "dp_rank", "wall_time", "scheduled_requests", "queued_requests"]

FLOATS = {"wall_time", "var_prefill_length", "var_decode_kv_tokens"}


def struct(fields, values):
    """A msgspec Struct as msgspec encodes it: every field, declaration order."""
    out = {}
    for f in fields:
        v = values.get(f, 0.0 if f in FLOATS else 0)
        out[f] = float(v) if f in FLOATS else v
    return out


def fpm(fields, worker, rank, counter, wall, sched=None, queued=None):
    values = {"version": 1, "worker_id": worker, "dp_rank": rank, "counter_id": counter,
              "wall_time": wall,
              "scheduled_requests": struct(SCHEDULED, sched or {}),
              "queued_requests": struct(QUEUED, queued or {})}
    return msgpack.packb(struct(fields, values), use_bin_type=True)


def main():
    w = "7587891376465402128"
    msgs = [
        # rank 0: counters 0..4 as the publisher stamps them
        fpm(FPM_V1, w, 0, 0, 0.0183, {"num_prefill_requests": 1, "sum_prefill_tokens": 2048,
                                      "var_prefill_length": 0.0}, {"num_prefill_requests": 2,
                                                                   "sum_prefill_tokens": 3100,
                                                                   "var_prefill_length": 2500.0}),
        fpm(FPM_V1, w, 0, 1, 0.0241, {"num_prefill_requests": 2, "sum_prefill_tokens": 1500,
                                      "var_prefill_length": 90000.25, "sum_prefill_kv_tokens": 2048,
                                      "num_decode_requests": 1, "sum_decode_kv_tokens": 2300}),
        fpm(FPM_V1, w, 0, 2, 0.0112, {"num_decode_requests": 3, "sum_decode_kv_tokens": 6120,
                                      "var_decode_kv_tokens": 160000.5}),
        # rank 1, its own publisher and counter
        fpm(FPM_V1, w, 1, 0, 0.0095, {"num_decode_requests": 40, "sum_decode_kv_tokens": 65536,
                                      "var_decode_kv_tokens": 1.5e6}, {"num_decode_requests": 1,
                                                                       "sum_decode_kv_tokens": 900}),
        # idle heartbeat: ForwardPassMetrics(worker_id, dp_rank), counter stamped
        fpm(FPM_V1, w, 0, 3, 0.0),
        # counter 4 dropped by the publisher's full queue
        fpm(FPM_V1, w, 0, 5, 0.0131, {"num_prefill_requests": 1, "sum_prefill_tokens": 300,
                                      "num_decode_requests": 2, "sum_decode_kv_tokens": 4100,
                                      "var_decode_kv_tokens": 4.0}),
        # a publisher from before #7501
        fpm(FPM_V0, w, 2, 0, 0.0201, {"num_prefill_requests": 1, "sum_prefill_tokens": 512}),
        # a 300-character worker_id needs str16
        fpm(FPM_V1, "w" * 300, 0, 0, 0.5, {"num_decode_requests": 70000,
                                           "sum_decode_kv_tokens": 5_000_000_000}),
    ]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynamo_fpm_publisher.msgpack")
    with open(path, "wb") as f:
        f.write(b"".join(msgs))


if __name__ == "__main__":
    main()

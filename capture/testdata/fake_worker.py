"""A fake steplab GPU worker for the capture failure tests.

It speaks the framing and session of capture/worker/PROTOCOL.md (version 1)
without a model: `init` is answered with `ready`, each `step` with an
`output` that samples token 7 for every request that reached the end of its
known sequence. FAKE_WORKER_MODE makes it fail on purpose after
FAKE_WORKER_STEPS steps (default 20) have been answered:

  ok       never fails
  triton   never fails, and reports the Triton attention and its decode
           launch rule (an H200's: 264 programs, 2 x 132 SMs)
  die      exits with status 3 (a crash: no error frame)
  hang     stops answering (sleeps; the driver's StepTimeout must fire)
  garbage  writes one frame of random bytes that are not msgpack
  huge     writes a frame header announcing 4 GiB - 16 bytes
  refuse   answers init with an error: the config does not fit

It logs to stderr as the real worker does, so the tests can check that the
driver's error carries the last lines.
"""

import os
import struct
import sys
import time

import msgpack

MODE = os.environ.get("FAKE_WORKER_MODE", "ok")
FAIL_AFTER = int(os.environ.get("FAKE_WORKER_STEPS", "20"))

stdin = sys.stdin.buffer
stdout = sys.stdout.buffer


def log(msg):
    sys.stderr.write("fake-worker: %s\n" % msg)
    sys.stderr.flush()


def read_exact(n):
    buf = b""
    while len(buf) < n:
        b = stdin.read(n - len(buf))
        if not b:
            return None
        buf += b
    return buf


def read_frame():
    hdr = read_exact(4)
    if hdr is None:
        return None
    (n,) = struct.unpack(">I", hdr)
    body = read_exact(n)
    return msgpack.unpackb(body, raw=False, strict_map_key=False)


def write_raw(b):
    stdout.write(b)
    stdout.flush()


def write_frame(msg):
    body = msgpack.packb(msg, use_bin_type=True)
    write_raw(struct.pack(">I", len(body)) + body)


def fail():
    if MODE == "die":
        log("simulated crash after %d steps" % FAIL_AFTER)
        os._exit(3)
    if MODE == "hang":
        log("simulated hang after %d steps" % FAIL_AFTER)
        time.sleep(3600)
    if MODE == "garbage":
        log("writing garbage after %d steps" % FAIL_AFTER)
        body = b"\xc1" + os.urandom(63)  # 0xc1 is never valid msgpack
        write_raw(struct.pack(">I", len(body)) + body)
        time.sleep(3600)
    if MODE == "huge":
        log("writing a huge frame header after %d steps" % FAIL_AFTER)
        write_raw(struct.pack(">I", 0xFFFFFFF0))
        time.sleep(3600)


def main():
    msg = read_frame()
    if msg is None or msg.get("type") != "init":
        log("expected init")
        return 1
    if MODE == "refuse":
        text = ("does not fit: weights 16.06 GB + KV cache 128.00 GB + workspace 2.00 GB > "
                "free 79.10 GB; use num_gpu_blocks <= 4711")
        log("error: " + text)
        write_frame({"type": "error", "message": text})
        return 1
    blocks = msg.get("num_gpu_blocks") or 4096
    log("ready (mode %s, failing after %d steps)" % (MODE, FAIL_AFTER))
    triton = MODE == "triton"
    write_frame({
        "type": "ready", "protocol_version": 1, "device": "cpu", "gpu_name": "fake",
        "torch_version": "none", "triton_version": None, "attention_backend": "triton" if triton else "fake",
        "decode_attention": {"kv_tile_tokens": 64, "split_programs": 264, "split_max": 16,
                             "split_rounding": "pow2"} if triton else None,
        "model_config": {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
                         "intermediate": 128, "vocab": 512, "dtype": "bfloat16"},
        "num_gpu_blocks": blocks, "block_size": msg.get("block_size", 16),
        "max_num_seqs": msg.get("max_num_seqs", 256), "max_num_batched_tokens": msg.get("max_num_batched_tokens", 8192),
        "max_model_len": msg.get("max_model_len", 8192), "kv_bytes": 1, "weight_bytes": 1,
        "cuda_graph_sizes": [], "build_ns": 1, "graph_capture_ns": 0, "warmup_ns": 0, "memory": {},
    })
    known = {}  # req_id -> tokens known (prompt + sampled)
    done = 0
    while True:
        msg = read_frame()
        if msg is None:
            log("stdin closed")
            return 0
        t = msg.get("type")
        if t == "shutdown":
            write_frame({"type": "bye"})
            return 0
        if t != "step":
            log("unexpected %r" % t)
            return 1
        if MODE not in ("ok", "triton") and done >= FAIL_AFTER:
            fail()
        for r in msg.get("finished_req_ids") or []:
            known.pop(r, None)
        computed = {}
        for r in msg.get("scheduled_new_reqs") or []:
            known[r["req_id"]] = len(r["prompt_token_ids"])
            computed[r["req_id"]] = r["num_computed_tokens"]
        c = msg.get("scheduled_cached_reqs") or {}
        for i, r in enumerate(c.get("req_ids") or []):
            computed[r] = c["num_computed_tokens"][i]
        sampled = {}
        for r, n in msg["num_scheduled_tokens"].items():
            if computed[r] + n >= known[r]:
                known[r] += 1
                sampled[r] = 7
            else:
                sampled[r] = -1
        time.sleep(0.0005)
        write_frame({"type": "output", "step_id": msg["step_id"], "sampled_token_ids": sampled,
                     "timings": {"recv_ns": 1000, "prep_ns": 2000, "device_ns": 300000, "sample_ns": 500,
                                 "total_ns": 310000, "graph": 0, "num_reqs": len(sampled),
                                 "num_tokens": msg["total_num_scheduled_tokens"], "padded_tokens": 0},
                     "t_worker_done_ns": time.monotonic_ns()})
        done += 1
        if done % 5 == 0:
            log("answered %d steps" % done)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""steplab GPU worker: speaks the frame protocol of PROTOCOL.md on
stdin/stdout, runs a Llama-shaped model with a paged KV cache and a vLLM-style
persistent batch, and reports per-step timings.

Usage: python3 worker.py            (the driver starts it as a subprocess)
"""

import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def _log(msg):
    sys.stderr.write("steplab-worker: %s\n" % msg)
    sys.stderr.flush()


def _protocol_streams():
    """Take the real stdin/stdout for frames and point fd 1 at stderr so no
    stray print (Python, PyTorch, Triton) can corrupt the frame stream."""
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(0, "rb", buffering=0, closefd=False), os.fdopen(out_fd, "wb", buffering=0)


def main():
    fin, fout = _protocol_streams()
    import framing  # noqa: E402  (after the fd swap: imports may print)
    from framing import CleanEOF, FrameError, read_frame, write_frame

    def fail(message, code, step_id=None):
        _log("error: " + message)
        try:
            write_frame(fout, {"type": "error", "message": message, "step_id": step_id})
        except Exception as e:  # the driver may be gone
            _log("could not write the error frame: %s" % e)
        return code

    runner = None
    while True:
        try:
            msg, t_hdr, t_dec = read_frame(fin)
        except CleanEOF:
            _log("stdin closed; exiting")
            return 0
        except FrameError as e:
            return fail("frame error: %s" % e, 2)
        typ = msg.get("type")
        step_id = None
        try:
            if typ == "init":
                if runner is not None:
                    return fail("protocol error: second init", 1)
                runner = _init(msg)
                r = runner
                reply = {
                    "type": "ready", "protocol_version": 1, "device": str(r.device),
                    "gpu_name": _device_name(r), "torch_version": _torch().__version__,
                    "triton_version": _triton_version(), "attention_backend": r.backend,
                    "model_config": r.mcfg.as_dict(), "model": r.mcfg.preset,
                    "num_gpu_blocks": r.num_blocks, "block_size": r.ecfg.block_size,
                    "max_num_seqs": r.ecfg.max_num_seqs, "max_num_batched_tokens": r.ecfg.max_num_batched_tokens,
                    "max_model_len": r.ecfg.max_model_len, "kv_bytes": r.kv_bytes,
                    "weight_bytes": r.weight_bytes, "router_logit_std": r.model.router_logit_std(),
                    "cuda_graph_sizes": r.graph_sizes,
                    "mixed_cuda_graph_sizes": r.mixed_graph_sizes,
                    "mixed_cuda_graph_mode": r.graph_mode if r.mixed_graph_sizes else "",
                    "decode_attention": r.model.triton_attn.decode_rule() if r.model.triton_attn else None,
                    "build_ns": r.build_ns, "graph_capture_ns": r.graph_capture_ns, "warmup_ns": r.warmup_ns,
                    "memory": r.memory,
                }
                write_frame(fout, reply)
                _log("ready: %s on %s, %d KV blocks, backend %s, graphs %s, prefill/mixed graphs %s %s"
                     % (r.mcfg.preset, reply["gpu_name"], r.num_blocks, r.backend, r.graph_sizes,
                        reply["mixed_cuda_graph_mode"], r.mixed_graph_sizes))
            elif typ == "step":
                if runner is None:
                    return fail("protocol error: step before init", 1)
                step_id = msg.get("step_id")
                if isinstance(step_id, bool) or not isinstance(step_id, int):
                    bad = step_id
                    step_id = None
                    return fail("protocol error: step.step_id must be an integer, got %r" % (bad,), 1)
                sampled, timing = runner.execute(msg)
                # Free the message inside this step's window: a step that
                # admits B prompts holds their token ids as Python ints, and
                # freeing them when the next message replaces this one would
                # charge the next step (~10 ns a token: 5 ms after admitting
                # 512 prompts of 1,024 tokens).
                del msg
                timing["recv_ns"] = t_dec - t_hdr
                now = time.monotonic_ns()
                timing["total_ns"] = now - t_hdr
                write_frame(fout, {"type": "output", "step_id": step_id, "sampled_token_ids": sampled,
                                   "timings": timing, "t_worker_done_ns": now})
            elif typ == "shutdown":
                write_frame(fout, {"type": "bye"})
                _log("shutdown")
                return 0
            else:
                return fail("protocol error: unknown message type %r (want init, step or shutdown)" % (typ,), 1)
        except Exception as e:
            kind = type(e).__name__
            known = kind in ("ConfigError", "StepError")
            if not known:
                _log(traceback.format_exc())
            prefix = {"ConfigError": "init refused: ", "StepError": "protocol error: "}.get(kind, "%s: " % kind)
            return fail(prefix + str(e), 1, step_id)


def _torch():
    import torch
    return torch


def _triton_version():
    import attention
    return attention.TRITON_VERSION


def _device_name(r):
    if r.is_cuda:
        return _torch().cuda.get_device_name(r.device)
    return "cpu"


def _init(msg):
    from config import EngineConfig
    from runner import ModelRunner
    ecfg = EngineConfig(msg)
    return ModelRunner(ecfg, log=_log)


if __name__ == "__main__":
    sys.exit(main())

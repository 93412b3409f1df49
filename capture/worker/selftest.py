#!/usr/bin/env python3
"""Self-test for the device machine.

    python3 selftest.py --device cuda            # 8B shape on the GPU
    python3 selftest.py --device cpu --model tiny --ctx 32 --batches 1,4

1. (CUDA + Triton) the Triton paged attention against a dense reference, for
   mixed prefill-with-prefix/decode batches and split-KV decode;
2. (CUDA) the tiny model with Triton attention + CUDA graphs against the
   per-request torch backend, step by step (logits);
3. the worker as a subprocess over the frame protocol with the chosen model:
   for each batch size B, an admission step (B new requests whose first
   ctx-1 tokens count as computed, so the step is decode-shaped) and then
   steady decode steps through scheduled_cached_reqs; plus a chunked prefill.
Prints one line per step; writes selftest.json to $OUT when it is set.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import msgpack  # noqa: E402
import torch  # noqa: E402

import attention  # noqa: E402
from framing import Client  # noqa: E402

RESULTS = {"checks": {}, "steps": []}


def log(*a):
    print(*a, flush=True)


# (heads, kv_heads, head_dim) of the kernel check: Llama-3.1-8B and
# Mistral-Nemo (group of 4), Qwen2.5-7B (a group of 7, padded to 8).
KERNEL_HEADS = [(32, 8, 128), (28, 4, 128)]


def check_kernels():
    from testutil import CASES, _paged_case
    dev = torch.device("cuda")
    cases = CASES + [
        [(3000, 1), (17, 1), (1500, 1)],            # split-KV decode (few sequences)
        [(0, 1000), (2000, 1), (257, 300), (0, 1)],  # mixed: long prefill, decode, chunk with prefix
        [(100, 1)] * 40 + [(4000, 1)] * 3,            # larger decode batch
    ]
    worst = 0.0
    for heads, kvh, d in KERNEL_HEADS:
        ta = attention.TritonAttention(heads, kvh, d, 16, dev, 256)
        scale = attention.softmax_scale(d)
        for cs in cases:
            inp, qs, ks, vs = _paged_case(cs, dtype=torch.bfloat16, device="cuda", block_size=16, kvh=kvh, heads=heads, d=d)
            seq = torch.tensor(inp["seq_lens"], dtype=torch.int32, device=dev)
            qsl = torch.tensor(inp["qsl"], dtype=torch.int32, device=dev)
            maxq = max(b - a for a, b in zip(inp["qsl"], inp["qsl"][1:]))
            out = ta(inp["q"], inp["kc"], inp["vc"], inp["bt"], seq, qsl, len(cs), maxq, scale)
            torch.cuda.synchronize()
            ref = torch.cat(attention.dense_reference([x.cuda() for x in qs], [x.cuda() for x in ks],
                                                      [x.cuda() for x in vs], scale))
            err = (out.float() - ref.float()).abs().max().item()
            tor = attention.paged_attention_torch(inp["q"], inp["kc"], inp["vc"], inp["bt"], inp["qsl"],
                                                  inp["seq_lens"], len(cs), scale)
            err_t = (tor.float() - ref.float()).abs().max().item()
            log("  triton attention H=%d KVH=%d D=%d B=%d maxq=%d splits=%d: max|triton-dense|=%.4g  max|torch-dense|=%.4g"
                % (heads, kvh, d, len(cs), maxq, ta.num_splits(len(cs)) if maxq == 1 else 1, err, err_t))
            worst = max(worst, err)
    RESULTS["checks"]["triton_attention_max_abs_err"] = worst
    ok = worst < 3e-2
    log("kernel check: %s (worst %.4g)" % ("OK" if ok else "FAIL", worst))
    return ok


def check_tiny_graphs():
    from config import EngineConfig
    from runner import ModelRunner
    from testutil import new_req, step, tiny_init

    def mk(backend, sizes):
        m = tiny_init(device="cuda", attention_backend=backend, cuda_graph_sizes=sizes, model_config={"dtype": "float32"},
                      block_size=16, max_model_len=256, max_num_batched_tokens=256, num_gpu_blocks=256)
        return ModelRunner(EngineConfig(m))
    rt = mk("triton", [1, 2, 4, 8, 16, 32, 64, 128, 256])
    rr = mk("torch", [])
    rnd = random.Random(0)
    prompts = {"r%d" % i: [rnd.randrange(512) for _ in range(rnd.randrange(5, 60))] for i in range(5)}
    blocks = {rid: list(range(i * 10, i * 10 + 10)) for i, rid in enumerate(prompts)}
    worst = 0.0
    computed = {r: 0 for r in prompts}
    msg = step(0, new=[new_req(r, p, blocks[r]) for r, p in prompts.items()],
               sched={r: len(p) for r, p in prompts.items()})
    outs = []
    mixed_graphs = 0
    for i in range(7):
        a, ta = rt.execute(msg)
        b, _ = rr.execute(msg)
        d = (rt.last_logits - rr.last_logits).abs().max().item() / rr.last_logits.abs().max().item()
        worst = max(worst, d)
        outs.append((ta["graph"], round(d, 6), a == b))
        mixed_graphs += bool(ta["graph"] and ta["num_tokens"] > ta["num_reqs"])
        for r, n in msg["num_scheduled_tokens"].items():
            computed[r] = computed.get(r, 0) + n
            # keep both token histories identical (a near-tie could flip a greedy token)
            tok = rr.requests[r].output_token_ids[-1]
            rt.requests[r].output_token_ids[-1] = tok
            row = rt.batch.req_id_to_index.get(r)
            if row is not None:
                rt.batch.token_ids[row, rt.batch.num_tokens[row] - 1] = tok
        live = list(prompts)[: 5 - (i % 3)]  # B = 5, 4, 3, 5, ... -> graphs 8, 4, 4, 8
        new, sched = [], {r: 1 for r in live}
        if i == 2:  # a prompt riding with the decodes: a mixed graph of 32 tokens
            p = [rnd.randrange(512) for _ in range(20)]
            new, sched["r5"] = [new_req("r5", p, list(range(50, 60)))], len(p)
        msg = step(i + 1, new=new, cached={"req_ids": live, "num_computed_tokens": [computed[r] for r in live]},
                   sched=sched)
    log("  tiny model steps (graph size, rel logit diff, same tokens): %s" % outs)
    used = [g for g, _, _ in outs if g]
    ok = worst < 2e-2 and len(used) >= 3 and mixed_graphs >= 2
    RESULTS["checks"]["tiny_graph_vs_torch_rel_err"] = worst
    log("tiny triton+graphs vs torch: %s (worst rel %.3g, graphs used %s)" % ("OK" if ok else "FAIL", worst, used))
    return ok


def protocol_run(args):
    env = dict(os.environ)
    c = Client([sys.executable, os.path.join(HERE, "worker.py")], env=env)
    bsizes = [int(x) for x in args.batches.split(",")]
    maxb = max(bsizes)
    bs = 16
    per_req = -(-(args.ctx + args.steady + 8) // bs)
    max_len = max(args.ctx + args.steady + 16, args.prefill + 16)
    blocks_needed = maxb * per_req + 2 * (-(-max_len // bs)) + 16
    graph_sizes = [s for s in [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512] if s <= maxb] \
        if args.device.startswith("cuda") else []
    init = {"type": "init", "model": args.model, "device": args.device, "seed": 0, "num_gpu_blocks": blocks_needed,
            "block_size": bs, "max_num_seqs": maxb, "max_num_batched_tokens": max(args.prefill, 2048),
            "max_model_len": max_len, "cuda_graph_sizes": graph_sizes, "attention_backend": "auto"}
    t0 = time.monotonic()
    ready = c.call(init)
    if ready["type"] != "ready":
        log("init failed: %s" % ready)
        return False
    log("ready in %.1fs: %s" % (time.monotonic() - t0, {k: v for k, v in ready.items() if k != "model_config"}))
    RESULTS["ready"] = ready
    vocab = ready["model_config"]["vocab"]
    rnd = random.Random(1)
    next_block = [0]
    sid = [0]

    def alloc(n):
        b = list(range(next_block[0], next_block[0] + n))
        next_block[0] += n
        return b

    def send(msg, label, b, ctx):
        msg["step_id"] = sid[0]
        sid[0] += 1
        payload = len(msgpack.packb(msg, use_bin_type=True))
        out = c.call(msg)
        if out["type"] != "output":
            raise RuntimeError("step failed: %s" % out)
        toks = out["sampled_token_ids"]
        assert all(-1 <= t < vocab for t in toks.values()), toks
        tm = out["timings"]
        row = dict(label=label, B=b, ctx=ctx, payload_bytes=payload, **tm)
        RESULTS["steps"].append(row)
        log("%-10s B=%-4d ctx=%-5d payload=%9d graph=%-4d recv=%7.3f prep=%7.3f device=%8.3f sample=%6.3f "
            "total=%8.3f ms" % (label, b, ctx, payload, tm["graph"], tm["recv_ns"] / 1e6, tm["prep_ns"] / 1e6,
                                tm["device_ns"] / 1e6, tm["sample_ns"] / 1e6, tm["total_ns"] / 1e6))
        return toks

    def empty_cached():
        return {"req_ids": [], "resumed_req_ids": [], "new_token_ids": None, "new_block_ids": [],
                "num_computed_tokens": [], "num_output_tokens": []}

    to_finish = []
    for B in bsizes:
        ctx = args.ctx
        next_block[0] = 0
        ids = ["b%d_%d" % (B, i) for i in range(B)]
        blocks = {r: alloc(per_req) for r in ids}
        new = [{"req_id": r, "prompt_token_ids": [rnd.randrange(vocab) for _ in range(ctx)],
                "block_ids": blocks[r], "num_computed_tokens": ctx - 1,
                "sampling_params": {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_tokens": 64, "seed": None}}
               for r in ids]
        # admission: B brand-new requests, decode-shaped (1 token each)
        send({"type": "step", "scheduled_new_reqs": new, "scheduled_cached_reqs": empty_cached(),
              "num_scheduled_tokens": {r: 1 for r in ids}, "total_num_scheduled_tokens": B,
              "finished_req_ids": to_finish, "preempted_req_ids": []}, "admission", B, ctx)
        for s in range(args.steady):
            cr = empty_cached()
            cr.update(req_ids=ids, new_block_ids=[None] * B, num_computed_tokens=[ctx + s] * B,
                      num_output_tokens=[s + 1] * B)
            send({"type": "step", "scheduled_new_reqs": [], "scheduled_cached_reqs": cr,
                  "num_scheduled_tokens": {r: 1 for r in ids}, "total_num_scheduled_tokens": B,
                  "finished_req_ids": [], "preempted_req_ids": []}, "steady", B, ctx + s + 1)
        # chunked prefill of one long request (the batch finishes in the same step)
        n = args.prefill
        r = "p%d" % B
        pb = alloc(-(-(n + 8) // bs))
        chunk = n // 2
        send({"type": "step", "scheduled_new_reqs": [{
            "req_id": r, "prompt_token_ids": [rnd.randrange(vocab) for _ in range(n)], "block_ids": pb,
            "num_computed_tokens": 0, "sampling_params": {"temperature": 0.7, "top_p": 0.9, "top_k": 50,
                                                          "max_tokens": 8, "seed": 3}}],
            "scheduled_cached_reqs": empty_cached(), "num_scheduled_tokens": {r: chunk},
            "total_num_scheduled_tokens": chunk, "finished_req_ids": ids,
            "preempted_req_ids": []}, "prefill-1", 1, chunk)
        cr = empty_cached()
        cr.update(req_ids=[r], new_block_ids=[None], num_computed_tokens=[chunk], num_output_tokens=[0])
        toks = send({"type": "step", "scheduled_new_reqs": [], "scheduled_cached_reqs": cr,
                     "num_scheduled_tokens": {r: n - chunk}, "total_num_scheduled_tokens": n - chunk,
                     "finished_req_ids": [], "preempted_req_ids": []}, "prefill-2", 1, n)
        assert toks[r] >= 0
        cr = empty_cached()
        cr.update(req_ids=[r], new_block_ids=[None], num_computed_tokens=[n], num_output_tokens=[1])
        send({"type": "step", "scheduled_new_reqs": [], "scheduled_cached_reqs": cr,
              "num_scheduled_tokens": {r: 1}, "total_num_scheduled_tokens": 1, "finished_req_ids": [],
              "preempted_req_ids": []}, "decode", 1, n + 1)
        to_finish = [r]
    bye = c.call({"type": "shutdown"})
    rc = c.close()
    log("shutdown: %s rc=%d" % (bye, rc))
    return bye.get("type") == "bye" and rc == 0


def guarded(what, fn, *args):
    """fn(*args), or False after logging its exception, so that one broken
    check still lets the others run and report."""
    try:
        return fn(*args)
    except Exception as e:
        traceback.print_exc()
        log("%s FAILED: %s" % (what, e))
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default=None)
    ap.add_argument("--ctx", type=int, default=None)
    ap.add_argument("--batches", default=None)
    ap.add_argument("--steady", type=int, default=5)
    ap.add_argument("--prefill", type=int, default=None)
    ap.add_argument("--skip-checks", action="store_true")
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    args.model = args.model or ("llama-8b" if cuda else "tiny")
    args.ctx = args.ctx or (2048 if cuda else 32)
    args.batches = args.batches or ("1,64,256" if cuda else "1,4")
    args.prefill = args.prefill or (4096 if cuda else 40)
    log("torch %s, triton %s, cuda available %s%s" % (
        torch.__version__, attention.TRITON_VERSION, torch.cuda.is_available(),
        (", " + torch.cuda.get_device_name(0)) if torch.cuda.is_available() else ""))
    ok = True
    if cuda and not args.skip_checks:
        if attention.HAVE_TRITON:
            ok &= guarded("kernel check", check_kernels)
        ok &= guarded("tiny graph check", check_tiny_graphs)
    ok &= guarded("protocol run", protocol_run, args)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "selftest.json"), "w") as f:
            json.dump(RESULTS, f, indent=1, default=str)
    log("SELFTEST %s" % ("PASSED" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

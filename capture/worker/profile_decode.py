"""Checks and times the worker's forward pass on a GPU, outside the protocol.

  python3 capture/worker/profile_decode.py [--shapes llama,qwen,nemo,qwen3moe] [--profile]

1. Correctness: small bf16 shapes (dense and MoE) run a chunked prefill and
   decodes through the runner (CUDA graphs, Triton attention, the fused
   kernels) and are compared with the model's dense reference; the fused
   kernels against their PyTorch versions; the grouped MoE against its
   per-expert loop.
2. Steady decode per shape at B=1 ctx 128 and B=256 ctx 1024: the decode
   graph's replay plus the logits, median of CUDA-event timings, with the
   fused kernels and with the PyTorch element-wise ops (the previous
   worker's path), beside the memory bound (weights, the expected expert
   weights for MoE, plus the KV read, at the measured copy bandwidth) and
   the compute bound (at the measured bf16 GEMM rate).
3. --profile: the PyTorch profiler's kernel table of a few replays at
   every point, and one JSON row per kernel (microseconds per step).
4. --attn-sweep (instead of 1-3): the paged attention kernel alone at B=256 ctx 1024 (and
   B=64 ctx 1024, and a mixed batch) under each launch configuration and
   split count, as achieved KV read bandwidth; the defaults of
   attention.TritonAttention are the best of this sweep.
Prints one JSON line per measurement (prefix 'row ') and a table last.
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kernels  # noqa: E402
from config import EngineConfig  # noqa: E402
from moe import active_expert_bytes  # noqa: E402
from runner import ModelRunner  # noqa: E402

SHAPES = {  # the Hugging Face config.json shapes of catalog/data/models
    "llama": dict(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=128256),
    "qwen": dict(layers=28, hidden=3584, heads=28, kv_heads=4, head_dim=128, intermediate=18944, vocab=152064,
                 qkv_bias=True),
    "nemo": dict(layers=40, hidden=5120, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=131072),
    "qwen3moe": dict(layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, intermediate=6144, vocab=151936,
                     experts=128, top_k=8, expert_intermediate=768),
}
POINTS = [(1, 128), (1, 1024), (256, 1024)]


def do_bench(fn, rep=200):
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=rep, return_mode="median")


def ceilings():
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.random_()
    copy_ms = do_bench(lambda: b.copy_(a))
    x = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    y = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    mm_ms = do_bench(lambda: x @ y)
    return 2 * n / copy_ms * 1e3, 2 * 8192 ** 3 / mm_ms * 1e3  # bytes/s, FLOP/s


def kernel_table(name, B, ctx, fn, reps=5):
    """The profiler's per-kernel device time of `reps` calls of fn, printed
    as a table and as one row per kernel in microseconds per call."""
    from torch.profiler import ProfilerActivity, profile as prof
    fn()
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    ka = p.key_averages()
    print(ka.table(sort_by="cuda_time_total", row_limit=20))
    total = 0.0
    for e in sorted(ka, key=lambda e: -e.device_time_total):
        if e.device_time_total <= 0:
            continue
        us = e.device_time_total / reps
        total += us
        print("row " + json.dumps({"shape": name, "B": B, "ctx": ctx, "kernel": e.key[:80], "us_per_step": us,
                                   "calls_per_step": e.count / reps}), flush=True)
    print("row " + json.dumps({"shape": name, "B": B, "ctx": ctx, "kernel": "(all)", "us_per_step": total}),
          flush=True)


def _sweep_grid():
    """(tile_n, warps, stages, splits, kvh_first, split_mixed) per case; the
    first is the previous worker's launch (the reference every other is
    checked against and timed beside)."""
    old = (32, 4, None, None, False, False)
    big = [old] + [(t, 4, st, 1, kf, True) for t in (64, 128) for st in (2, 3, 4) for kf in (True, False)]
    small = [old] + [(64, 4, 3, sp, kf, True) for sp in (None, 1, 2, 4) for kf in (True, False)]
    one = [old] + [(t, 4, 3, sp, kf, True) for t in (32, 64) for sp in (None, 1, 4, 16) for kf in (True, False)]
    mixed = [(64, 4, None, None, False, False)] + [(64, 4, 3, None, kf, sm) for kf in (True, False)
                                                  for sm in (True, False)]
    return {"decode_256x1024": big, "decode_64x1024": small, "decode_1x128": one, "decode_1x1024": one,
            "mixed_40x2000_200": mixed}


SWEEP = _sweep_grid()


def attn_sweep(name, shape, bw):
    """The paged attention kernel alone, per launch configuration: decode at
    B=256 and B=64 (ctx 1024) and B=1 (ctx 128 and 1024), and a mixed batch of 40 decodes at ctx 2000
    with a 200-token chunk after 2000 cached tokens."""
    from attention import LaunchConfig, TritonAttention, softmax_scale
    H, KVH, D = shape["heads"], shape["kv_heads"], shape["head_dim"]
    bs = 16
    dev = torch.device("cuda")
    cases = {"decode_256x1024": [(1023, 1)] * 256, "decode_64x1024": [(1023, 1)] * 64,
             "decode_1x128": [(127, 1)], "decode_1x1024": [(1023, 1)],
             "mixed_40x2000_200": [(1999, 1)] * 40 + [(2000, 200)]}
    for case, reqs in cases.items():
        nbs = [-(-(p + q) // bs) for p, q in reqs]
        nblocks = sum(nbs) + 1
        kc = torch.randn(nblocks, bs, KVH, D, device=dev).bfloat16()
        vc = torch.randn_like(kc)
        perm = torch.randperm(nblocks - 1, device=dev).int()
        bt = torch.zeros(len(reqs), max(nbs), dtype=torch.int32, device=dev)
        at = 0
        for i, n in enumerate(nbs):
            bt[i, :n] = perm[at:at + n]
            at += n
        qlens = [q for _, q in reqs]
        T = sum(qlens)
        qsl = torch.tensor([0] + list(torch.tensor(qlens).cumsum(0)), dtype=torch.int32, device=dev)
        sl = torch.tensor([p + q for p, q in reqs], dtype=torch.int32, device=dev)
        q = torch.randn(T, H, D, device=dev).bfloat16()
        kv_bytes = 2 * sum(p + q for p, q in reqs) * KVH * D * 2
        ref = None
        for tile_n, warps, stages, splits, kvh_first, split_mixed in SWEEP[case]:
            cfg = LaunchConfig(tile_n, warps, stages, kvh_first)
            ta = TritonAttention(H, KVH, D, bs, dev, 512, decode_cfg=cfg, prefill_cfg=cfg, split_mixed=split_mixed)
            if splits is not None and splits * T > ta.split_rows:
                continue
            out = torch.empty_like(q)
            key = {"shape": name, "case": case, "tile_n": tile_n, "warps": warps, "stages": stages,
                   "splits": splits, "kvh_first": kvh_first, "split_mixed": split_mixed}

            def call():
                ta(q, kc, vc, bt, sl, qsl, len(reqs), max(qlens), softmax_scale(D), out=out, splits=splits)
            try:
                call()
                torch.cuda.synchronize()
            except Exception as e:  # a configuration that does not compile (shared memory)
                print("row " + json.dumps(dict(key, error=repr(e)[:200])), flush=True)
                continue
            if ref is None:
                ref = out.clone()
            ms = do_bench(call, rep=40)
            print("row " + json.dumps(dict(key, us=ms * 1e3, GBps=kv_bytes / ms / 1e6,
                                           of_copy=kv_bytes / ms * 1e3 / bw, rel_err=rel(out, ref))), flush=True)
        del kc, vc
        torch.cuda.empty_cache()


def rel(a, b):
    return float((a.float() - b.float()).norm() / b.float().norm())


def check_kernels():
    g = torch.Generator(device="cuda").manual_seed(0)
    out = {}
    for T, N in [(1, 4096), (37, 5120), (300, 3584)]:
        x = torch.randn(T, N, device="cuda", generator=g).bfloat16()
        r = torch.randn(T, N, device="cuda", generator=g).bfloat16()
        w = torch.rand(N, device="cuda", generator=g).bfloat16() + 0.5
        ref_r = r + x
        xf = ref_r.float()
        ref = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).bfloat16() * w
        r2 = r.clone()
        y = kernels.add_rms_norm(x, r2, w, 1e-5)
        out["add_rms_%d_%d" % (T, N)] = max(rel(y, ref), rel(r2, ref_r))
        gu = torch.randn(T, 2 * N, device="cuda", generator=g).bfloat16()
        gg, u = gu.chunk(2, -1)
        out["silu_mul_%d_%d" % (T, N)] = rel(kernels.silu_mul(gu), torch.nn.functional.silu(gg) * u)
    return out


def small_model_checks():
    """Runs the runner on small bf16 shapes through graphs and eager
    steps; returns the relative error of each step's logits."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from testutil import new_req, step, tiny_init
    errs = {}
    shapes = {
        "dense_gqa7_bias": dict(layers=2, hidden=896, heads=14, kv_heads=2, head_dim=64, intermediate=1024,
                                vocab=1000, qkv_bias=True),
        "dense_hd128": dict(layers=3, hidden=512, heads=8, kv_heads=2, head_dim=128, intermediate=768, vocab=1000),
        "moe": dict(layers=2, hidden=512, heads=8, kv_heads=4, head_dim=64, intermediate=768, vocab=1000,
                    experts=16, top_k=4, expert_intermediate=128, routing_skew=0.3),
    }
    for name, shape in shapes.items():
        init = tiny_init(model=None, model_config=dict(shape, dtype="bfloat16"), device="cuda", num_gpu_blocks=256,
                         block_size=16, max_num_seqs=8, max_num_batched_tokens=256, max_model_len=512,
                         cuda_graph_sizes=[1, 2, 4, 8, 64])
        r = ModelRunner(EngineConfig(init))
        pa = [(i * 7) % 1000 for i in range(100)]
        pb = [(i * 13) % 1000 for i in range(30)]
        s = r.execute(step(0, new=[new_req("a", pa, list(range(0, 7))), new_req("b", pb, list(range(7, 9)))],
                           sched={"a": 60, "b": 30}))[0]
        errs[name + "_prefill_b"] = rel(r.last_logits[1], r.model.dense_forward(pb)[-1])
        tb = s["b"]
        s = r.execute(step(1, cached={"req_ids": ["a", "b"], "num_computed_tokens": [60, 30]},
                           sched={"a": 40, "b": 1}))[0]
        errs[name + "_mixed_a"] = rel(r.last_logits[0], r.model.dense_forward(pa)[-1])
        errs[name + "_mixed_b"] = rel(r.last_logits[1], r.model.dense_forward(pb + [tb])[-1])
        ta, tb2 = s["a"], s["b"]
        r.execute(step(2, cached={"req_ids": ["a", "b"], "num_computed_tokens": [100, 31]}, sched={"a": 1, "b": 1}))
        errs[name + "_decode_graph_a"] = rel(r.last_logits[0], r.model.dense_forward(pa + [ta])[-1])
        errs[name + "_decode_graph_b"] = rel(r.last_logits[1], r.model.dense_forward(pb + [tb, tb2])[-1])
        if shape.get("experts"):
            moe = r.model.layers[0].moe
            x = torch.randn(50, shape["hidden"], device="cuda").bfloat16()
            y = moe(x)
            moe.grouped = False
            errs[name + "_grouped_vs_loop"] = rel(y, moe(x))
            moe.grouped = True
        del r
        torch.cuda.empty_cache()
    return errs


# Mixed steps: (graph size, [(cached tokens, scheduled tokens)] per request).
MIXED = {
    "40x2000+200@2000": (256, [(1999, 1)] * 40 + [(2000, 200)]),
    "8x1000+100@0": (128, [(999, 1)] * 8 + [(0, 100)]),
    "512@0": (512, [(0, 512)]),
}


def setup_step(r, reqs, size):
    """Writes a step of reqs into the runner's buffers, padded to `size`
    tokens the way prepare_inputs pads it; returns (meta, num_reqs)."""
    from model import AttnMeta
    bs = r.ecfg.block_size
    n = len(reqs)
    at = 0
    t = 0
    for i, (c, q) in enumerate(reqs):
        nb = -(-(c + q) // bs)
        blocks = (torch.arange(at, at + nb, dtype=torch.int32) % r.num_blocks)
        r.batch.block_table_gpu[i, :nb].copy_(blocks)
        pos = torch.arange(c, c + q)
        r.positions_np[t:t + q] = pos.numpy()
        r.input_ids_np[t:t + q] = 1
        r.slots_np[t:t + q] = (blocks[pos // bs].long() * bs + pos % bs).numpy()
        r.qsl_np[i] = t
        r.seq_lens_np[i] = c + q
        at += nb
        t += q
    r.qsl_np[n] = t
    rows = r._mixed_rows(size, n, t)
    r.batch.block_table_gpu[n:rows].fill_(r.num_blocks)
    r._fill_mixed_padding(n, t, size, rows)
    r._copy_inputs(size, rows)
    meta = AttnMeta(rows, size, max(q for _, q in reqs), r.qsl[:rows + 1], r.seq_lens[:rows],
                    r.batch.block_table_gpu[:rows], r.slots[:size], r.qsl_np, r.seq_lens_np)
    return meta, n


def time_mixed(r, name):
    """Each MIXED step replayed through piecewise graphs, full graphs and
    eagerly (forward + logits of the last tokens)."""
    out = []
    modes = {}
    for mode in ("piecewise", "full"):
        r.graph_mode = mode
        r.mixed_graphs = {}
        r._capture_mixed_graphs(sorted({s for s, _ in MIXED.values()}))
        modes[mode] = r.mixed_graphs
    for case, (size, reqs) in MIXED.items():
        res = {"shape": name, "mixed": case, "size": size}
        for mode, graphs in list(modes.items()) + [("eager", None)]:
            r.graph_mode = "piecewise" if mode == "eager" else mode
            meta, n = setup_step(r, reqs, size)
            last = r.qsl[1:n + 1].long() - 1
            if graphs is None:
                def fwd():
                    return r.model.forward(r.input_ids[:size], r.positions[:size], meta, r.k_cache, r.v_cache)
            else:
                def fwd(g=graphs[size]):
                    return g.run(meta)
            res[mode + "_ms"] = do_bench(lambda: r.model.logits(fwd().index_select(0, last)), rep=100)
        print("row " + json.dumps(res), flush=True)
        out.append(res)
    r.graph_mode = "piecewise"
    r.mixed_graphs = modes["piecewise"]
    return out


def setup_decode(r, B, ctx):
    bs = r.ecfg.block_size
    nb = -(-ctx // bs)
    bt = (torch.arange(B * nb, dtype=torch.int32) % r.num_blocks).view(B, nb)
    r.batch.block_table_gpu[:B, :nb].copy_(bt)
    r.positions_np[:B] = ctx - 1
    r.input_ids_np[:B] = torch.randint(0, r.mcfg.vocab, (B,)).numpy()
    r.slots_np[:B] = (bt[:, (ctx - 1) // bs] * bs + (ctx - 1) % bs).numpy()
    r.qsl_np[:B + 1] = range(B + 1)
    r.seq_lens_np[:B] = ctx
    r._copy_inputs(B, B)


def bounds(cfg, B, ctx, weight_bytes, bw, flops):
    """The memory bound (every byte the step must read: the weights its
    GEMMs stream, for an MoE the experts its tokens reach, and the KV cache;
    an untied embedding table is looked up, B rows, not read) and the
    roofline (the GEMMs and decode attention each at the slower of their
    FLOPs and their bytes, summed: kernels of a step run one after
    another), in ms. fit/h200_fused_test.go computes the same from the
    catalogue's shape."""
    kv = 2 * cfg.layers * cfg.kv_heads * cfg.head_dim * cfg.elt * B * ctx
    w = weight_bytes
    active = cfg.weight_elems()
    if cfg.is_moe:
        experts = cfg.layers * cfg.experts * 3 * cfg.hidden * cfg.expert_intermediate * cfg.elt
        w = weight_bytes - experts + cfg.layers * active_expert_bytes(cfg, B)
        active = active - experts // cfg.elt + cfg.layers * cfg.top_k * 3 * cfg.hidden * cfg.expert_intermediate
    if not cfg.tie_word_embeddings:
        w -= cfg.vocab * cfg.hidden * cfg.elt
    active -= cfg.vocab * cfg.hidden  # the embedding is looked up, not multiplied
    gemm = max(w / bw, 2 * active * B / flops)
    attn = max(kv / bw, 4 * cfg.layers * cfg.heads * cfg.head_dim * B * ctx / flops)
    return (w + kv) / bw * 1e3, (gemm + attn) * 1e3  # ms


def time_shape(name, shape, bw, flops, profile):
    rows = []
    sizes = sorted({B for B, _ in POINTS} | {s for s, _ in MIXED.values()})
    nblocks = max(B * -(-ctx // 16) for B, ctx in POINTS) + 16
    init = dict(type="init", model=None, model_config=dict(shape, dtype="bfloat16"), device="cuda", seed=1,
                num_gpu_blocks=nblocks, block_size=16, max_num_seqs=256, max_num_batched_tokens=8192,
                max_model_len=16384, cuda_graph_sizes=sizes)
    r = ModelRunner(EngineConfig(init))
    r.k_cache.normal_()
    r.v_cache.normal_()
    stream = r._stream
    for B, ctx in POINTS:
        setup_decode(r, B, ctx)
        res = {"shape": name, "B": B, "ctx": ctx}
        for fused in (True, False):
            r.model.fused = fused
            g = r.graphs[B] if fused else r._capture(B, B, 1, stream)

            def decode_step():
                r.model.logits(g.run(None)[:B])
            res["fused_ms" if fused else "torch_ops_ms"] = do_bench(decode_step)
            if fused and profile:
                kernel_table(name, B, ctx, decode_step)
        r.model.fused = True
        mem, roof = bounds(r.mcfg, B, ctx, r.weight_bytes, bw, flops)
        res.update(mem_bound_ms=mem, roofline_ms=roof, vs_mem=res["fused_ms"] / mem, vs_roofline=res["fused_ms"] / roof)
        print("row " + json.dumps(res), flush=True)
        rows.append(res)
    rows += time_mixed(r, name)
    # An eager prefill of 2048 tokens (one request), fused and not.
    for fused in (True, False):
        r.model.fused = fused
        T = 2048
        r.positions_np[:T] = range(T)
        r.input_ids_np[:T] = 1
        r.slots_np[:T] = range(T)
        r.qsl_np[:2] = [0, T]
        r.seq_lens_np[:1] = T
        r.batch.block_table_gpu[0, :T // 16].copy_(torch.arange(T // 16, dtype=torch.int32))
        r._copy_inputs(T, 1)
        from model import AttnMeta
        meta = AttnMeta(1, T, T, r.qsl[:2], r.seq_lens[:1], r.batch.block_table_gpu[:1], r.slots[:T])
        ms = do_bench(lambda: r.model.forward(r.input_ids[:T], r.positions[:T], meta, r.k_cache, r.v_cache), rep=100)
        print("row " + json.dumps({"shape": name, "prefill": T, "fused": fused, "ms": ms}), flush=True)
    r.model.fused = True
    del r
    torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="llama,qwen,nemo,qwen3moe")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--skip-checks", action="store_true")
    ap.add_argument("--attn-sweep", action="store_true")
    ap.add_argument("--points", default="", help="B:ctx,B:ctx (default %s)" % POINTS)
    a = ap.parse_args()
    bw, flops = ceilings()
    print("row " + json.dumps({"copy_GBps": bw / 1e9, "bf16_TFLOPs": flops / 1e12}), flush=True)
    if not a.skip_checks:
        print("row " + json.dumps({"kernel_rel_err": check_kernels()}), flush=True)
        print("row " + json.dumps({"model_rel_err": small_model_checks()}), flush=True)
    if a.points:
        POINTS[:] = [tuple(int(v) for v in p.split(":")) for p in a.points.split(",")]
    if a.attn_sweep:
        for name in a.shapes.split(","):
            attn_sweep(name, SHAPES[name], bw)
        return
    rows = []
    for name in a.shapes.split(","):
        try:
            rows += time_shape(name, SHAPES[name], bw, flops, a.profile)
        except Exception as e:  # report and go on to the next shape
            import traceback
            traceback.print_exc()
            print("row " + json.dumps({"shape": name, "error": repr(e)}), flush=True)
    print("%-9s %4s %5s %9s %9s %8s %8s %6s %6s" % ("shape", "B", "ctx", "fused", "torchops", "mem", "roofline",
                                                   "x mem", "x roof"))
    for x in rows:
        if "mixed" in x:
            continue
        print("%-9s %4d %5d %9.3f %9.3f %8.3f %8.3f %6.2f %6.2f" % (
            x["shape"], x["B"], x["ctx"], x["fused_ms"], x["torch_ops_ms"], x["mem_bound_ms"], x["roofline_ms"],
            x["vs_mem"], x["vs_roofline"]))


if __name__ == "__main__":
    main()

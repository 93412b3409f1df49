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
3. --profile: the PyTorch profiler's kernel table of a few B=1 replays.
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
    kv = 2 * cfg.layers * cfg.kv_heads * cfg.head_dim * cfg.elt * B * ctx
    w = weight_bytes
    active = cfg.weight_elems()
    if cfg.is_moe:
        experts = cfg.layers * cfg.experts * 3 * cfg.hidden * cfg.expert_intermediate * cfg.elt
        w = weight_bytes - experts + cfg.layers * active_expert_bytes(cfg, B)
        active = active - experts // cfg.elt + cfg.layers * cfg.top_k * 3 * cfg.hidden * cfg.expert_intermediate
    active -= cfg.vocab * cfg.hidden  # the embedding is looked up, not multiplied
    f = 2 * active * B + 4 * cfg.layers * cfg.heads * cfg.head_dim * B * ctx
    return (w + kv) / bw * 1e3, f / flops * 1e3  # ms


def time_shape(name, shape, bw, flops, profile):
    rows = []
    sizes = sorted({B for B, _ in POINTS})
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
            g, hidden = r.graphs[B] if fused else r._capture(B, B, 1, stream)

            def decode_step():
                g.replay()
                r.model.logits(hidden[:B])
            res["fused_ms" if fused else "torch_ops_ms"] = do_bench(decode_step)
            if fused and profile and B == 1 and ctx == 128:
                from torch.profiler import ProfilerActivity, profile as prof
                with prof(activities=[ProfilerActivity.CUDA]) as p:
                    for _ in range(5):
                        g.replay()
                    torch.cuda.synchronize()
                print(p.key_averages().table(sort_by="cuda_time_total", row_limit=14))
        r.model.fused = True
        mem, comp = bounds(r.mcfg, B, ctx, r.weight_bytes, bw, flops)
        res.update(mem_bound_ms=mem, compute_bound_ms=comp, vs_roofline=res["fused_ms"] / max(mem, comp))
        print("row " + json.dumps(res), flush=True)
        rows.append(res)
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
    a = ap.parse_args()
    bw, flops = ceilings()
    print("row " + json.dumps({"copy_GBps": bw / 1e9, "bf16_TFLOPs": flops / 1e12}), flush=True)
    if not a.skip_checks:
        print("row " + json.dumps({"kernel_rel_err": check_kernels()}), flush=True)
        print("row " + json.dumps({"model_rel_err": small_model_checks()}), flush=True)
    rows = []
    for name in a.shapes.split(","):
        try:
            rows += time_shape(name, SHAPES[name], bw, flops, a.profile)
        except Exception as e:  # report and go on to the next shape
            import traceback
            traceback.print_exc()
            print("row " + json.dumps({"shape": name, "error": repr(e)}), flush=True)
    print("%-9s %4s %5s %9s %9s %8s %8s %6s" % ("shape", "B", "ctx", "fused", "torchops", "mem", "compute", "x"))
    for x in rows:
        print("%-9s %4d %5d %9.3f %9.3f %8.3f %8.3f %6.2f" % (x["shape"], x["B"], x["ctx"], x["fused_ms"],
                                                              x["torch_ops_ms"], x["mem_bound_ms"],
                                                              x["compute_bound_ms"], x["vs_roofline"]))


if __name__ == "__main__":
    main()

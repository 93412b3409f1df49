"""Measures the operations one forward pass of this worker runs, each alone,
over a grid of sizes: the GEMMs (F.linear), the worker's own paged attention
(prefill and decode, TritonAttention with the runner's launch configuration
and split rule), the element-wise steps of a layer as the model's methods
run them (model.py), and a mixture of experts' layer after its router
(moe.py). Every operation is timed launched both ways the worker launches a
step:

- graph: R back-to-back calls captured in one CUDA graph and replayed,
  per call = replay time / R: the device time plus the gap between kernels
  of a graph replay (how decode and small mixed steps run);
- eager: R back-to-back calls from Python, per call = the time between CUDA
  events around them / R, the longer of the host's dispatch and the device
  time (how steps larger than the largest CUDA graph run); host_ms is the
  host's time to issue one call, which a pass of many operations overlaps
  with the device's work on earlier ones.

The element-wise steps are those the worker's pass runs on the device: with
the Triton backend (CUDA) kernels.py's fused kernels, add_rmsnorm (the
residual add and the norm after it), rope_kv_write (the q/k/v split, RoPE
and the KV-cache write) and silu_mul, beside the norm without an add
(rmsnorm: the first layer's and the final one), the last layer's
residual_add and the embedding; with the torch backend (the CPU) the
unfused PyTorch steps, rmsnorm, residual_add, rope, kv_write, silu_mul and
the embedding. A mixture of experts' layer is timed at the shape's experts
under balanced routing (every expert T*top_k/experts rows) and under the
worker's random router tilted by each --routing-skew (distribution
routing_skew_S; 0 is the untilted router of every capture so far).

It writes one JSON object per line (flushed as it goes, so an interrupted
run keeps what it measured); `steplab capture ops` runs it and turns the rows
into an operations database (docs/ops-prior.md). On a CPU it times eager
calls only, with the per-request torch attention, which is what the tests
run.

usage: opbench.py --shape hidden=4096,heads=32,kv_heads=8,head_dim=128,intermediate=14336,vocab=128256
                  [--shape ...,experts=128,top_k=8,expert_intermediate=768[,tp=1]]
                  [--routing-skew S ...] [--device cuda] [--grid full|shapes|quick] --out rows.jsonl

The full grid measures GEMMs and element-wise widths on a generic grid
besides the shapes' own, so that a shape not named is interpolated; the
shapes grid only the shapes' own (to add a shape to a database).
"""

import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

import attention
from config import WORKER_GENERATION, ModelConfig
from model import LlamaModel

BLOCK = 16  # KV-cache block size, as the worker's default
TARGET_S = 2e-3  # time each measurement spans, to keep launch noise small

GRIDS = {
    "full": dict(
        m=[1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192],
        gemm_n=[1024, 2048, 4096, 8192, 16384, 32768], gemm_k=[1024, 2048, 4096, 8192, 16384],
        gemm_max_flops=4e12,
        widths=[2048, 4096, 8192, 16384, 32768],
        ctx_batch=[1, 2, 4, 8], ctx_isl=[16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192], ctx_max_tokens=16384,
        gen_batch=[1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256],
        gen_kv=[64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384], gen_max_tokens=1 << 20),
    "quick": dict(
        m=[1, 8], gemm_n=[64], gemm_k=[64], gemm_max_flops=1e12, widths=[64],
        ctx_batch=[1, 2], ctx_isl=[16, 32], ctx_max_tokens=64,
        gen_batch=[1, 4], gen_kv=[16, 64], gen_max_tokens=256),
}

# Only what the --shape flags name, for adding shapes to a database.
GRIDS["shapes"] = dict(GRIDS["full"], gemm_n=[], gemm_k=[], widths=[])

SHAPE_KEYS = ("hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab")
# Optional: a mixture of experts (per GPU: expert_intermediate is one
# expert's width on a GPU of the tp-way group).
MOE_KEYS = ("experts", "top_k", "expert_intermediate", "tp")


def parse_shape(s):
    d = {}
    for part in s.split(","):
        k, _, v = part.partition("=")
        if k not in SHAPE_KEYS + MOE_KEYS or not v.isdigit() or int(v) < 1:
            raise SystemExit("opbench: --shape %r: want %s (and for experts %s), each a positive integer"
                             % (s, "=,".join(SHAPE_KEYS) + "=", "=,".join(MOE_KEYS) + "="))
        d[k] = int(v)
    missing = [k for k in SHAPE_KEYS if k not in d]
    if missing:
        raise SystemExit("opbench: --shape %r lacks %s" % (s, ", ".join(missing)))
    if d["heads"] % d["kv_heads"]:
        raise SystemExit("opbench: --shape %r: heads must be a multiple of kv_heads" % s)
    d.setdefault("tp", 1)
    d.setdefault("experts", 0)
    if d["experts"] and not (1 <= d.get("top_k", 0) <= d["experts"] and d.get("expert_intermediate")):
        raise SystemExit("opbench: --shape %r: experts needs top_k (1..experts) and expert_intermediate" % s)
    if not d["experts"] and ("top_k" in d or "expert_intermediate" in d):
        raise SystemExit("opbench: --shape %r: top_k and expert_intermediate need experts" % s)
    return d


def routing_name(skew):
    """The moe table's distribution of the worker's router tilted by skew."""
    return "routing_skew_%g" % skew


def balanced_logits(tokens, experts, top_k, device, dtype):
    """Router logits that send token t to experts (t*top_k + j) mod experts,
    j < top_k: every expert gets tokens*top_k/experts rows, give or take one."""
    ids = (torch.arange(tokens, device=device).unsqueeze(1) * top_k + torch.arange(top_k, device=device)) % experts
    return torch.zeros(tokens, experts, device=device, dtype=dtype).scatter_(1, ids, 1.0)


class Timer:
    """Per-call latency of fn in ms, launched as a CUDA graph or eagerly."""

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.pool = torch.cuda.graph_pool_handle() if self.cuda else None
        self.stream = torch.cuda.Stream(device) if self.cuda else None

    def _eager(self, fn, reps):
        """Per call: (ms from the first launch to the last kernel's end, ms
        the host spent issuing the calls)."""
        if not self.cuda:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            ms = (time.perf_counter() - t0) * 1e3 / reps
            return ms, ms
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(self.device)
        e0.record()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        host = (time.perf_counter() - t0) * 1e3 / reps
        e1.record()
        e1.synchronize()
        return e0.elapsed_time(e1) / reps, host

    def _reps(self, fn):
        fn()
        one = max(self._eager(fn, 3)[0], 1e-4)
        return max(2, min(64, int(math.ceil(TARGET_S * 1e3 / one))))

    def eager(self, fn):
        """The median of three runs: (latency, host dispatch) per call."""
        reps = max(10, self._reps(fn))
        return sorted(self._eager(fn, reps) for _ in range(3))[1]

    def graph(self, fn):
        reps = self._reps(fn)
        # Capture needs warm kernels (Triton compiles, cuBLAS picks) on the side stream.
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            fn()
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool, stream=self.stream):
            for _ in range(reps):
                fn()
        g.replay()
        times = []
        for _ in range(3):
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            g.replay()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) / reps)
        del g
        return sorted(times)[1]


class Bench:
    def __init__(self, device, grid, out):
        self.device = device
        self.grid = grid
        self.out = out
        self.timer = Timer(device)
        self.launches = ("graph", "eager") if self.timer.cuda else ("eager",)
        self.dtype = torch.bfloat16
        # The backend the runner's `auto` picks here: it decides the
        # attention kernel and whether the element-wise steps are fused.
        self.backend = attention.auto_backend(device)
        self.rows = 0

    def emit(self, row):
        self.out.write(json.dumps(row, sort_keys=True) + "\n")
        self.out.flush()
        self.rows += 1

    def measure(self, table, fn, **coords):
        for launch in self.launches:
            row = dict(table=table, launch=launch, dtype="bfloat16", **coords)
            if launch == "graph":
                row["latency_ms"] = self.timer.graph(fn)
            else:
                row["latency_ms"], row["host_ms"] = self.timer.eager(fn)
            self.emit(row)

    def randn(self, *shape):
        return torch.randn(*shape, device=self.device, dtype=self.dtype)

    def gemms(self, pairs):
        for n, k in sorted(pairs):
            w = self.randn(n, k) * 0.02
            for m in self.grid["m"]:
                if 2.0 * m * n * k > self.grid["gemm_max_flops"]:
                    continue
                a = self.randn(m, k)
                self.measure("gemm", lambda: F.linear(a, w), m=m, n=n, k=k)
            del w
            self.empty_cache()

    def elementwise(self, op, widths, make):
        """make(m, n) returns the call to time over m rows of width n."""
        for n in sorted(set(widths)):
            for m in self.grid["m"]:
                self.measure("elementwise", make(m, n), op=op, m=m, n=n)
            self.empty_cache()

    def model_ops(self, model):
        """The layer steps that need the model's head layout: fused, RoPE
        with the KV-cache write at n = the q/k/v projection's width; unfused,
        RoPE at the q and k widths rotated and the KV write at the k width."""
        H, KVH, D = model.cfg.heads, model.cfg.kv_heads, model.cfg.head_dim
        mmax = self.grid["m"][-1]
        nb = mmax // BLOCK + 2
        kc = torch.zeros(nb, BLOCK, KVH, D, device=self.device, dtype=self.dtype)
        vc = torch.zeros_like(kc)

        def slots(m):
            return torch.randperm(nb * BLOCK, device=self.device)[:m]

        def rope_kv_write(m, _n):
            qkv, pos, sl = self.randn(m, (H + 2 * KVH) * D), torch.arange(m, device=self.device), slots(m)
            return lambda: model._attn_inputs(qkv, pos, kc, vc, sl)

        def rope(m, _n):
            qkv = self.randn(m, (H + 2 * KVH) * D)
            pos = torch.arange(m, device=self.device)
            cos = model.cos.index_select(0, pos).unsqueeze(1)
            sin = model.sin.index_select(0, pos).unsqueeze(1)
            return lambda: model._qkv_rope(qkv, cos, sin)

        def kv_write(m, _n):
            k, v, sl = self.randn(m, KVH, D), self.randn(m, KVH, D), slots(m)
            return lambda: LlamaModel._kv_write(k, v, kc, vc, sl)

        if model.fused:
            self.elementwise("rope_kv_write", [(H + 2 * KVH) * D], rope_kv_write)
        else:
            self.elementwise("rope", [(H + KVH) * D], rope)
            self.elementwise("kv_write", [KVH * D], kv_write)

    def attention(self, H, KVH, D, generation):
        g = self.grid
        if generation:
            cells = [(b, s) for b in g["gen_batch"] for s in g["gen_kv"] if b * s <= g["gen_max_tokens"]]
        else:
            cells = [(b, s) for b in g["ctx_batch"] for s in g["ctx_isl"] if b * s <= g["ctx_max_tokens"]]
        max_tokens = max(b * s for b, s in cells)
        max_batch = max(b for b, _ in cells)
        nb = max_tokens // BLOCK + max_batch + 1
        kc = self.randn(nb, BLOCK, KVH, D)
        vc = self.randn(nb, BLOCK, KVH, D)
        tri = None
        if self.backend == "triton":
            # As the runner builds it (its default launch configurations and
            # split rule); max_batch only sizes the split scratch buffers.
            tri = attention.TritonAttention(H, KVH, D, BLOCK, self.device, max_batch)
        scale = attention.softmax_scale(D)
        for b, s in cells:
            per = -(-s // BLOCK)
            table = torch.arange(b * per, dtype=torch.int32, device=self.device).view(b, per)
            seq_lens = torch.full((b,), s, dtype=torch.int32, device=self.device)
            q_len = 1 if generation else s
            qsl = torch.arange(0, (b + 1) * q_len, q_len, dtype=torch.int32, device=self.device)
            q = self.randn(b * q_len, H, D)
            if tri is not None:
                fn = lambda: tri(q, kc, vc, table, seq_lens, qsl, b, q_len, scale)  # noqa: E731
            else:
                qsl_cpu, sl_cpu = qsl.tolist(), seq_lens.tolist()
                fn = lambda: attention.paged_attention_torch(q, kc, vc, table, qsl_cpu, sl_cpu, b, scale)  # noqa: E731
            name = "generation_attention" if generation else "context_attention"
            self.measure(name, fn, batch_size=b, isl=s, num_heads=H, num_key_value_heads=KVH, head_dim=D,
                         kv_cache_dtype="bfloat16")
        del kc, vc
        self.empty_cache()

    def moe(self, s, skews):
        """A mixture of experts' layer after its router (MoEMLP.routed) over
        T tokens of the grid: balanced, and under the worker's router tilted
        by each skew (the logits of a unit-RMS input, as a normed hidden
        state is: the spread router_logit_std)."""
        h, E, k, I = s["hidden"], s["experts"], s["top_k"], s["expert_intermediate"]
        coords = dict(hidden=h, inter=I * s["tp"], top_k=k, experts=E, tp=s["tp"], ep=1)
        for skew in sorted({0.0} | set(skews)):
            layer = self.model(s["heads"], s["kv_heads"], s["head_dim"], hidden=h, experts=E, top_k=k,
                               expert_intermediate=I, routing_skew=skew).layers[0].moe
            dists = ([("balanced", None)] if skew == 0 else []) + ([(routing_name(skew), skew)] if skew in skews else [])
            for name, tilt in dists:
                for T in self.grid["m"]:
                    x = self.randn(T, h)
                    if tilt is None:
                        logits = balanced_logits(T, E, k, self.device, self.dtype)
                    else:
                        logits = F.linear(x, layer.router)
                    self.measure("moe", lambda: layer.routed(x, logits), tokens=T, distribution=name, **coords)
                self.empty_cache()
            del layer
            self.empty_cache()

    def empty_cache(self):
        if self.timer.cuda:
            torch.cuda.empty_cache()

    def run(self, shapes, skews):
        g = self.grid
        pairs = {(n, k) for n in g["gemm_n"] for k in g["gemm_k"]}
        hidden, inter = set(g["widths"]), set(g["widths"])
        for s in shapes:
            h, H, KVH, D = s["hidden"], s["heads"], s["kv_heads"], s["head_dim"]
            pairs |= {((H + 2 * KVH) * D, h), (h, H * D), (s["vocab"], h)}
            hidden.add(h)
            if s["experts"]:  # the router, and the expert GEMMs a prior without the moe row composes
                E, I = s["experts"], s["expert_intermediate"]
                pairs |= {(E, h), (2 * I, h), (h, I)}
            else:
                I = s["intermediate"]
                pairs |= {(2 * I, h), (h, I)}
                inter.add(I)
        self.gemms(pairs)

        w = {n: torch.ones(n, device=self.device, dtype=self.dtype) for n in hidden}
        heads = sorted({(s["heads"], s["kv_heads"], s["head_dim"]) for s in shapes})
        # Small models of each head layout: their methods are the worker's
        # element-wise steps (random weights of width 8; the steps are timed
        # on inputs of the measured widths).
        models = {hd: self.model(*hd) for hd in heads}
        any_model = models[heads[0]]

        def norm(add):
            def make(m, n):
                x, r = self.randn(m, n), self.randn(m, n)
                return lambda: any_model._add_rms(x if add else None, r, w[n])
            return make

        def residual_add(m, n):
            x, y = self.randn(m, n), self.randn(m, n)
            return lambda: x + y

        def silu_mul(m, n):
            gu = self.randn(m, 2 * n)
            return lambda: any_model._act(gu)

        def embedding(m, n):
            table = self.randn(4096, n)
            ids = torch.randint(0, 4096, (m,), device=self.device)
            return lambda: F.embedding(ids, table)

        if any_model.fused:
            self.elementwise("add_rmsnorm", hidden, norm(True))
        self.elementwise("rmsnorm", hidden, norm(False))
        self.elementwise("residual_add", hidden, residual_add)
        self.elementwise("embedding", hidden, embedding)
        self.elementwise("silu_mul", inter, silu_mul)

        for (H, KVH, D), model in models.items():
            self.model_ops(model)
            self.attention(H, KVH, D, generation=False)
            self.attention(H, KVH, D, generation=True)
        for s in shapes:
            if s["experts"]:
                self.moe(s, skews)

    def model(self, H, KVH, D, hidden=8, **moe):
        """A one-layer model of the head layout (and experts), fused as the
        runner builds it for this backend."""
        cfg = ModelConfig(None, dict(layers=1, hidden=hidden, heads=H, kv_heads=KVH, head_dim=D, intermediate=8,
                                     vocab=8, **moe))
        return LlamaModel(cfg, self.grid["m"][-1] + 1, self.device, 0, fused=self.backend == "triton")


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", action="append", required=True, type=parse_shape,
                    help="a model shape whose operations to measure (repeatable)")
    ap.add_argument("--routing-skew", action="append", type=float, default=None,
                    help="a tilt of the worker's router to time the MoE layer under (repeatable; default 0 and 1)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--grid", default="full", choices=sorted(GRIDS))
    ap.add_argument("--out", required=True, help="JSON-lines file to write ('-' for stdout)")
    a = ap.parse_args(argv)
    skews = a.routing_skew if a.routing_skew is not None else [0.0, 1.0]
    if any(not (sk >= 0) or math.isinf(sk) for sk in skews):
        raise SystemExit("opbench: --routing-skew must be a finite number >= 0")
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("opbench: --device %s but CUDA is not available" % a.device)
    out = sys.stdout if a.out == "-" else open(a.out, "w")
    try:
        meta = dict(table="meta", torch=torch.__version__, triton=attention.TRITON_VERSION, device=str(device),
                    launches=["graph", "eager"] if device.type == "cuda" else ["eager"],
                    worker_generation=WORKER_GENERATION, attention_backend=attention.auto_backend(device))
        if device.type == "cuda":
            p = torch.cuda.get_device_properties(device)
            meta.update(gpu=p.name, sm_count=p.multi_processor_count, gpu_uuid=str(getattr(p, "uuid", "")))
        meta["cpu"] = _cpu_model()  # eager rows time this host's dispatch
        b = Bench(device, GRIDS[a.grid], out)
        b.emit(meta)
        t0 = time.monotonic()
        b.run(a.shape, skews)
        print("opbench: %d rows in %.0f s" % (b.rows, time.monotonic() - t0), file=sys.stderr)
    finally:
        if out is not sys.stdout:
            out.close()


if __name__ == "__main__":
    main()

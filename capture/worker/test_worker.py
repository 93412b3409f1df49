"""Tests of the steplab GPU worker on CPU with the tiny shape.

Run: /usr/bin/python3 -m pytest capture/worker/test_worker.py
"""

import os
import struct
import subprocess
import sys
import time

import msgpack
import numpy as np
import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import attention  # noqa: E402
from config import ConfigError, EngineConfig  # noqa: E402
from framing import Client, encode_frame  # noqa: E402
from runner import ModelRunner, StepError  # noqa: E402

WORKER = os.path.join(HERE, "worker.py")


# ---------------------------------------------------------------- helpers
from testutil import CASES, _paged_case, new_req, step, tiny_init  # noqa: E402,F401


def spawn():
    return Client([sys.executable, WORKER], stderr=subprocess.PIPE)


def make_runner(dtype="float32", **kw):
    m = tiny_init(model_config={"dtype": dtype})
    pad = kw.pop("pad_eager_sizes", None)
    m.update(kw)
    return ModelRunner(EngineConfig(m), pad_eager_sizes=pad)


def run_step(r, msg):
    sampled, timing = r.execute(msg)
    return sampled


# ------------------------------------------------------- protocol round trip
def test_protocol_round_trip():
    c = spawn()
    ready = c.call(tiny_init())
    assert ready["type"] == "ready", ready
    assert ready["protocol_version"] == 1
    assert ready["gpu_name"] == "cpu" and ready["device"] == "cpu"
    assert ready["torch_version"] == torch.__version__
    assert ready["num_gpu_blocks"] == 128
    mc = ready["model_config"]
    assert (mc["layers"], mc["hidden"], mc["heads"], mc["kv_heads"], mc["head_dim"], mc["vocab"]) == \
        (2, 64, 4, 2, 16, 512)
    # K and V: 2 x layers x (blocks + scratch) x block_size x kv_heads x head_dim x 2 bytes (bf16)
    assert ready["kv_bytes"] == 2 * 2 * 129 * 4 * 2 * 16 * 2
    assert ready["weight_bytes"] > 0 and ready["build_ns"] > 0
    assert ready["attention_backend"] == "torch"
    assert ready["decode_attention"] is None, "the torch backend has no split-KV launch rule"

    out = c.call(step(0, new=[new_req("a", range(1, 11), [0, 1, 2]), new_req("b", [5, 6, 7], [3])],
                      sched={"a": 6, "b": 3}))
    assert out["type"] == "output" and out["step_id"] == 0
    assert out["sampled_token_ids"]["a"] == -1  # prefill chunk in progress
    b_tok = out["sampled_token_ids"]["b"]
    assert 0 <= b_tok < 512
    tm = out["timings"]
    for k in ("recv_ns", "prep_ns", "device_ns", "sample_ns", "total_ns"):
        assert isinstance(tm[k], int) and tm[k] >= 0, k
    assert tm["total_ns"] >= tm["prep_ns"] + tm["recv_ns"]
    assert tm["graph"] == 0 and tm["num_reqs"] == 2 and tm["num_tokens"] == 9
    assert abs(out["t_worker_done_ns"] - time.monotonic_ns()) < 60e9

    out = c.call(step(1, cached={"req_ids": ["a", "b"], "new_block_ids": [None, None],
                                 "num_computed_tokens": [6, 3], "num_output_tokens": [0, 1]},
                      sched={"a": 4, "b": 1}))
    a_tok = out["sampled_token_ids"]["a"]
    assert a_tok >= 0 and out["sampled_token_ids"]["b"] >= 0
    out = c.call(step(2, cached={"req_ids": ["a"], "new_block_ids": [[4]], "num_computed_tokens": [10],
                                 "num_output_tokens": [1]}, sched={"a": 1}, finished=["b"]))
    assert set(out["sampled_token_ids"]) == {"a"}
    assert c.call({"type": "shutdown"}) == {"type": "bye"}
    assert c.close() == 0


def test_pipelined_frames_and_clean_eof():
    """The driver may write step N+1 before reading output N."""
    c = spawn()
    c.send(tiny_init())
    c.send(step(0, new=[new_req("a", [1, 2, 3], [0])], sched={"a": 3}))
    c.send(step(1, cached={"req_ids": ["a"], "num_computed_tokens": [3]}, sched={"a": 1}))
    assert c.recv()["type"] == "ready"
    assert c.recv()["step_id"] == 0
    assert c.recv()["step_id"] == 1
    assert c.close() == 0  # EOF between frames: exit 0


# ------------------------------------------------------------- error frames
def _expect_error(frames, want_rc, want_text, raw=False):
    c = spawn()
    reply = None
    for f in frames:
        if raw:
            c.send_raw(f)
        else:
            c.send(f)
    c.proc.stdin.close()
    msgs = []
    while True:
        try:
            msgs.append(c.recv())
        except Exception:
            break
    rc = c.proc.wait(timeout=60)
    err = c.proc.stderr.read().decode()
    reply = msgs[-1] if msgs else None
    assert reply is not None and reply["type"] == "error", (msgs, err)
    assert want_text in reply["message"], reply["message"]
    assert rc == want_rc, (rc, err)
    assert "steplab-worker: error:" in err
    return reply


def test_garbage_frames():
    _expect_error([struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1"], 2, "not valid msgpack", raw=True)
    _expect_error([struct.pack(">I", 0)], 2, "length is 0", raw=True)
    _expect_error([struct.pack(">I", 0xFFFFFFFF) + b"xx"], 2, "exceeds the limit", raw=True)
    _expect_error([b"\x00\x00"], 2, "short frame header", raw=True)
    _expect_error([struct.pack(">I", 100) + b"\x80"], 2, "short frame body", raw=True)
    body = msgpack.packb([1, 2, 3])
    _expect_error([struct.pack(">I", len(body)) + body], 2, "want a map", raw=True)
    _expect_error([encode_frame({"type": "launch"})], 1, "unknown message type", raw=True)


def test_protocol_errors():
    _expect_error([step(0, new=[new_req("a", [1], [0])], sched={"a": 1})], 1, "step before init")
    _expect_error([tiny_init(), tiny_init()], 1, "second init")
    _expect_error([tiny_init(), step(0, cached={"req_ids": ["ghost"], "num_computed_tokens": [0]},
                                     sched={"ghost": 1})], 1, "unknown to the worker")
    _expect_error([tiny_init(), step(0, new=[new_req("a", [1, 2], [999])], sched={"a": 2})], 1,
                  "block id out of range")
    _expect_error([tiny_init(), step(0, new=[new_req("a", [1, 2, 3], [0])], sched={"a": 2, "zz": 1})], 1,
                  "neither new nor cached")
    bad_total = step(0, new=[new_req("a", [1, 2], [0])], sched={"a": 2})
    bad_total["total_num_scheduled_tokens"] = 5
    _expect_error([tiny_init(), bad_total], 1, "total_num_scheduled_tokens")
    _expect_error([tiny_init(), step(0, new=[new_req("a", [1, 2, 3, 4, 5], [0])], sched={"a": 5})], 1,
                  "block table covers 4")
    _expect_error([tiny_init(), step(0, new=[new_req("a", [1, 9999], [0])], sched={"a": 2})], 1,
                  "prompt token ids")
    _expect_error([tiny_init(), step(0, new=[new_req("a", ["x", "y"], [0])], sched={"a": 2})], 1,
                  "flat list of integers")
    _expect_error([tiny_init(model="gpt-17")], 1, "unknown model preset")
    _expect_error([tiny_init(device="tpu")], 1, "init.device")
    r = _expect_error([tiny_init(), dict(step(3, new=[new_req("a", [1], [0])], sched={"a": 1}),
                                          step_id="three")], 1, "step_id")
    assert r["step_id"] is None


def test_too_big_config_is_refused_before_allocating():
    c = spawn()
    t0 = time.monotonic()
    reply = c.call(dict(type="init", model="llama-8b", device="cpu", num_gpu_blocks=10_000_000))
    assert reply["type"] == "error"
    msg = reply["message"]
    assert "does not fit" in msg and "num_gpu_blocks" in msg, msg
    assert time.monotonic() - t0 < 30  # nothing was allocated or initialised
    assert c.close() == 1


def test_cuda_without_gpu_is_refused():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    c = spawn()
    reply = c.call(tiny_init(device="cuda"))
    assert reply["type"] == "error" and "cuda" in reply["message"]
    assert c.close() == 1


# --------------------------------------------------------------- attention
@pytest.mark.parametrize("cases", CASES)
def test_paged_attention_torch_matches_dense(cases):
    inp, qs, ks, vs = _paged_case(cases)
    scale = attention.softmax_scale(16)
    out = attention.paged_attention_torch(inp["q"], inp["kc"], inp["vc"], inp["bt"], inp["qsl"], inp["seq_lens"],
                                          len(cases), scale)
    ref = torch.cat(attention.dense_reference(qs, ks, vs, scale))
    assert torch.allclose(out, ref, atol=1e-5, rtol=1e-5), (out - ref).abs().max()


@pytest.mark.parametrize("num_seqs,kv_heads,programs,want", [
    (1, 8, 264, 16),    # wants 33: the cap
    (2, 8, 264, 16),    # 17 -> 32, capped
    (4, 8, 264, 16),    # 9 -> 16
    (8, 8, 264, 8),     # 5 -> 8
    (16, 8, 264, 4),    # 3 -> 4
    (32, 8, 264, 2),    # 2 (264 / 256, rounded up)
    (33, 8, 264, 1),    # the batch fills the target alone
    (1, 4, 264, 16), (16, 4, 264, 8), (64, 4, 264, 2), (66, 4, 264, 1),
    (1, 1, 1, 1), (3, 2, 16, 4),  # 16 / 6 -> 3 -> 4
])
def test_split_count(num_seqs, kv_heads, programs, want):
    """The decode split rule the worker reports (decode_split_programs,
    decode_split_max, decode_split_rounding): ceil(programs / (B x KVH)),
    rounded up to a power of two, capped at 16."""
    assert attention.split_count(num_seqs, kv_heads, programs) == want


@pytest.mark.skipif(not (torch.cuda.is_available() and attention.HAVE_TRITON), reason="needs CUDA and Triton")
def test_triton_reports_its_decode_rule():
    ta = attention.TritonAttention(32, 8, 128, 16, torch.device("cuda"), 64)
    rule = ta.decode_rule()
    assert rule == {"kv_tile_tokens": ta.decode_cfg.tile_n, "split_programs": 2 * ta.num_sms, "split_max": 16,
                    "split_rounding": "pow2"}
    for b in (1, 4, 16, 33, 64):
        assert ta.num_splits(b) == attention.split_count(b, 8, rule["split_programs"], rule["split_max"])


@pytest.mark.skipif(not (torch.cuda.is_available() and attention.HAVE_TRITON), reason="needs CUDA and Triton")
@pytest.mark.parametrize("cases", CASES)
@pytest.mark.parametrize("heads,kvh,d", [(32, 8, 128), (28, 4, 128)])  # groups of 4 and of 7
def test_paged_attention_triton_matches_dense(cases, heads, kvh, d):
    inp, qs, ks, vs = _paged_case(cases, dtype=torch.bfloat16, device="cuda", block_size=16, kvh=kvh, heads=heads, d=d)
    scale = attention.softmax_scale(d)
    ta = attention.TritonAttention(heads, kvh, d, 16, torch.device("cuda"), 64)
    out = ta(inp["q"], inp["kc"], inp["vc"], inp["bt"],
             torch.tensor(inp["seq_lens"], dtype=torch.int32, device="cuda"),
             torch.tensor(inp["qsl"], dtype=torch.int32, device="cuda"), len(cases),
             max(b - a for a, b in zip(inp["qsl"], inp["qsl"][1:])), scale)
    ref = torch.cat(attention.dense_reference([x.cuda() for x in qs], [x.cuda() for x in ks],
                                              [x.cuda() for x in vs], scale))
    assert (out.float() - ref.float()).abs().max() < 2e-2


@pytest.mark.skipif(not (torch.cuda.is_available() and attention.HAVE_TRITON), reason="needs CUDA and Triton")
@pytest.mark.parametrize("name", ["qkv_bias_group_of_3", "moe_top2_of_4_skewed"])
def test_fused_kernels_match_torch_ops(name):
    """The Triton element-wise kernels (and, for MoE, the grouped GEMM)
    compute what the PyTorch path computes: one forward pass of each."""
    shape = dict(SHAPE_VARIANTS[name], dtype="bfloat16")
    r = ModelRunner(EngineConfig(tiny_init(model=None, model_config=shape, device="cuda", attention_backend="triton")))
    m = r.model
    T = 9
    ids = torch.randint(0, shape["vocab"], (T,), device="cuda")
    pos = torch.arange(T, device="cuda")
    from model import AttnMeta
    qsl = torch.tensor([0, T], dtype=torch.int32, device="cuda")
    sl = torch.tensor([T], dtype=torch.int32, device="cuda")
    bt = torch.arange(r.ecfg.max_blocks_per_req, dtype=torch.int32, device="cuda").view(1, -1)
    meta = AttnMeta(1, T, T, qsl, sl, bt, pos.clone())
    outs = []
    for fused in (True, False):
        m.fused = fused
        if m.layers[0].moe is not None:
            for L in m.layers:
                L.moe.grouped = fused
        outs.append(m.logits(m.forward(ids, pos, meta, r.k_cache, r.v_cache)))
    rel = ((outs[0] - outs[1]).norm() / outs[1].norm()).item()
    assert rel < 2e-2, rel


# ----------------------------------------------- model-level correctness
def test_chunked_prefill_and_decode_match_dense_model():
    r = make_runner()
    pa = list(range(3, 20))  # 17 tokens
    pb = [7, 1, 4, 1, 5, 9, 2]
    # step 0: a's first chunk (6), b whole prompt (7)
    s = run_step(r, step(0, new=[new_req("a", pa, [10, 2]), new_req("b", pb, [5, 6])], sched={"a": 6, "b": 7}))
    assert s["a"] == -1
    ref_b = r.model.dense_forward(pb)
    assert torch.allclose(r.last_logits[1], ref_b[-1], atol=1e-4)
    tb = s["b"]
    # step 1: a's second chunk (8 more, needs a third block), b decodes
    s = run_step(r, step(1, cached={"req_ids": ["a", "b"], "new_block_ids": [[0, 31], None],
                                    "num_computed_tokens": [6, 7]}, sched={"a": 8, "b": 1}))
    assert s["a"] == -1
    assert torch.allclose(r.last_logits[1], r.model.dense_forward(pb + [tb])[-1], atol=1e-4)
    tb2 = s["b"]
    # step 2: a's last 3 tokens, b decodes again
    s = run_step(r, step(2, cached={"req_ids": ["a", "b"], "new_block_ids": [[8], [9]],
                                    "num_computed_tokens": [14, 8]}, sched={"a": 3, "b": 1}))
    ref_a = r.model.dense_forward(pa)
    assert torch.allclose(r.last_logits[0], ref_a[-1], atol=1e-4)
    assert s["a"] == int(ref_a[-1].argmax())
    assert torch.allclose(r.last_logits[1], r.model.dense_forward(pb + [tb, tb2])[-1], atol=1e-4)
    ta = s["a"]
    # step 3: a decodes using its sampled token
    s = run_step(r, step(3, cached={"req_ids": ["a"], "num_computed_tokens": [17]}, sched={"a": 1},
                         finished=["b"]))
    assert torch.allclose(r.last_logits[0], r.model.dense_forward(pa + [ta])[-1], atol=1e-4)


# Tiny variants of each structural feature of the dense Llama family: a
# head_dim that is not hidden / heads (Mistral-Nemo), a group size that is
# not a power of two with q/k/v biases (Qwen2.5), untied embeddings.
SHAPE_VARIANTS = {
    "head_dim_not_hidden_over_heads": dict(layers=2, hidden=48, heads=4, kv_heads=2, head_dim=16, intermediate=96,
                                           vocab=300, tie_word_embeddings=False),
    "qkv_bias_group_of_3": dict(layers=2, hidden=96, heads=6, kv_heads=2, head_dim=16, intermediate=160, vocab=256,
                                qkv_bias=True, rope_theta=1000000.0, rms_eps=1e-6),
    "tied_single_kv_head": dict(layers=3, hidden=64, heads=4, kv_heads=1, head_dim=32, intermediate=128, vocab=200,
                                tie_word_embeddings=True),
    # Mixture of experts (Qwen3-MoE / Mixtral layout): top 2 of 4 experts,
    # routing tilted towards the first experts.
    "moe_top2_of_4_skewed": dict(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=256,
                                 experts=4, top_k=2, expert_intermediate=32, routing_skew=0.5),
}


@pytest.mark.parametrize("name", sorted(SHAPE_VARIANTS))
def test_shape_variants_match_dense_model(name):
    """The paged model of an explicit shape (no preset) computes what the
    dense reference computes, chunked prefill and decode alike, and holds
    the weights the memory estimate counted."""
    shape = dict(SHAPE_VARIANTS[name], dtype="float32")
    r = ModelRunner(EngineConfig(tiny_init(model=None, model_config=shape)))
    cfg = r.mcfg
    for k, v in shape.items():
        assert getattr(cfg, k) == v, k
    assert r.weight_bytes == cfg.weight_bytes()
    assert (r.model.lm_head is r.model.embed) == shape.get("tie_word_embeddings", False)
    assert all((L.qkv_b is not None) == shape.get("qkv_bias", False) for L in r.model.layers)
    pa = list(range(3, 14))  # 11 tokens: a chunk of 6, then 5
    pb = [7, 1, 4, 1, 5]
    s = run_step(r, step(0, new=[new_req("a", pa, [10, 2, 7]), new_req("b", pb, [5, 6])], sched={"a": 6, "b": 5}))
    assert torch.allclose(r.last_logits[1], r.model.dense_forward(pb)[-1], atol=1e-4)
    tb = s["b"]
    s = run_step(r, step(1, cached={"req_ids": ["a", "b"], "num_computed_tokens": [6, 5]}, sched={"a": 5, "b": 1}))
    assert torch.allclose(r.last_logits[0], r.model.dense_forward(pa)[-1], atol=1e-4)
    assert torch.allclose(r.last_logits[1], r.model.dense_forward(pb + [tb])[-1], atol=1e-4)


def test_explicit_shape_without_preset():
    full = dict(SHAPE_VARIANTS["head_dim_not_hidden_over_heads"])
    cfg = EngineConfig(tiny_init(model=None, model_config=full)).model
    assert cfg.preset == "model_config(layers=2 hidden=48 heads=4/2 head_dim=16)"
    assert cfg.dtype == "bfloat16" and not cfg.qkv_bias
    del full["intermediate"]
    with pytest.raises(ConfigError, match="missing: intermediate"):
        EngineConfig(tiny_init(model=None, model_config=full))
    with pytest.raises(ConfigError, match="unknown field 'rope_scaling'"):
        EngineConfig(tiny_init(model_config={"rope_scaling": 2}))
    with pytest.raises(ConfigError, match="qkv_bias must be a bool"):
        EngineConfig(tiny_init(model_config={"qkv_bias": 1}))
    # A preset still takes overrides; no preset and no shape is the default.
    assert EngineConfig(tiny_init(model_config={"qkv_bias": True})).model.qkv_bias
    assert EngineConfig({"type": "init", "device": "cpu"}).model.preset == "llama-8b"


def test_moe_layer_matches_per_token_experts():
    """The sorted, grouped MoE computes, for every token, the router-weighted
    sum of its top-k experts' SwiGLU MLPs; skew moves tokens to low ids."""
    shape = dict(SHAPE_VARIANTS["moe_top2_of_4_skewed"], dtype="float32")
    r = ModelRunner(EngineConfig(tiny_init(model=None, model_config=shape)))
    moe = r.model.layers[0].moe
    x = torch.randn(13, shape["hidden"], generator=torch.Generator().manual_seed(3))
    w, ids = moe.route(x)
    ref = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(moe.k):
            e = int(ids[t, j])
            g, u = torch.nn.functional.linear(x[t], moe.w13[e]).chunk(2)
            ref[t] += w[t, j] * torch.nn.functional.linear(torch.nn.functional.silu(g) * u, moe.w2[e])
    assert torch.allclose(moe(x), ref, atol=1e-5)
    # The part opbench.py times, from the router's logits, is the layer.
    assert torch.equal(moe.routed(x, torch.nn.functional.linear(x, moe.router)), moe(x))
    assert torch.allclose(w.sum(-1), torch.ones(x.shape[0]))
    # The logit spread the tilt is measured against (the manifest records it).
    xn = torch.randn(512, shape["hidden"], generator=torch.Generator().manual_seed(4))
    xn = xn / xn.pow(2).mean(-1, keepdim=True).sqrt()
    std = torch.nn.functional.linear(xn, moe.router).std().item()
    assert abs(std / r.model.router_logit_std() - 1) < 0.1, std
    skewed = dict(shape, routing_skew=8.0)
    r2 = ModelRunner(EngineConfig(tiny_init(model=None, model_config=skewed)))
    _, ids2 = r2.model.layers[0].moe.route(x)
    assert sorted(set(ids2.flatten().tolist())) == [0, 1]  # the tilt dominates the random router


def test_cuda_graph_mode_is_checked():
    assert EngineConfig(tiny_init()).cuda_graph_mode == "piecewise"
    assert EngineConfig(tiny_init(cuda_graph_mode="full")).cuda_graph_mode == "full"
    with pytest.raises(ConfigError, match="init.cuda_graph_mode must be piecewise or full"):
        EngineConfig(tiny_init(cuda_graph_mode="eager"))


def test_unrunnable_shapes_are_refused_naming_the_field():
    for field, what in [("kv_lora_rank", "MLA"), ("linear_attention", "linear attention"),
                        ("sliding_window", "sliding-window")]:
        with pytest.raises(ConfigError, match="model_config.%s: .*%s" % (field, what)):
            EngineConfig(tiny_init(model_config={field: 512}))
    with pytest.raises(ConfigError, match="top_k must be in"):
        EngineConfig(tiny_init(model_config={"experts": 4, "top_k": 5, "expert_intermediate": 8}))
    with pytest.raises(ConfigError, match="routing_skew"):
        EngineConfig(tiny_init(model_config={"experts": 4, "top_k": 2, "expert_intermediate": 8,
                                             "routing_skew": -1}))


@pytest.mark.parametrize("shape,params", [
    # Hugging Face config.json values; parameter counts of the released models.
    (dict(layers=40, hidden=5120, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=131072), 12_247_782_400),
    (dict(layers=28, hidden=3584, heads=28, kv_heads=4, head_dim=128, intermediate=18944, vocab=152064, qkv_bias=True),
     7_615_616_512),
    # Qwen3-30B-A3B's config.json (128 experts, top 8); the released count,
    # 30,532,122,624, also holds the per-head q/k norms (12,288), which cost
    # nothing here.
    (dict(layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, intermediate=6144, vocab=151936,
          experts=128, top_k=8, expert_intermediate=768), 30_532_122_624 - 48 * 2 * 128),
])
def test_memory_estimate_of_real_shapes(shape, params):
    """Mistral-Nemo-12B and Qwen2.5-7B: the estimate counts their
    parameters, so the KV cache is sized before anything is allocated."""
    cfg = EngineConfig(tiny_init(model=None, model_config=shape)).model
    assert cfg.weight_elems() == params
    assert cfg.weight_bytes() == 2 * params


def test_prefix_cache_hit_reads_cached_kv():
    """A new request with num_computed_tokens > 0 attends to KV already in
    its (shared) blocks."""
    r = make_runner()
    p = list(range(40, 52))  # 12 tokens = 3 blocks of 4
    run_step(r, step(0, new=[new_req("a", p, [1, 2, 3])], sched={"a": 12}))
    q = p[:8] + [99, 98, 97]
    run_step(r, step(1, new=[new_req("b", q, [1, 2, 4], computed=8)], sched={"b": 3}, finished=["a"]))
    assert torch.allclose(r.last_logits[0], r.model.dense_forward(q)[-1], atol=1e-4)


def test_graph_padding_matches_unpadded():
    r1 = make_runner()
    r2 = make_runner(pad_eager_sizes=[4, 8])
    prompts = {"a": [1, 2, 3], "b": [4, 5, 6, 7, 8], "c": [9]}
    blocks = {"a": [0, 1], "b": [2, 3], "c": [4, 5]}
    new = [new_req(k, v, blocks[k]) for k, v in prompts.items()]
    sched = {k: len(v) for k, v in prompts.items()}
    s1 = run_step(r1, step(0, new=new, sched=sched))
    s2 = run_step(r2, step(0, new=new, sched=sched))
    assert s1 == s2
    cached = {"req_ids": list(prompts), "num_computed_tokens": [len(v) for v in prompts.values()]}
    _, t1 = r1.execute(step(1, cached=cached, sched={k: 1 for k in prompts}))
    _, t2 = r2.execute(step(1, cached=cached, sched={k: 1 for k in prompts}))
    assert t1["padded_tokens"] == 3 and t2["padded_tokens"] == 4
    assert torch.allclose(r1.last_logits, r2.last_logits, atol=1e-5)
    # the scratch block was the only one written by the padding row
    assert r2.k_cache[:, r2.num_blocks].abs().sum() > 0


@pytest.mark.parametrize("mode", ["piecewise", "full"])
def test_mixed_padding_matches_unpadded(mode):
    """Prefill and mixed steps padded to a token size (one dummy request
    on the scratch block; in the full-graph layout, empty rows after it)
    sample and score as the unpadded step does. On the CPU no graph is
    captured: the padded step runs eagerly in the layout its graphs would
    replay with."""
    r1 = make_runner()
    r2 = make_runner(pad_eager_sizes=[4, 8, 16], cuda_graph_mode=mode)
    prompts = {"a": [1, 2, 3], "b": [4, 5, 6, 7, 8], "c": [9]}
    blocks = {"a": [0, 1], "b": [2, 3], "c": [4, 5]}
    new = [new_req(k, v, blocks[k]) for k, v in prompts.items()]
    sched = {k: len(v) for k, v in prompts.items()}
    s1, t1 = r1.execute(step(0, new=new, sched=sched))
    s2, t2 = r2.execute(step(0, new=new, sched=sched))
    assert s1 == s2 and t1["padded_tokens"] == 9 and t2["padded_tokens"] == 16
    # attention's rows: the three requests and the dummy, or every row of the size
    assert r2._mixed_rows(16, 3, 9) == (4 if mode == "piecewise" else 8)
    assert torch.allclose(r1.last_logits, r2.last_logits, atol=1e-5)
    assert r2.k_cache[:, r2.num_blocks].abs().sum() > 0
    # a new prompt riding with three decodes: 4 + 3 tokens in a size of 8
    cached = {"req_ids": list(prompts), "num_computed_tokens": [len(v) for v in prompts.values()]}
    msg = step(1, new=[new_req("d", [11, 12, 13, 14], [6, 7])], cached=cached, sched={"a": 1, "b": 1, "c": 1, "d": 4})
    s1, t1 = r1.execute(msg)
    s2, t2 = r2.execute(msg)
    assert s1 == s2 and t1["padded_tokens"] == 7 and t2["padded_tokens"] == 8
    assert torch.allclose(r1.last_logits, r2.last_logits, atol=1e-5)
    # the padding never touched a request's blocks: the next decode agrees
    cached = {"req_ids": list(prompts) + ["d"], "num_computed_tokens": [4, 6, 2, 4]}
    msg = step(2, cached=cached, sched={"a": 1, "b": 1, "c": 1, "d": 1})
    assert r1.execute(msg)[0] == r2.execute(msg)[0]
    assert torch.allclose(r1.last_logits, r2.last_logits, atol=1e-5)


# ------------------------------------------------------ persistent batch
def test_persistent_batch_lifecycle():
    r = make_runner()
    b = r.batch
    pa, pb, pc = [1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12]
    # new
    s = run_step(r, step(0, new=[new_req("a", pa, [0, 1]), new_req("b", pb, [2]), new_req("c", pc, [3])],
                         sched={"a": 5, "b": 3, "c": 4}))
    assert b.req_ids[:3] == ["a", "b", "c"] and b.num_reqs == 3
    assert list(b.token_ids[0, :6]) == pa + [s["a"]]
    assert list(b.block_table_np[0, :2]) == [0, 1] and b.num_blocks[0] == 2
    out = {k: [v] for k, v in s.items()}
    # cached: b gets a new block, all decode
    s = run_step(r, step(1, cached={"req_ids": ["a", "b", "c"], "new_block_ids": [None, [7], [8]],
                                    "num_computed_tokens": [5, 3, 4]}, sched={"a": 1, "b": 1, "c": 1}))
    for k in s:
        out[k].append(s[k])
    assert list(b.block_table_np[1, :2]) == [2, 7] and b.num_blocks[1] == 2
    assert b.num_computed_tokens[1] == 4 and b.num_tokens[1] == 5
    # preempt b: its row goes, c moves into the hole, state kept
    s = run_step(r, step(2, cached={"req_ids": ["a", "c"], "num_computed_tokens": [6, 5]},
                         sched={"a": 1, "c": 1}, preempted=["b"]))
    for k in s:
        out[k].append(s[k])
    assert b.num_reqs == 2 and b.req_ids[:2] == ["a", "c"] and "b" not in b.req_id_to_index
    assert list(b.token_ids[1, :7]) == pc + out["c"]
    assert "b" in r.requests and r.requests["b"].output_token_ids == out["b"]
    # resume b: new blocks replace the old table, recompute prompt + outputs
    nb = len(pb) + len(out["b"])
    s = run_step(r, step(3, cached={"req_ids": ["a", "c", "b"], "resumed_req_ids": ["b"],
                                    "new_block_ids": [None, None, [20, 21]],
                                    "num_computed_tokens": [7, 6, 0]}, sched={"a": 1, "c": 1, "b": nb}))
    assert b.req_ids[:3] == ["a", "c", "b"]
    assert list(b.block_table_np[2, :2]) == [20, 21] and b.num_blocks[2] == 2
    # the recomputed b samples what it would have sampled without preemption
    ref = r.model.dense_forward(pb + out["b"])
    assert s["b"] == int(ref[-1].argmax())
    assert torch.allclose(r.last_logits[2], ref[-1], atol=1e-4)
    # finish a: rows condense; b and c keep going
    s = run_step(r, step(4, cached={"req_ids": ["c", "b"], "num_computed_tokens": [7, nb + 1 - 1 + 0]},
                         sched={"c": 1, "b": 1}, finished=["a"]))
    assert "a" not in r.requests and b.num_reqs == 2
    assert sorted(b.req_ids[:2]) == ["b", "c"]
    assert b.req_ids[2] is None


def test_resumed_as_new_request_and_unscheduled_request():
    r = make_runner()
    run_step(r, step(0, new=[new_req("a", [1, 2, 3], [0]), new_req("b", [4, 5], [1])], sched={"a": 3, "b": 2}))
    # b is not scheduled in step 1: it leaves the batch, state kept
    run_step(r, step(1, cached={"req_ids": ["a"], "num_computed_tokens": [3]}, sched={"a": 1}))
    assert "b" not in r.batch.req_id_to_index and "b" in r.requests
    s = run_step(r, step(2, cached={"req_ids": ["b"], "num_computed_tokens": [2]}, sched={"b": 1}))
    assert s["b"] >= 0 and r.batch.req_ids[:1] == ["b"]
    # a, preempted earlier, comes back as a full new request
    s = run_step(r, step(3, new=[new_req("a", [1, 2, 3], [2])], sched={"a": 3, "b": 1},
                         cached={"req_ids": ["b"], "num_computed_tokens": [3]}, preempted=[]))
    assert r.requests["a"].output_token_ids == [s["a"]]
    with pytest.raises(StepError):  # a running request cannot be re-sent as new
        run_step(r, step(4, new=[new_req("a", [1, 2, 3], [2])], sched={"a": 3}))


def test_new_token_ids_pp_field_appends_unknown_tokens():
    r = make_runner()
    run_step(r, step(0, new=[new_req("a", [1, 2, 3], [0, 1])], sched={"a": 3}))
    st = r.requests["a"]
    known = list(st.output_token_ids)
    # tokens ending at position num_computed + len - 1 = 4: one is new
    run_step(r, step(1, cached={"req_ids": ["a"], "new_token_ids": [[known[0], 77]],
                                "num_computed_tokens": [3]}, sched={"a": 2}))
    assert st.output_token_ids[:2] == known + [77]


# ----------------------------------------------------------- sampling
def _sample_run(seed_req, temperature=1.0, chunks=(6,)):
    r = make_runner(dtype="float32", seed=3)
    p = list(range(100, 106))
    first = chunks[0]
    s = run_step(r, step(0, new=[new_req("a", p, [0, 1, 2, 3, 4], temperature=temperature, seed=seed_req)],
                         sched={"a": first}))
    done = first
    for i, c in enumerate(chunks[1:]):
        s = run_step(r, step(1 + i, cached={"req_ids": ["a"], "num_computed_tokens": [done]}, sched={"a": c}))
        done += c
    toks = [s["a"]]
    for i in range(8):
        s = run_step(r, step(10 + i, cached={"req_ids": ["a"], "num_computed_tokens": [done]}, sched={"a": 1}))
        done += 1
        toks.append(s["a"])
    return toks


def test_seeded_sampling_is_deterministic():
    a = _sample_run(1234)
    assert a == _sample_run(1234)
    assert a == _sample_run(1234, chunks=(2, 4))  # chunking does not advance the generator
    assert a != _sample_run(999)
    assert len(set(a)) > 1


def test_top_k_one_is_greedy():
    r = make_runner()
    s = run_step(r, step(0, new=[new_req("a", [1, 2, 3], [0], temperature=0.8, top_k=1, seed=5),
                                 new_req("b", [1, 2, 3], [1])], sched={"a": 3, "b": 3}))
    assert s["a"] == s["b"] == int(r.last_logits[0].argmax())


def test_worker_sampling_deterministic_across_processes():
    def run():
        c = spawn()
        assert c.call(tiny_init(seed=11))["type"] == "ready"
        reqs = [new_req("s", [1, 2, 3, 4], [0, 1, 2], temperature=1.0, seed=42),
                new_req("u", [5, 6, 7, 8], [3, 4, 5], temperature=0.9, top_p=0.9)]
        out = c.call(step(0, new=reqs, sched={"s": 4, "u": 4}))
        toks = [out["sampled_token_ids"]]
        for i in range(5):
            out = c.call(step(i + 1, cached={"req_ids": ["s", "u"], "num_computed_tokens": [4 + i, 4 + i]},
                              sched={"s": 1, "u": 1}))
            toks.append(out["sampled_token_ids"])
        c.call({"type": "shutdown"})
        c.close()
        return toks
    assert run() == run()


def test_opbench_rows_and_bad_shapes(tmp_path):
    """The operations benchmark on the CPU: every table of the tiny shape
    and of a tiny mixture of experts, eager rows with positive latencies;
    the element-wise steps it times are the ones the CPU's forward pass
    runs (the torch backend: unfused)."""
    import json

    import opbench
    from config import WORKER_GENERATION

    out = tmp_path / "rows.jsonl"
    dense = "hidden=64,heads=4,kv_heads=2,head_dim=16,intermediate=128,vocab=512"
    opbench.main(["--device", "cpu", "--grid", "quick", "--out", str(out), "--shape", dense,
                  "--shape", "hidden=48,heads=4,kv_heads=1,head_dim=16,intermediate=96,vocab=512,experts=8,top_k=2,"
                  "expert_intermediate=32", "--routing-skew", "0", "--routing-skew", "2.5"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    meta = rows[0]
    assert meta["table"] == "meta" and meta["launches"] == ["eager"]
    assert meta["worker_generation"] == WORKER_GENERATION and meta["attention_backend"] == "torch"
    tables = {r["table"] for r in rows[1:]}
    assert tables == {"gemm", "context_attention", "generation_attention", "elementwise", "moe"}
    assert all(r["latency_ms"] > 0 and r["launch"] == "eager" for r in rows[1:])
    ops = {(r["op"], r["n"]) for r in rows if r["table"] == "elementwise"}
    assert ("rope", (4 + 2) * 16) in ops and ("kv_write", 2 * 16) in ops and ("silu_mul", 128) in ops
    assert ("rope", (4 + 1) * 16) in ops, "every head layout's"
    assert {op for op, _ in ops} == {"rmsnorm", "residual_add", "rope", "kv_write", "silu_mul", "embedding"}
    assert ("silu_mul", 96) not in ops, "a mixture of experts runs no dense MLP"
    gemms = {(r["n"], r["k"]) for r in rows if r["table"] == "gemm"}
    assert {((4 + 4) * 16, 64), (64, 64), (256, 64), (64, 128), (512, 64)} <= gemms
    # The MoE shape: its router (8 experts) and expert GEMMs, no dense MLP.
    assert {(8, 48), (64, 48), (48, 32)} <= gemms and (192, 48) not in gemms
    moe = [r for r in rows if r["table"] == "moe"]
    assert {r["distribution"] for r in moe} == {"balanced", "routing_skew_0", "routing_skew_2.5"}
    assert {r["tokens"] for r in moe} == set(opbench.GRIDS["quick"]["m"])
    assert {(r["hidden"], r["inter"], r["top_k"], r["experts"], r["tp"], r["ep"]) for r in moe} == {(48, 32, 2, 8, 1, 1)}
    for bad in ["hidden=64", "hidden=64,heads=3,kv_heads=2,head_dim=16,intermediate=128,vocab=512",
                "hidden=-1,heads=4,kv_heads=2,head_dim=16,intermediate=128,vocab=512",
                dense + ",experts=8", dense + ",experts=8,top_k=9,expert_intermediate=32", dense + ",top_k=2"]:
        with pytest.raises(SystemExit):
            opbench.main(["--device", "cpu", "--grid", "quick", "--out", str(out), "--shape", bad])
    with pytest.raises(SystemExit):
        opbench.main(["--device", "cpu", "--grid", "quick", "--out", str(out), "--shape", dense, "--routing-skew", "-1"])


def test_opbench_balanced_routing():
    """Balanced logits send every expert tokens*top_k/experts rows, give or
    take one, each token to top_k distinct experts."""
    import opbench
    from moe import MoEMLP

    cfg = EngineConfig(tiny_init(model=None, model_config=dict(SHAPE_VARIANTS["moe_top2_of_4_skewed"],
                                                                routing_skew=0.0))).model
    layer = MoEMLP(cfg, torch.Generator().manual_seed(0), "cpu",
                   lambda shape, gen, device, dtype: torch.zeros(shape, dtype=dtype), None)
    for T in (1, 3, 8, 13):
        _, ids = layer._top_k(opbench.balanced_logits(T, cfg.experts, cfg.top_k, "cpu", torch.bfloat16))
        counts = torch.bincount(ids.flatten(), minlength=cfg.experts)
        assert counts.sum() == T * cfg.top_k and counts.max() - counts.min() <= 1, (T, counts)
        assert all(len(set(r)) == cfg.top_k for r in ids.tolist())

"""A Llama-architecture decoder (RMSNorm, RoPE, GQA attention over a paged KV
cache, SwiGLU MLP, tied or untied LM head, optional q/k/v biases as Qwen2)
with seeded random weights. Any dense Llama-family shape: head_dim need not
be hidden / heads (Mistral-Nemo), the group size heads / kv_heads need not
be a power of two (Qwen2.5-7B: 7).

The weights are random (std 0.02, norms 1) so that the worker costs what a
real model of the shape costs without any checkpoint; activations stay
finite because every block is pre-normalised.
"""

import math

import torch
import torch.nn.functional as F

import kernels
from attention import paged_attention_torch, softmax_scale
from moe import MoEMLP

WEIGHT_STD = 0.02


class AttnMeta:
    """Per-step attention inputs (device tensors, plus host copies for the
    per-request torch backend)."""

    __slots__ = ("num_reqs", "num_tokens", "max_q_len", "qsl", "seq_lens", "block_table",
                 "slot_mapping", "qsl_cpu", "seq_lens_cpu")

    def __init__(self, num_reqs, num_tokens, max_q_len, qsl, seq_lens, block_table, slot_mapping,
                 qsl_cpu=None, seq_lens_cpu=None):
        self.num_reqs = num_reqs
        self.num_tokens = num_tokens
        self.max_q_len = max_q_len
        self.qsl = qsl
        self.seq_lens = seq_lens
        self.block_table = block_table
        self.slot_mapping = slot_mapping
        self.qsl_cpu = qsl_cpu
        self.seq_lens_cpu = seq_lens_cpu


def _randn(shape, gen, device, dtype, std=WEIGHT_STD):
    t = torch.empty(shape, dtype=torch.float32, device=device)
    t.normal_(0.0, std, generator=gen)
    return t.to(dtype)


class Layer:
    __slots__ = ("in_norm", "qkv", "qkv_b", "o", "post_norm", "gate_up", "down", "moe")


class LlamaModel:
    def __init__(self, cfg, max_model_len, device, seed, triton_attn=None, fused=False):
        """fused: run the element-wise steps as kernels.py's Triton kernels
        (CUDA only) instead of chains of PyTorch ops."""
        self.cfg = cfg
        self.device = device
        self.fused = fused
        dt = cfg.torch_dtype
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        h, d = cfg.hidden, cfg.head_dim
        self.embed = _randn((cfg.vocab, h), gen, device, dt)
        self.layers = []
        for _ in range(cfg.layers):
            L = Layer()
            L.in_norm = torch.ones(h, dtype=dt, device=device)
            L.qkv = _randn(((cfg.heads + 2 * cfg.kv_heads) * d, h), gen, device, dt)
            L.qkv_b = _randn(((cfg.heads + 2 * cfg.kv_heads) * d,), gen, device, dt) if cfg.qkv_bias else None
            L.o = _randn((h, cfg.heads * d), gen, device, dt)
            L.post_norm = torch.ones(h, dtype=dt, device=device)
            if cfg.is_moe:
                L.gate_up = L.down = None
                L.moe = MoEMLP(cfg, gen, device, _randn, self._act)
            else:
                L.gate_up = _randn((2 * cfg.intermediate, h), gen, device, dt)
                L.down = _randn((h, cfg.intermediate), gen, device, dt)
                L.moe = None
            self.layers.append(L)
        self.final_norm = torch.ones(h, dtype=dt, device=device)
        self.lm_head = self.embed if cfg.tie_word_embeddings else _randn((cfg.vocab, h), gen, device, dt)
        # RoPE tables (neox / rotate-half layout, as Llama).
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        pos = torch.arange(max_model_len, dtype=torch.float32)
        freqs = torch.outer(pos, inv_freq)
        self.cos = freqs.cos().to(device=device, dtype=dt)
        self.sin = freqs.sin().to(device=device, dtype=dt)
        self.scale = softmax_scale(d)
        self.triton_attn = triton_attn

    def router_logit_std(self):
        """The spread of a router's logits, the scale routing_skew's tilt is
        measured against: a unit-RMS input (RMSNorm with unit weights)
        against router rows of N(0, WEIGHT_STD^2) gives logits of standard
        deviation WEIGHT_STD * sqrt(hidden). 0 for a dense model."""
        return WEIGHT_STD * math.sqrt(self.cfg.hidden) if self.cfg.is_moe else 0.0

    def weight_bytes(self):
        tensors = [self.embed, self.final_norm] + ([] if self.lm_head is self.embed else [self.lm_head])
        for L in self.layers:
            tensors += [L.in_norm, L.qkv, L.o, L.post_norm]
            tensors += L.moe.tensors() if L.moe is not None else [L.gate_up, L.down]
            if L.qkv_b is not None:
                tensors.append(L.qkv_b)
        return sum(t.numel() * t.element_size() for t in tensors)

    def _rms(self, x, w):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.rms_eps)
        return xf.to(x.dtype) * w

    def _rope(self, x, cos, sin):
        half = x.shape[-1] // 2
        x1 = x[..., :half]
        x2 = x[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    # The element-wise steps of a layer, one method each: the forward pass
    # runs them and capture/worker/opbench.py measures them.
    def _qkv_rope(self, qkv, cos, sin):
        """Splits the fused projection [T, (H + 2 KVH) D] into q, k, v and
        rotates q and k."""
        cfg = self.cfg
        T = qkv.shape[0]
        H, KVH, D = cfg.heads, cfg.kv_heads, cfg.head_dim
        q = qkv[:, : H * D].view(T, H, D)
        k = qkv[:, H * D: (H + KVH) * D].view(T, KVH, D)
        v = qkv[:, (H + KVH) * D:].view(T, KVH, D)
        return self._rope(q, cos, sin), self._rope(k, cos, sin), v

    @staticmethod
    def _kv_write(k, v, kc, vc, slots):
        """Stores the step's keys and values at their cache slots."""
        nb, bs, KVH, D = kc.shape
        kc.view(nb * bs, KVH, D).index_copy_(0, slots, k)
        vc.view(nb * bs, KVH, D).index_copy_(0, slots, v.contiguous())

    @staticmethod
    def _silu_mul(gu):
        g, u = gu.chunk(2, dim=-1)
        return F.silu(g) * u

    def _act(self, gu):
        return kernels.silu_mul(gu) if self.fused else self._silu_mul(gu)

    def _mlp(self, L, a):
        if L.moe is not None:
            return L.moe(a)
        return F.linear(self._act(F.linear(a, L.gate_up)), L.down)

    def _add_rms(self, h, residual, w):
        """residual + h (h None: residual alone) and its RMSNorm; the fused
        kernel updates residual in place."""
        if self.fused:
            return residual, kernels.add_rms_norm(h, residual, w, self.cfg.rms_eps)
        if h is not None:
            residual = residual + h
        return residual, self._rms(residual, w)

    def _attn_inputs(self, qkv, positions, kc, vc, slots):
        """q rotated; k rotated and v written to the cache slots."""
        cfg = self.cfg
        if self.fused:
            return kernels.rope_kv_write(qkv, positions, self.cos, self.sin, slots, kc, vc,
                                         cfg.heads, cfg.kv_heads, cfg.head_dim)
        cos = self.cos.index_select(0, positions).unsqueeze(1)
        sin = self.sin.index_select(0, positions).unsqueeze(1)
        q, k, v = self._qkv_rope(qkv, cos, sin)
        self._kv_write(k, v, kc, vc, slots)
        return q

    # The forward pass in pieces: attention is the only one that reads the
    # step's per-request layout (block table, sequence lengths), so the
    # others, head and tail, can be captured as CUDA graphs per token count
    # and attention run eagerly between them (runner.PiecewiseGraph).
    def head(self, input_ids, positions, slots, k_cache, v_cache):
        """Embedding, the first norm and layer 0's q (k, v to the cache):
        returns (residual, q)."""
        x = F.embedding(input_ids, self.embed)
        x, a = self._add_rms(None, x, self.layers[0].in_norm)
        return x, self._q(0, a, positions, slots, k_cache, v_cache)

    def _q(self, li, a, positions, slots, k_cache, v_cache):
        L = self.layers[li]
        return self._attn_inputs(F.linear(a, L.qkv, L.qkv_b), positions, k_cache[li], v_cache[li], slots)

    def attend(self, li, q, meta, k_cache, v_cache, out=None):
        """Layer li's paged attention of q [T, H, D]."""
        kc, vc = k_cache[li], v_cache[li]
        if self.triton_attn is not None:
            return self.triton_attn(q, kc, vc, meta.block_table, meta.seq_lens, meta.qsl, meta.num_reqs,
                                    meta.max_q_len, self.scale, out=out)
        return paged_attention_torch(q, kc, vc, meta.block_table, meta.qsl_cpu, meta.seq_lens_cpu,
                                     meta.num_reqs, self.scale, out=out)

    def tail(self, li, o, x, positions, slots, k_cache, v_cache):
        """Layer li after attention (o [T, H, D]): the output projection,
        the MLP and the next layer's q. Returns (residual, next q), or
        (hidden states, None) after the last layer."""
        L = self.layers[li]
        x, a = self._add_rms(F.linear(o.view(o.shape[0], -1), L.o), x, L.post_norm)
        h = self._mlp(L, a)
        if li + 1 < len(self.layers):
            x, a = self._add_rms(h, x, self.layers[li + 1].in_norm)
            return x, self._q(li + 1, a, positions, slots, k_cache, v_cache)
        return x + h, None

    def forward(self, input_ids, positions, meta, k_cache, v_cache):
        """input_ids, positions: [T]; returns hidden states [T, hidden]
        (before the final norm). k_cache/v_cache: [layers, blocks, bs, KVH, D]."""
        slots = meta.slot_mapping
        x, q = self.head(input_ids, positions, slots, k_cache, v_cache)
        for li in range(len(self.layers)):
            o = self.attend(li, q, meta, k_cache, v_cache)
            x, q = self.tail(li, o, x, positions, slots, k_cache, v_cache)
        return x

    def logits(self, hidden):
        return F.linear(self._add_rms(None, hidden, self.final_norm)[1], self.lm_head).float()

    def dense_forward(self, token_ids):
        """Reference: one sequence, no KV cache, full causal attention.
        Returns float32 logits [len, vocab]."""
        cfg = self.cfg
        ids = torch.tensor(token_ids, dtype=torch.long, device=self.device)
        T = ids.shape[0]
        H, KVH, D = cfg.heads, cfg.kv_heads, cfg.head_dim
        G = H // KVH
        pos = torch.arange(T, device=self.device)
        cos = self.cos.index_select(0, pos).unsqueeze(1)
        sin = self.sin.index_select(0, pos).unsqueeze(1)
        x = F.embedding(ids, self.embed)
        mask = torch.ones(T, T, dtype=torch.bool, device=self.device).triu(1)
        for L in self.layers:
            a = self._rms(x, L.in_norm)
            q, k, v = self._qkv_rope(F.linear(a, L.qkv, L.qkv_b), cos, sin)
            k = k.repeat_interleave(G, dim=1)
            v = v.repeat_interleave(G, dim=1)
            s = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * self.scale
            s = s.masked_fill(mask, float("-inf"))
            o = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v.float()).to(x.dtype)
            x = x + F.linear(o.reshape(T, H * D), L.o)
            x = x + self._mlp(L, self._rms(x, L.post_norm))
        return self.logits(x)

"""A mixture-of-experts MLP: a router picks top_k of `experts` SwiGLU
experts per token (softmax over the chosen logits, as Qwen3-MoE's
norm_topk_prob and Mixtral), the tokens are sorted by expert, and each
projection is one grouped GEMM over the experts' contiguous row groups.

Weights are random, like the rest of the model, so routing follows the
router's random projection of the hidden states: about uniform over the
experts. routing_skew s >= 0 adds -s * ln(1 + e) to expert e's logit, a
Zipf-like tilt that concentrates tokens on the first experts (0: none), so
that captures can price load imbalance.

On CUDA the grouped GEMM is torch._grouped_mm with device-side group
offsets: no host synchronisation, so the layer runs inside CUDA graphs. On
the CPU (and where that op is missing) each expert's rows run through their
own two GEMMs, which reads the group sizes on the host.
"""

import math

import torch
import torch.nn.functional as F


def _grouped_mm_available(device):
    return device.type == "cuda" and hasattr(torch, "_grouped_mm")


class MoEMLP:
    def __init__(self, cfg, gen, device, randn, silu_mul):
        E, I, h = cfg.experts, cfg.expert_intermediate, cfg.hidden
        dt = cfg.torch_dtype
        self.E, self.k, self.I = E, cfg.top_k, I
        self.router = randn((E, h), gen, device, dt)
        # [E, N, K] as nn.Linear stores weights; transposed views are the
        # column-major [E, K, N] operands the grouped GEMM takes.
        self.w13 = randn((E, 2 * I, h), gen, device, dt)
        self.w2 = randn((E, h, I), gen, device, dt)
        self.bias = (-cfg.routing_skew * torch.log1p(torch.arange(E, dtype=torch.float32))).to(device)
        self.expert_ids = torch.arange(E, device=device)
        self.silu_mul = silu_mul
        self.grouped = _grouped_mm_available(torch.device(device))

    def tensors(self):
        return [self.router, self.w13, self.w2]

    def route(self, x):
        """Returns (weights [T, k] in x's dtype, expert ids [T, k])."""
        return self._top_k(F.linear(x, self.router))

    def _top_k(self, logits):
        w, ids = torch.topk(logits.float() + self.bias, self.k, dim=-1)
        return torch.softmax(w, dim=-1).to(logits.dtype), ids

    def __call__(self, x):
        return self.routed(x, F.linear(x, self.router))

    def routed(self, x, logits):
        """The layer after its router GEMM, from the router's logits
        [T, experts]: the top-k routing, the grouped expert GEMMs and the
        combine. opbench.py times this part as a moe row (the router is a
        GEMM row of its own), with the logits it chooses."""
        T, h = x.shape
        w, ids = self._top_k(logits)
        sorted_ids, order = torch.sort(ids.reshape(-1), stable=True)
        xs = x.index_select(0, order // self.k)
        # ends[e]: one past the last sorted row routed to expert e.
        ends = torch.searchsorted(sorted_ids, self.expert_ids, right=True)
        if self.grouped:
            offs = ends.to(torch.int32)
            gu = torch._grouped_mm(xs, self.w13.transpose(1, 2), offs=offs)
            ys = torch._grouped_mm(self.silu_mul(gu), self.w2.transpose(1, 2), offs=offs)
        else:
            ys = torch.empty((T * self.k, h), dtype=x.dtype, device=x.device)
            start = 0
            for e, end in enumerate(ends.tolist()):
                if end > start:
                    gu = F.linear(xs[start:end], self.w13[e])
                    ys[start:end] = F.linear(self.silu_mul(gu), self.w2[e])
                start = end
        ys = ys * w.reshape(-1).index_select(0, order).unsqueeze(1)
        out = torch.empty_like(ys).index_copy_(0, order, ys)
        return out.view(T, self.k, h).sum(dim=1)


def active_expert_bytes(cfg, tokens):
    """Expected bytes of expert weights a step of `tokens` tokens reads
    under uniform routing: each expert is hit with probability
    1 - (1 - k/E)^tokens (the decode bound of scripts/profile-decode.py)."""
    p = 1.0 - math.pow(1.0 - cfg.top_k / cfg.experts, tokens)
    return p * cfg.experts * 3 * cfg.hidden * cfg.expert_intermediate * cfg.elt

"""Fused element-wise kernels of a decoder layer (Triton, CUDA only).

Each replaces a chain of PyTorch ops that costs one launch and one pass
over memory per op: at small batches a layer's time is then those launches,
not its weight reads. model.py keeps the PyTorch versions as the reference
and the CPU path, and chooses these when Triton runs (test_worker.py and
scripts/profile-decode.py compare the two).

- add_rms_norm: residual += x, then out = rmsnorm(residual) * w, one pass.
- rope_kv_write: splits the fused q/k/v projection, rotates q and k (neox
  layout, cos/sin looked up by position), writes k and v to their cache
  slots and q to its own buffer, one pass.
- silu_mul: silu(gate) * up of the fused gate/up projection, one pass.
"""

import torch

from attention import HAVE_TRITON, _next_pow2

if HAVE_TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def _add_rms_kernel(x_ptr, r_ptr, w_ptr, out_ptr, eps, N: tl.constexpr, BLOCK: tl.constexpr,
                        HAS_X: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        m = offs < N
        r = tl.load(r_ptr + row * N + offs, mask=m, other=0.0).to(tl.float32)
        if HAS_X:
            r += tl.load(x_ptr + row * N + offs, mask=m, other=0.0).to(tl.float32)
            r = r.to(r_ptr.dtype.element_ty)
            tl.store(r_ptr + row * N + offs, r, mask=m)
            r = r.to(tl.float32)
        var = tl.sum(r * r, 0) / N
        y = (r * tl.rsqrt(var + eps)).to(out_ptr.dtype.element_ty)
        w = tl.load(w_ptr + offs, mask=m, other=0.0)
        tl.store(out_ptr + row * N + offs, y * w, mask=m)

    @triton.jit
    def _rope_kv_kernel(qkv_ptr, qkv_stride, pos_ptr, cos_ptr, sin_ptr, slot_ptr, q_ptr, kc_ptr, vc_ptr,
                        H: tl.constexpr, KVH: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr,
                        HALF_PAD: tl.constexpr, NH_PAD: tl.constexpr):
        t = tl.program_id(0).to(tl.int64)
        part = tl.program_id(1)  # 0: q, 1: k, 2: v
        offs_d = tl.arange(0, HALF_PAD)
        d_ok = offs_d < HALF
        row = qkv_ptr + t * qkv_stride
        heads = tl.arange(0, NH_PAD)
        if part == 2:
            h_ok = heads < KVH
            src = row + (H + KVH) * D + heads[:, None] * D + offs_d[None, :]
            msk = h_ok[:, None] & d_ok[None, :]
            slot = tl.load(slot_ptr + t).to(tl.int64)
            dst = vc_ptr + slot * (KVH * D) + heads[:, None] * D + offs_d[None, :]
            tl.store(dst, tl.load(src, mask=msk), mask=msk)
            tl.store(dst + HALF, tl.load(src + HALF, mask=msk), mask=msk)
        else:
            pos = tl.load(pos_ptr + t).to(tl.int64)
            cos = tl.load(cos_ptr + pos * HALF + offs_d, mask=d_ok, other=0.0).to(tl.float32)[None, :]
            sin = tl.load(sin_ptr + pos * HALF + offs_d, mask=d_ok, other=0.0).to(tl.float32)[None, :]
            nh = H if part == 0 else KVH
            h_ok = heads < nh
            msk = h_ok[:, None] & d_ok[None, :]
            src = row + part * H * D + heads[:, None] * D + offs_d[None, :]
            x1 = tl.load(src, mask=msk, other=0.0).to(tl.float32)
            x2 = tl.load(src + HALF, mask=msk, other=0.0).to(tl.float32)
            o1 = x1 * cos - x2 * sin
            o2 = x2 * cos + x1 * sin
            if part == 0:
                dst = q_ptr + t * (H * D) + heads[:, None] * D + offs_d[None, :]
            else:
                slot = tl.load(slot_ptr + t).to(tl.int64)
                dst = kc_ptr + slot * (KVH * D) + heads[:, None] * D + offs_d[None, :]
            tl.store(dst, o1.to(q_ptr.dtype.element_ty), mask=msk)
            tl.store(dst + HALF, o2.to(q_ptr.dtype.element_ty), mask=msk)

    @triton.jit
    def _silu_mul_kernel(gu_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = offs < N
        g = tl.load(gu_ptr + row * (2 * N) + offs, mask=m, other=0.0).to(tl.float32)
        u = tl.load(gu_ptr + row * (2 * N) + N + offs, mask=m, other=0.0).to(tl.float32)
        y = g / (1.0 + tl.exp(-g)) * u
        tl.store(out_ptr + row * N + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def add_rms_norm(x, residual, w, eps):
    """residual += x (x None: no add); returns rmsnorm(residual) * w.
    residual [T, N] contiguous, updated in place."""
    T, N = residual.shape
    out = torch.empty_like(residual)
    block = _next_pow2(N)
    _add_rms_kernel[(T,)](x if x is not None else residual, residual, w, out, eps, N=N, BLOCK=block,
                          HAS_X=x is not None, num_warps=min(16, max(4, block // 512)))
    return out


def rope_kv_write(qkv, positions, cos, sin, slots, kc, vc, heads, kv_heads, head_dim):
    """qkv [T, (H + 2 KVH) D]; cos/sin [max_len, D/2]; kc/vc one layer's
    cache [blocks, block_size, KVH, D] (contiguous). Returns q [T, H, D]."""
    T = qkv.shape[0]
    q = torch.empty((T, heads, head_dim), dtype=qkv.dtype, device=qkv.device)
    half = head_dim // 2
    _rope_kv_kernel[(T, 3)](qkv, qkv.stride(0), positions, cos, sin, slots, q, kc, vc,
                            H=heads, KVH=kv_heads, D=head_dim, HALF=half, HALF_PAD=_next_pow2(half),
                            NH_PAD=_next_pow2(heads), num_warps=4)
    return q


def silu_mul(gu):
    T, N2 = gu.shape
    N = N2 // 2
    out = torch.empty((T, N), dtype=gu.dtype, device=gu.device)
    block = 1024
    _silu_mul_kernel[(T, triton.cdiv(N, block))](gu, out, N=N, BLOCK=block, num_warps=4)
    return out

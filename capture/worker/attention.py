"""Paged, ragged attention over a block-table KV cache.

Layout: q [T, H, D] (tokens of all requests, flattened in batch order);
k_cache, v_cache [num_blocks, block_size, KVH, D] for one layer; block_table
[B, max_blocks] int32; seq_lens [B] (context length after this step);
query_start_loc [B+1]. Request b's queries are tokens qsl[b]..qsl[b+1]-1 at
absolute positions seq_len-q_len .. seq_len-1, and attend causally to keys
0..their own position, the earlier ones already in the cache.

Two implementations:
- paged_attention_torch: per request, gathers its own blocks and computes
  exact attention in float32. CPU path and fallback; every request costs what
  its own context costs (no padding to the longest).
- paged_attention_triton: one Triton kernel for prefill chunks, decode and
  mixed batches (each program owns BLOCK_Q query tokens x the query heads of
  one KV head and walks that request's KV through the block table), with a
  split-KV variant plus a reduction for small decode-only batches; a mixed
  step's decode rows and prefill chunks run as two launches of it. No host
  synchronisation: safe inside CUDA graphs.
"""

import math

import torch

try:  # Triton is only present on the CUDA machine.
    import triton
    import triton.language as tl
    HAVE_TRITON = True
    TRITON_VERSION = triton.__version__
except Exception:  # ImportError, or a broken install
    triton = None
    tl = None
    HAVE_TRITON = False
    TRITON_VERSION = None


def dense_reference(q_list, k_list, v_list, scale):
    """Reference without paging: per request q [q_len, H, D] and the whole
    contiguous context k, v [seq_len, KVH, D]; returns a list of [q_len, H, D]."""
    outs = []
    for q, k, v in zip(q_list, k_list, v_list):
        q_len, H, D = q.shape
        seq_len, KVH, _ = k.shape
        G = H // KVH
        kk = k.float().repeat_interleave(G, dim=1)  # [S, H, D]
        vv = v.float().repeat_interleave(G, dim=1)
        s = torch.einsum("qhd,khd->hqk", q.float(), kk) * scale
        qpos = torch.arange(seq_len - q_len, seq_len, device=q.device).view(q_len, 1)
        kpos = torch.arange(seq_len, device=q.device).view(1, seq_len)
        s = s.masked_fill((kpos > qpos).unsqueeze(0), float("-inf"))
        p = torch.softmax(s, dim=-1)
        outs.append(torch.einsum("hqk,khd->qhd", p, vv).to(q.dtype))
    return outs


def paged_attention_torch(q, k_cache, v_cache, block_table, qsl_cpu, seq_lens_cpu, num_reqs, scale, out=None):
    """Per-request exact attention. qsl_cpu / seq_lens_cpu are host sequences
    (numpy or lists); block_table is a tensor on q's device."""
    T, H, D = q.shape
    _, BS, KVH, _ = k_cache.shape
    G = H // KVH
    if out is None:
        out = torch.empty_like(q)
    for b in range(num_reqs):
        q0, q1 = int(qsl_cpu[b]), int(qsl_cpu[b + 1])
        q_len = q1 - q0
        if q_len == 0:
            continue
        seq_len = int(seq_lens_cpu[b])
        nblk = (seq_len + BS - 1) // BS
        blocks = block_table[b, :nblk].long()
        k = k_cache.index_select(0, blocks).reshape(nblk * BS, KVH, D)[:seq_len]
        v = v_cache.index_select(0, blocks).reshape(nblk * BS, KVH, D)[:seq_len]
        qb = q[q0:q1].float().view(q_len, KVH, G, D).permute(1, 2, 0, 3)  # [KVH, G, q, D]
        kb = k.float().permute(1, 2, 0)  # [KVH, D, S]
        vb = v.float().permute(1, 0, 2)  # [KVH, S, D]
        s = torch.matmul(qb, kb.unsqueeze(1)) * scale  # [KVH, G, q, S]
        if q_len > 1:
            qpos = torch.arange(seq_len - q_len, seq_len, device=q.device).view(q_len, 1)
            kpos = torch.arange(seq_len, device=q.device).view(1, seq_len)
            s = s.masked_fill(kpos > qpos, float("-inf"))
        p = torch.softmax(s, dim=-1)
        o = torch.matmul(p, vb.unsqueeze(1))  # [KVH, G, q, D]
        out[q0:q1] = o.permute(2, 0, 1, 3).reshape(q_len, H, D).to(q.dtype)
    return out


def _next_pow2(x):
    return 1 << (max(1, int(x)) - 1).bit_length()


# The decode attention's launch rule (TritonAttention; the worker reports it
# at handshake, PROTOCOL.md): KV tiles of DECODE_TILE_N tokens, and a
# decode-only batch's KV walk split so that its programs reach
# SPLIT_PROGRAMS_PER_SM per SM (split_count).
DECODE_TILE_N = 64
SPLIT_PROGRAMS_PER_SM = 2
MAX_SPLITS = 16


def split_count(num_seqs, kv_heads, programs, max_splits=MAX_SPLITS):
    """How many parts a decode-only batch of num_seqs requests splits each
    request's KV walk into: enough for num_seqs x kv_heads x splits programs
    to reach `programs`, rounded up to a power of two, at most max_splits; 1
    when the batch alone fills them. It depends only on the batch size, so a
    CUDA graph captured for a size stays valid for any context length."""
    want = -(-programs // max(1, num_seqs * kv_heads))
    if want <= 1:
        return 1
    return min(max_splits, _next_pow2(want))


def auto_backend(device):
    """The attention backend `auto` means on a device: triton on CUDA when
    Triton imports, else the per-request torch one."""
    return "triton" if device.type == "cuda" and HAVE_TRITON else "torch"


if HAVE_TRITON:

    # Batch-dependent integers are not specialised (Triton would otherwise
    # compile a new variant the first time a count is 1 or a multiple of 16,
    # in the middle of a measured step).
    @triton.jit(do_not_specialize=["num_seqs", "num_tokens"])
    def _paged_attn_kernel(
        q_ptr, k_ptr, v_ptr, o_ptr,
        m_ptr, l_ptr, acc_ptr,
        bt_ptr, seq_lens_ptr, qsl_ptr,
        scale, num_seqs, num_tokens, num_heads,
        q_stride_t, q_stride_h, o_stride_t, o_stride_h,
        k_stride_b, k_stride_s, k_stride_h,
        v_stride_b, v_stride_s, v_stride_h,
        bt_stride,
        BLOCK_SIZE: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, BLOCK_Q: tl.constexpr,
        HEAD_D: tl.constexpr, D_PAD: tl.constexpr, TILE_N: tl.constexpr, NUM_SPLITS: tl.constexpr,
        KVH_FIRST: tl.constexpr, ROWS: tl.constexpr,
    ):
        # KVH_FIRST: the KV heads of one query block are neighbouring
        # programs, so they read one cache block's rows together.
        if KVH_FIRST:
            kvh = tl.program_id(0)
            pid = tl.program_id(1)
        else:
            pid = tl.program_id(0)
            kvh = tl.program_id(1)
        split = tl.program_id(2)

        # Which request owns query block `pid`? Request b's blocks start at
        # qsl[b] // BLOCK_Q + b (an upper bound that keeps them disjoint);
        # binary search for the last b whose start is <= pid.
        lo = pid * 0
        hi = lo + num_seqs
        while lo < hi:
            mid = (lo + hi) // 2
            start = tl.load(qsl_ptr + mid) // BLOCK_Q + mid
            if start <= pid:
                lo = mid + 1
            else:
                hi = mid
        b = lo - 1

        q_start = tl.load(qsl_ptr + b)
        q_len = tl.load(qsl_ptr + b + 1) - q_start
        q_off = (pid - (q_start // BLOCK_Q + b)) * BLOCK_Q
        skip = q_off >= q_len
        if ROWS == 1:  # this launch runs the decode rows only
            skip = skip | (q_len != 1)
        if ROWS == 2:  # ... the others only
            skip = skip | (q_len == 1)
        if skip:
            return
        seq_len = tl.load(seq_lens_ptr + b)
        ctx = seq_len - q_len

        offs_m = tl.arange(0, BLOCK_Q * G_PAD)
        q_tok = q_off + offs_m // G_PAD
        g = offs_m % G_PAD
        head = kvh * G + g
        row_ok = (q_tok < q_len) & (g < G)
        q_pos = ctx + q_tok
        offs_d = tl.arange(0, D_PAD)
        d_ok = offs_d < HEAD_D

        tok = (q_start + q_tok).to(tl.int64)
        q = tl.load(q_ptr + tok[:, None] * q_stride_t + head[:, None] * q_stride_h + offs_d[None, :],
                    mask=row_ok[:, None] & d_ok[None, :], other=0.0)

        kv_end = tl.minimum(ctx + q_off + BLOCK_Q, seq_len)
        if NUM_SPLITS > 1:
            per = tl.cdiv(tl.cdiv(kv_end, NUM_SPLITS), TILE_N) * TILE_N
            kv_lo = split * per
            kv_hi = tl.minimum(kv_lo + per, kv_end)
        else:
            kv_lo = 0
            kv_hi = kv_end

        m_i = tl.full([BLOCK_Q * G_PAD], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_Q * G_PAD], tl.float32)
        acc = tl.zeros([BLOCK_Q * G_PAD, D_PAD], tl.float32)
        offs_n = tl.arange(0, TILE_N)
        bt_row = bt_ptr + b.to(tl.int64) * bt_stride
        for start_n in range(kv_lo, kv_hi, TILE_N):
            n = start_n + offs_n
            n_ok = n < kv_hi
            blk = tl.load(bt_row + n // BLOCK_SIZE, mask=n_ok, other=0).to(tl.int64)
            slot = (n % BLOCK_SIZE).to(tl.int64)
            k_off = blk * k_stride_b + slot * k_stride_s + kvh * k_stride_h
            k = tl.load(k_ptr + k_off[None, :] + offs_d[:, None],
                        mask=n_ok[None, :] & d_ok[:, None], other=0.0)  # [D_PAD, TILE_N]
            s = tl.dot(q, k) * scale
            ok = row_ok[:, None] & n_ok[None, :] & (n[None, :] <= q_pos[:, None])
            s = tl.where(ok, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp(s - m_use[:, None])
            alpha = tl.exp(m_i - m_use)
            l_i = l_i * alpha + tl.sum(p, 1)
            v_off = blk * v_stride_b + slot * v_stride_s + kvh * v_stride_h
            v = tl.load(v_ptr + v_off[:, None] + offs_d[None, :],
                        mask=n_ok[:, None] & d_ok[None, :], other=0.0)  # [TILE_N, D_PAD]
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new

        if NUM_SPLITS == 1:
            l_use = tl.where(l_i == 0.0, 1.0, l_i)
            out = acc / l_use[:, None]
            tl.store(o_ptr + tok[:, None] * o_stride_t + head[:, None] * o_stride_h + offs_d[None, :],
                     out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])
        else:
            pidx = ((split * num_tokens).to(tl.int64) + tok) * num_heads + head
            tl.store(m_ptr + pidx, m_i, mask=row_ok)
            tl.store(l_ptr + pidx, l_i, mask=row_ok)
            tl.store(acc_ptr + pidx[:, None] * D_PAD + offs_d[None, :], acc, mask=row_ok[:, None])

    @triton.jit(do_not_specialize=["num_tokens"])
    def _split_reduce_kernel(
        m_ptr, l_ptr, acc_ptr, o_ptr, num_tokens, num_heads, o_stride_t, o_stride_h,
        NUM_SPLITS: tl.constexpr, HEAD_D: tl.constexpr, D_PAD: tl.constexpr,
    ):
        t = tl.program_id(0)
        h = tl.program_id(1)
        offs_s = tl.arange(0, NUM_SPLITS)
        offs_d = tl.arange(0, D_PAD)
        pidx = (offs_s.to(tl.int64) * num_tokens + t) * num_heads + h
        m = tl.load(m_ptr + pidx)
        l = tl.load(l_ptr + pidx)
        m_max = tl.max(m, 0)
        m_use = tl.where(m_max == float("-inf"), 0.0, m_max)
        w = tl.exp(m - m_use)
        l_tot = tl.sum(l * w, 0)
        acc = tl.load(acc_ptr + pidx[:, None] * D_PAD + offs_d[None, :])
        out = tl.sum(acc * w[:, None], 0) / tl.where(l_tot == 0.0, 1.0, l_tot)
        tl.store(o_ptr + t.to(tl.int64) * o_stride_t + h * o_stride_h + offs_d, out.to(o_ptr.dtype.element_ty),
                 mask=offs_d < HEAD_D)


class LaunchConfig:
    """One launch configuration of the paged kernel: KV tokens per tile,
    warps and software-pipeline stages (None: Triton's default)."""

    __slots__ = ("tile_n", "num_warps", "num_stages", "kvh_first")

    def __init__(self, tile_n, num_warps, num_stages=None, kvh_first=True):
        self.tile_n, self.num_warps, self.num_stages = tile_n, num_warps, num_stages
        self.kvh_first = kvh_first

    def kwargs(self):
        kw = {"num_warps": self.num_warps}
        if self.num_stages is not None:
            kw["num_stages"] = self.num_stages
        return kw


# Rows a launch runs (the kernel's ROWS).
ALL_ROWS, DECODE_ROWS, PREFILL_ROWS = 0, 1, 2


class TritonAttention:
    """Launch configuration and split-KV scratch buffers for one model.

    Decode-only batches run one launch of 16-row tiles (a request's query
    heads of one KV head), splitting the KV walk at small batches. Other
    steps run two launches by default (split_mixed): the decode rows with the
    decode tiles, then the prefill chunks with 64-row tiles, so that a decode
    row riding in a mixed step does not pay a chunk's tile.
    The launch configurations are the best of `profile_decode.py
    --attn-sweep` on an H200 (B=256 and B=64 at context 1,024, and a mixed
    batch, for groups of 4 and 7 query heads): 64-token KV tiles, 4 warps,
    3 stages, KV heads as the fastest grid axis.
    """

    def __init__(self, num_heads, num_kv_heads, head_dim, block_size, device, max_decode_batch,
                 decode_cfg=None, prefill_cfg=None, split_mixed=True):
        if not HAVE_TRITON:
            raise RuntimeError("triton is not importable")
        self.H, self.KVH, self.D = num_heads, num_kv_heads, head_dim
        self.G = num_heads // num_kv_heads
        self.G_PAD = _next_pow2(self.G)
        self.D_PAD = max(16, _next_pow2(head_dim))
        self.block_size = block_size
        props = torch.cuda.get_device_properties(device)
        self.num_sms = props.multi_processor_count
        self.split_programs = SPLIT_PROGRAMS_PER_SM * self.num_sms
        # Rows of BLOCK_Q*G_PAD: at least 16 (tl.dot), 64 for prefill tiles.
        self.bq_decode = max(1, 16 // self.G_PAD)
        self.bq_prefill = max(1, 64 // self.G_PAD)
        self.decode_cfg = decode_cfg or LaunchConfig(DECODE_TILE_N, 4, 3)
        self.prefill_cfg = prefill_cfg or LaunchConfig(64, 4, 3)
        self.split_mixed = split_mixed
        rows = 1
        for bsz in range(1, max_decode_batch + 1):
            s = self.num_splits(bsz)
            if s > 1:
                rows = max(rows, s * bsz)
        self.m_buf = torch.empty(rows * num_heads, dtype=torch.float32, device=device)
        self.l_buf = torch.empty(rows * num_heads, dtype=torch.float32, device=device)
        self.acc_buf = torch.empty(rows * num_heads * self.D_PAD, dtype=torch.float32, device=device)
        self.split_rows = rows

    def num_splits(self, num_seqs):
        """Split the KV walk of a decode-only batch when (B x KVH) programs
        would leave SMs idle (split_count)."""
        return split_count(num_seqs, self.KVH, self.split_programs)

    def decode_rule(self):
        """The decode launch rule, as the ready message reports it
        (PROTOCOL.md): the KV tile, and split_count's target programs, cap
        and rounding."""
        return {"kv_tile_tokens": self.decode_cfg.tile_n, "split_programs": self.split_programs,
                "split_max": MAX_SPLITS, "split_rounding": "pow2"}

    def __call__(self, q, k_cache, v_cache, block_table, seq_lens, qsl, num_seqs, max_q_len, scale, out=None,
                 splits=None):
        """splits: force a decode batch's KV split count (profiling); None:
        num_splits."""
        T = q.shape[0]
        if out is None:
            out = torch.empty_like(q)
        args = (q, k_cache, v_cache, block_table, seq_lens, qsl, num_seqs, scale, out)
        if max_q_len == 1:
            if splits is None:
                splits = self.num_splits(num_seqs)
            if splits > 1 and splits * T > self.split_rows:
                splits = 1
            self._launch(args, self.decode_cfg, self.bq_decode, ALL_ROWS, splits)
        elif self.split_mixed:
            self._launch(args, self.decode_cfg, self.bq_decode, DECODE_ROWS, 1)
            self._launch(args, self.prefill_cfg, self.bq_prefill, PREFILL_ROWS, 1)
        else:
            self._launch(args, self.prefill_cfg, self.bq_prefill, ALL_ROWS, 1)
        return out

    def _launch(self, args, cfg, bq, rows, splits):
        q, k_cache, v_cache, block_table, seq_lens, qsl, num_seqs, scale, out = args
        T = q.shape[0]
        blocks = T // bq + num_seqs
        grid = (self.KVH, blocks, splits) if cfg.kvh_first else (blocks, self.KVH, splits)
        _paged_attn_kernel[grid](
            q, k_cache, v_cache, out,
            self.m_buf, self.l_buf, self.acc_buf,
            block_table, seq_lens, qsl,
            scale, num_seqs, T, self.H,
            q.stride(0), q.stride(1), out.stride(0), out.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
            block_table.stride(0),
            BLOCK_SIZE=self.block_size, G=self.G, G_PAD=self.G_PAD, BLOCK_Q=bq,
            HEAD_D=self.D, D_PAD=self.D_PAD, TILE_N=cfg.tile_n, NUM_SPLITS=splits,
            KVH_FIRST=cfg.kvh_first, ROWS=rows, **cfg.kwargs(),
        )
        if splits > 1:
            _split_reduce_kernel[(T, self.H)](
                self.m_buf, self.l_buf, self.acc_buf, out, T, self.H, out.stride(0), out.stride(1),
                NUM_SPLITS=splits, HEAD_D=self.D, D_PAD=self.D_PAD, num_warps=4,
            )


def softmax_scale(head_dim):
    return 1.0 / math.sqrt(head_dim)

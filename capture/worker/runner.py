"""The model runner: builds the model and the paged KV cache, keeps the
persistent batch, turns each `step` message into model inputs, runs the
forward pass (CUDA graph or eager), samples, and times every phase."""

import os
import time

import numpy as np
import torch

import attention
from batch import InputBatch, RequestState
from graphs import FullGraph, PiecewiseGraph
from config import CUDA_MARGIN, GiB, ConfigError
from model import AttnMeta, LlamaModel


class StepError(Exception):
    """The step message is inconsistent with the protocol or the worker state."""


def _gib(x):
    return "%.2f GiB" % (x / GiB)


def _cpu_mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _check_list(v, what, elem=int):
    if not isinstance(v, list):
        raise StepError("%s must be a list, got %s" % (what, type(v).__name__))
    return v


def _check_int(v, what, lo=None):
    if isinstance(v, bool) or not isinstance(v, int):
        raise StepError("%s must be an integer, got %r" % (what, v))
    if lo is not None and v < lo:
        raise StepError("%s must be >= %d, got %d" % (what, lo, v))
    return v


def _check_str(v, what):
    if not isinstance(v, str):
        raise StepError("%s must be a string, got %r" % (what, v))
    return v


def _num(v, what, default):
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise StepError("%s must be a number, got %r" % (what, v))
    return float(v)


class ModelRunner:
    def __init__(self, ecfg, pad_eager_sizes=None, log=None):
        """pad_eager_sizes: tests only: pad batches to these sizes (decode
        rows, or tokens of other steps) and run eagerly (exercises graph
        padding without CUDA)."""
        t_build0 = time.monotonic_ns()
        self.log = log or (lambda s: None)
        self.ecfg = ecfg
        m = self.mcfg = ecfg.model
        dev = torch.device(ecfg.device)
        if dev.type == "cuda":
            if not torch.cuda.is_available():
                raise ConfigError("device %r requested but torch.cuda.is_available() is false "
                                  "(torch %s); use device 'cpu'" % (ecfg.device, torch.__version__))
            if dev.index is None:
                dev = torch.device("cuda", torch.cuda.current_device())
            torch.cuda.set_device(dev)
        self.device = dev
        self.is_cuda = dev.type == "cuda"

        be = ecfg.attention_backend
        if be == "auto":
            be = attention.auto_backend(dev)
        if be == "triton" and not self.is_cuda:
            raise ConfigError("attention_backend 'triton' needs device cuda; use 'torch' or 'auto' on cpu")
        if be == "triton" and not attention.HAVE_TRITON:
            raise ConfigError("attention_backend 'triton' requested but triton does not import")
        self.backend = be

        # ---- memory check before any allocation ----
        bs = ecfg.block_size
        per_block = m.kv_bytes_per_block(bs)
        wbytes = m.weight_bytes()
        act = ecfg.activation_bytes()
        tables = ecfg.max_num_seqs * ecfg.max_model_len * 4 * 2
        if self.is_cuda:
            free, total = torch.cuda.mem_get_info(dev)
            margin = CUDA_MARGIN
            where = "GPU %s" % torch.cuda.get_device_name(dev)
        else:
            free = _cpu_mem_available()
            total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            margin = 0
            where = "host memory"
        fixed = wbytes + act + margin + (0 if self.is_cuda else tables)
        if ecfg.num_gpu_blocks == 0:
            budget = int(free * ecfg.gpu_memory_utilization) - fixed
            nblocks = budget // per_block - 1
            if nblocks < 1:
                raise ConfigError(
                    "model %s does not fit: weights %s + activations %s + margin %s leave no room for KV "
                    "blocks in %s of %s free (gpu_memory_utilization %.2f); use a smaller model, lower "
                    "max_num_batched_tokens/max_num_seqs, or a device with more memory"
                    % (m.preset, _gib(wbytes), _gib(act), _gib(margin), _gib(free * ecfg.gpu_memory_utilization),
                       where, ecfg.gpu_memory_utilization))
        else:
            nblocks = ecfg.num_gpu_blocks
            need = fixed + (nblocks + 1) * per_block
            if need > free:
                fit = (free - fixed) // per_block - 1
                if fit >= 1:
                    hint = "lower num_gpu_blocks to at most %d (or 0 for as many as fit)" % fit
                else:
                    hint = ("the weights and activation workspace alone (%s) do not fit: use a smaller model "
                            "or lower max_num_batched_tokens/max_num_seqs" % _gib(fixed))
                raise ConfigError(
                    "config does not fit in %s: needs %s (weights %s, KV cache %s for %d blocks of %d tokens "
                    "at %d bytes each, activations %s, margin %s) but only %s is free; %s"
                    % (where, _gib(need), _gib(wbytes), _gib((nblocks + 1) * per_block), nblocks, bs, per_block,
                       _gib(act), _gib(margin), _gib(free), hint))
        self.num_blocks = nblocks
        self.memory = {"free_bytes_before": int(free), "total_bytes": int(total),
                       "estimated_bytes": int(fixed + (nblocks + 1) * per_block)}

        # ---- build ----
        self.max_decode = ecfg.max_num_seqs
        tattn = None
        if be == "triton":
            tattn = attention.TritonAttention(m.heads, m.kv_heads, m.head_dim, bs, dev, self.max_decode)
        self.model = LlamaModel(m, ecfg.max_model_len, dev, ecfg.seed, triton_attn=tattn, fused=be == "triton")
        self.weight_bytes = self.model.weight_bytes()
        # One extra scratch block (id num_blocks) for CUDA-graph padding rows.
        kv_shape = (m.layers, nblocks + 1, bs, m.kv_heads, m.head_dim)
        self.k_cache = torch.zeros(kv_shape, dtype=m.torch_dtype, device=dev)
        self.v_cache = torch.zeros(kv_shape, dtype=m.torch_dtype, device=dev)
        self.kv_bytes = 2 * self.k_cache.numel() * self.k_cache.element_size()
        self.scratch_slot = nblocks * bs

        pin = self.is_cuda
        self.batch = InputBatch(ecfg.max_num_seqs, ecfg.max_model_len, ecfg.max_blocks_per_req, dev, pin)
        self.requests = {}  # req_id -> RequestState (running and preempted)
        T = max(ecfg.max_num_batched_tokens, ecfg.max_num_seqs)
        self.max_tokens_buf = T
        # Persistent host (pinned) and device input buffers.
        self.input_ids_cpu = torch.zeros(T, dtype=torch.int64, pin_memory=pin)
        self.positions_cpu = torch.zeros(T, dtype=torch.int64, pin_memory=pin)
        self.slots_cpu = torch.zeros(T, dtype=torch.int64, pin_memory=pin)
        self.qsl_cpu = torch.zeros(ecfg.max_num_seqs + 1, dtype=torch.int32, pin_memory=pin)
        self.seq_lens_cpu = torch.zeros(ecfg.max_num_seqs, dtype=torch.int32, pin_memory=pin)
        self.input_ids_np = self.input_ids_cpu.numpy()
        self.positions_np = self.positions_cpu.numpy()
        self.slots_np = self.slots_cpu.numpy()
        self.qsl_np = self.qsl_cpu.numpy()
        self.seq_lens_np = self.seq_lens_cpu.numpy()
        self.input_ids = torch.zeros(T, dtype=torch.int64, device=dev)
        self.positions = torch.zeros(T, dtype=torch.int64, device=dev)
        self.slots = torch.zeros(T, dtype=torch.int64, device=dev)
        self.qsl = torch.zeros(ecfg.max_num_seqs + 1, dtype=torch.int32, device=dev)
        self.seq_lens = torch.zeros(ecfg.max_num_seqs, dtype=torch.int32, device=dev)
        self.arange_np = np.arange(T + ecfg.max_num_seqs + 1, dtype=np.int64)

        self.default_gen = torch.Generator(device=dev)
        self.default_gen.manual_seed(ecfg.seed + 1)
        self.last_logits = None  # kept for tests
        if self.is_cuda:
            torch.cuda.synchronize(dev)
        self.build_ns = time.monotonic_ns() - t_build0

        # ---- CUDA graphs ----
        # Decode-only batches replay a full graph of their padded batch size;
        # any other step of up to the largest size replays the graphs of its
        # padded token count, piecewise (attention eager between them) or
        # full (cuda_graph_mode): run eagerly, a small step is bound by
        # launching tens of kernels a layer from Python, and its time is the
        # host's jitter rather than the GPU's work.
        self.graph_mode = ecfg.cuda_graph_mode
        self.graphs = {}
        self.graph_sizes = []
        self.pad_sizes = []
        self.mixed_graphs = {}
        self.mixed_graph_sizes = []
        self.pad_mixed_sizes = []
        self.graph_capture_ns = 0
        if self.is_cuda and ecfg.cuda_graph_sizes:
            if be != "triton":
                self.log("cuda_graph_sizes ignored: attention backend %s is not graph-safe" % be)
            else:
                t0 = time.monotonic_ns()
                self.graph_pool = torch.cuda.graph_pool_handle()
                self._stream = torch.cuda.Stream(self.device)
                self._capture_graphs([s for s in ecfg.cuda_graph_sizes if s <= ecfg.max_num_seqs])
                self._capture_mixed_graphs([s for s in ecfg.cuda_graph_sizes if self._mixed_size_ok(s)])
                self.graph_capture_ns = time.monotonic_ns() - t0
        elif ecfg.cuda_graph_sizes and not self.is_cuda:
            self.log("cuda_graph_sizes ignored on device cpu")
        if pad_eager_sizes:
            self.pad_sizes = sorted(pad_eager_sizes)
            self.pad_mixed_sizes = [s for s in self.pad_sizes if self._mixed_size_ok(s)]
        t_w = time.monotonic_ns()
        self._warmup()
        self.warmup_ns = time.monotonic_ns() - t_w

    def _warmup(self):
        """Run the eager prefill/mixed and decode shapes and every sampling
        path once, on the scratch block only, so Triton JIT compilation, cuBLAS
        and lazy CUDA module loading happen before `ready` instead of inside
        the first measured steps."""
        b = self.batch
        bs = self.ecfg.block_size
        b.block_table_gpu.fill_(self.num_blocks)
        q0 = min(17, self.ecfg.max_model_len, self.ecfg.max_num_batched_tokens - 1)
        shapes = [[q0, 1], [1, 1, 1]] if q0 > 1 else [[1, 1, 1]]
        for qlens in shapes:
            n = len(qlens)
            if n > self.ecfg.max_num_seqs:
                continue
            T = sum(qlens)
            pos = np.concatenate([np.arange(q) for q in qlens])
            self.positions_np[:T] = pos
            self.input_ids_np[:T] = 0
            self.slots_np[:T] = self.num_blocks * bs + pos % bs
            self.qsl_np[0] = 0
            self.qsl_np[1:n + 1] = np.cumsum(qlens)
            self.seq_lens_np[:n] = qlens
            self._copy_inputs(T, n)
            meta = AttnMeta(n, T, max(qlens), self.qsl[:n + 1], self.seq_lens[:n], b.block_table_gpu[:n],
                            self.slots[:T], self.qsl_np, self.seq_lens_np)
            hidden = self.model.forward(self.input_ids[:T], self.positions[:T], meta, self.k_cache, self.v_cache)
            logits = self.model.logits(hidden.index_select(0, self.qsl[1:n + 1].long() - 1))
            b.temperature[:n] = 0.7
            b.top_k[:n] = 0
            b.top_k[0] = 50
            b.top_p[:n] = 1.0
            b.top_p[0] = 0.9
            self.sample(logits, n).tolist()
            b.temperature[:n] = 0.0
            self.sample(logits, n).tolist()
            b.top_k[:n] = 0
            b.top_p[:n] = 1.0
            warm = torch.Generator(device=self.device)
            warm.manual_seed(0)
            torch.empty(8, device=self.device).exponential_(generator=warm)
        b.block_table_gpu.zero_()
        self.k_cache[:, self.num_blocks].zero_()
        self.v_cache[:, self.num_blocks].zero_()
        if self.is_cuda:
            torch.cuda.synchronize(self.device)

    # ------------------------------------------------------------------ graphs
    def _fill_padding(self, start, end):
        """Rows/tokens start..end-1 become dummy decode requests: token 0 at
        position 0, written to and reading only the scratch slot."""
        self.input_ids_np[start:end] = 0
        self.positions_np[start:end] = 0
        self.slots_np[start:end] = self.scratch_slot
        self.seq_lens_np[start:end] = 1
        self.qsl_np[start + 1:end + 1] = self.arange_np[start + 1:end + 1]

    def _copy_inputs(self, num_tokens, num_reqs):
        nb = self.is_cuda
        self.input_ids[:num_tokens].copy_(self.input_ids_cpu[:num_tokens], non_blocking=nb)
        self.positions[:num_tokens].copy_(self.positions_cpu[:num_tokens], non_blocking=nb)
        self.slots[:num_tokens].copy_(self.slots_cpu[:num_tokens], non_blocking=nb)
        self.qsl[:num_reqs + 1].copy_(self.qsl_cpu[:num_reqs + 1], non_blocking=nb)
        self.seq_lens[:num_reqs].copy_(self.seq_lens_cpu[:num_reqs], non_blocking=nb)

    def _mixed_size_ok(self, size):
        """A step of more than one token, up to the batched-token budget;
        its dummy request's context must fit one block-table row."""
        e = self.ecfg
        return 2 <= size <= min(e.max_num_batched_tokens, e.max_blocks_per_req * e.block_size)

    def _mixed_rows(self, size, num_reqs, num_tokens):
        """The request rows attention runs a padded mixed step of `size`
        tokens with. A full graph fixes them at capture (its launch grid and
        loop bounds depend on them; a step's unused rows hold no tokens); a
        piecewise one runs attention on the step's own requests and the
        padding's dummy request."""
        if self.graph_mode == "piecewise":
            return num_reqs + (size > num_tokens)
        return min(size, self.ecfg.max_num_seqs)

    def _fill_mixed_padding(self, num_reqs, T, size, rows):
        """Tokens T..size-1 become one dummy request (row num_reqs) at
        position 0 of the scratch block; rows after it hold no tokens."""
        if size > T:
            self.input_ids_np[T:size] = 0
            self.positions_np[T:size] = 0
            self.slots_np[T:size] = self.scratch_slot
            self.seq_lens_np[num_reqs] = size - T
            self.batch.block_table_np[num_reqs, :-(-(size - T) // self.ecfg.block_size)] = self.num_blocks
            num_reqs += 1
        self.qsl_np[num_reqs:rows + 1] = size
        self.seq_lens_np[num_reqs:rows] = 1

    def _capture(self, size, rows, max_q, stream, kind=FullGraph):
        """Captures the forward pass of `size` tokens in `rows` rows, from
        the inputs already in the device buffers."""
        meta = AttnMeta(rows, size, max_q, self.qsl[:rows + 1], self.seq_lens[:rows],
                        self.batch.block_table_gpu[:rows], self.slots[:size], self.qsl_np, self.seq_lens_np)
        return kind(self.model, meta, self.input_ids[:size], self.positions[:size], self.k_cache, self.v_cache,
                    self.graph_pool, stream)

    def _capture_graphs(self, sizes):
        # Padding rows' block-table rows point at the scratch block.
        self.batch.block_table_gpu.fill_(self.num_blocks)
        for size in sorted(sizes, reverse=True):
            self._fill_padding(0, size)
            self.qsl_np[0] = 0
            self._copy_inputs(size, size)
            self.graphs[size] = self._capture(size, size, 1, self._stream)
        torch.cuda.synchronize(self.device)
        self.batch.block_table_gpu.zero_()
        self.graph_sizes = sorted(self.graphs)

    def _capture_mixed_graphs(self, sizes):
        """Captured with every token in one dummy request; a step's own
        qsl, seq_lens, block table and slots are in the same buffers when the
        graph replays."""
        if not sizes:
            return
        kind = PiecewiseGraph if self.graph_mode == "piecewise" else FullGraph
        self.batch.block_table_gpu.fill_(self.num_blocks)
        for size in sorted(sizes, reverse=True):
            rows = self._mixed_rows(size, 0, 0)
            self.qsl_np[0] = 0
            self._fill_mixed_padding(0, 0, size, rows)
            self._copy_inputs(size, rows)
            self.mixed_graphs[size] = self._capture(size, rows, size, self._stream, kind)
        torch.cuda.synchronize(self.device)
        self.batch.block_table_gpu.zero_()
        self.batch.block_table_np[0] = 0
        self.mixed_graph_sizes = sorted(self.mixed_graphs)

    # ------------------------------------------------------------ state update
    def _parse_sampling(self, sp, rid):
        if sp is None:
            sp = {}
        if not isinstance(sp, dict):
            raise StepError("request %s: sampling_params must be a map" % rid)
        temp = _num(sp.get("temperature"), "sampling_params.temperature", 0.0)
        top_p = _num(sp.get("top_p"), "sampling_params.top_p", 1.0)
        top_k = sp.get("top_k")
        top_k = 0 if top_k is None else _check_int(top_k, "sampling_params.top_k")
        if top_k < 0:
            top_k = 0
        seed = sp.get("seed")
        if seed is not None:
            _check_int(seed, "sampling_params.seed")
        mt = sp.get("max_tokens")
        if mt is not None:
            _check_int(mt, "sampling_params.max_tokens")
        if temp < 0 or not (0.0 < top_p <= 1.0):
            raise StepError("request %s: temperature must be >= 0 and top_p in (0, 1]" % rid)
        return temp, top_p, top_k, seed, mt

    def _int_array(self, v, what):
        arr = np.asarray(v) if v else np.zeros(0, dtype=np.int64)
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise StepError("%s must be a flat list of integers" % what)
        return arr.astype(np.int64, copy=False)

    def _check_blocks(self, blocks, rid):
        arr = self._int_array(blocks, "request %s block ids" % rid)
        if arr.size and (arr.min() < 0 or arr.max() >= self.num_blocks):
            raise StepError("request %s: block id out of range [0, %d)" % (rid, self.num_blocks))
        return arr

    def update_states(self, msg):
        b = self.batch
        finished = msg.get("finished_req_ids") or []
        _check_list(finished, "finished_req_ids")
        for rid in finished:
            self.requests.pop(rid, None)
            b.remove_request(rid)
        preempted = msg.get("preempted_req_ids") or []
        _check_list(preempted, "preempted_req_ids")
        for rid in preempted:
            b.remove_request(rid)

        nst = msg.get("num_scheduled_tokens")
        if not isinstance(nst, dict):
            raise StepError("num_scheduled_tokens must be a map of req_id -> int")
        # Requests in the batch but not scheduled now leave it (state kept).
        for rid in [r for r in b.req_id_to_index if r not in nst]:
            b.remove_request(rid)

        to_add = []
        new_reqs = msg.get("scheduled_new_reqs") or []
        _check_list(new_reqs, "scheduled_new_reqs")
        vocab = self.mcfg.vocab
        seen = set()
        for nr in new_reqs:
            if not isinstance(nr, dict):
                raise StepError("scheduled_new_reqs entries must be maps")
            rid = _check_str(nr.get("req_id"), "new request req_id")
            if rid in seen:
                raise StepError("request %s appears twice in this step" % rid)
            seen.add(rid)
            if rid in b.req_id_to_index:
                raise StepError("new request %s is already running (send it as a cached request)" % rid)
            prompt = nr.get("prompt_token_ids")
            _check_list(prompt, "request %s prompt_token_ids" % rid)
            if not prompt:
                raise StepError("request %s: empty prompt_token_ids" % rid)
            if len(prompt) > self.ecfg.max_model_len:
                raise StepError("request %s: prompt of %d tokens exceeds max_model_len %d"
                                % (rid, len(prompt), self.ecfg.max_model_len))
            parr = self._int_array(prompt, "request %s prompt_token_ids" % rid)
            if parr.min() < 0 or parr.max() >= vocab:
                raise StepError("request %s: prompt token ids must be integers in [0, %d)" % (rid, vocab))
            blocks = _check_list(nr.get("block_ids"), "request %s block_ids" % rid)
            barr = self._check_blocks(blocks, rid)
            if len(blocks) > self.ecfg.max_blocks_per_req:
                raise StepError("request %s: %d blocks exceed max_model_len/block_size = %d"
                                % (rid, len(blocks), self.ecfg.max_blocks_per_req))
            nc = _check_int(nr.get("num_computed_tokens", 0), "request %s num_computed_tokens" % rid, lo=0)
            if nc >= len(prompt):
                raise StepError("request %s: num_computed_tokens %d must be < prompt length %d"
                                % (rid, nc, len(prompt)))
            temp, top_p, top_k, seed, mt = self._parse_sampling(nr.get("sampling_params"), rid)
            gen = None
            if seed is not None:
                gen = torch.Generator(device=self.device)
                gen.manual_seed(seed)
            st = RequestState(rid, parr.astype(np.int32), barr.tolist(), nc, temp, top_p, top_k, seed, mt, gen)
            self.requests[rid] = st
            to_add.append(st)

        cr = msg.get("scheduled_cached_reqs") or {}
        if not isinstance(cr, dict):
            raise StepError("scheduled_cached_reqs must be a map")
        ids = cr.get("req_ids") or []
        _check_list(ids, "scheduled_cached_reqs.req_ids")
        n = len(ids)
        resumed = set(cr.get("resumed_req_ids") or [])
        nct = cr.get("num_computed_tokens") or []
        nbi = cr.get("new_block_ids")
        nti = cr.get("new_token_ids")
        nout = cr.get("num_output_tokens")
        if len(nct) != n:
            raise StepError("scheduled_cached_reqs.num_computed_tokens has %d entries for %d req_ids" % (len(nct), n))
        for name, lst in (("new_block_ids", nbi), ("new_token_ids", nti), ("num_output_tokens", nout)):
            if lst is not None and (not isinstance(lst, list) or len(lst) != n):
                raise StepError("scheduled_cached_reqs.%s must be null or a list with one entry per req_id" % name)
        for i, rid in enumerate(ids):
            _check_str(rid, "scheduled_cached_reqs.req_ids entry")
            if rid in seen:
                raise StepError("request %s appears twice in this step" % (rid,))
            seen.add(rid)
            st = self.requests.get(rid)
            if st is None:
                raise StepError("cached request %s is unknown to the worker (never sent as new, or finished)"
                                % (rid,))
            nc = _check_int(nct[i], "cached request %s num_computed_tokens" % rid, lo=0)
            st.num_computed_tokens = nc
            row = b.req_id_to_index.get(rid)
            if nti is not None and nti[i]:
                toks = _check_list(nti[i], "new_token_ids of %s" % rid)
                extra = nc + len(toks) - st.num_tokens
                if extra > 0:
                    add = toks[-extra:]
                    if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 or t >= vocab for t in add):
                        raise StepError("request %s: new_token_ids must be integers in [0, %d)" % (rid, vocab))
                    if st.num_tokens + extra > self.ecfg.max_model_len:
                        raise StepError("request %s: tokens exceed max_model_len" % rid)
                    st.output_token_ids.extend(add)
                    if row is not None:
                        s = int(b.num_tokens[row])
                        b.token_ids[row, s:s + extra] = add
                        b.num_tokens[row] = s + extra
            newb = nbi[i] if nbi is not None else None
            is_resumed = rid in resumed
            if newb is not None:
                _check_list(newb, "new_block_ids of %s" % rid)
                self._check_blocks(newb, rid)
            if is_resumed:
                st.block_ids = list(newb or [])
            elif newb:
                st.block_ids.extend(newb)
            if len(st.block_ids) > self.ecfg.max_blocks_per_req:
                raise StepError("request %s: %d blocks exceed max_model_len/block_size = %d"
                                % (rid, len(st.block_ids), self.ecfg.max_blocks_per_req))
            if row is None or is_resumed:
                if row is not None:
                    b.remove_request(rid)
                to_add.append(st)
            else:
                b.num_computed_tokens[row] = nc
                if newb:
                    b.append_blocks(row, newb)

        for st in to_add:
            if b.num_reqs >= b.max_num_reqs:
                raise StepError("more than max_num_seqs=%d requests scheduled" % b.max_num_reqs)
            b.add_request(st)
        b.condense()

    # ------------------------------------------------------------- the step
    def prepare_inputs(self, msg):
        b = self.batch
        num_reqs = b.num_reqs
        nst = msg["num_scheduled_tokens"]
        if num_reqs == 0:
            raise StepError("step schedules no requests")
        req_ids = b.req_ids[:num_reqs]
        missing = [r for r in req_ids if r not in nst]
        if missing:
            raise StepError("requests without num_scheduled_tokens: %s" % ", ".join(map(str, missing[:8])))
        if len(nst) != num_reqs:
            extra = [r for r in nst if r not in b.req_id_to_index]
            raise StepError("num_scheduled_tokens names requests that are neither new nor cached: %s"
                            % ", ".join(map(str, extra[:8])))
        try:
            ns = np.fromiter((nst[r] for r in req_ids), dtype=np.int64, count=num_reqs)
        except (TypeError, ValueError, OverflowError):
            raise StepError("num_scheduled_tokens values must be integers")
        if any(isinstance(nst[r], bool) or not isinstance(nst[r], int) for r in req_ids):
            raise StepError("num_scheduled_tokens values must be integers")
        total = int(ns.sum())
        tnst = _check_int(msg.get("total_num_scheduled_tokens"), "total_num_scheduled_tokens", lo=1)
        if tnst != total:
            raise StepError("total_num_scheduled_tokens %d != sum of num_scheduled_tokens %d" % (tnst, total))
        if ns.min() < 1:
            raise StepError("every scheduled request needs num_scheduled_tokens >= 1")
        if total > self.ecfg.max_num_batched_tokens:
            raise StepError("total_num_scheduled_tokens %d exceeds max_num_batched_tokens %d"
                            % (total, self.ecfg.max_num_batched_tokens))
        nc = b.num_computed_tokens[:num_reqs].astype(np.int64)
        end = nc + ns
        bad = np.nonzero((end > b.num_tokens[:num_reqs]) | (end > self.ecfg.max_model_len)
                         | (end > b.num_blocks[:num_reqs].astype(np.int64) * self.ecfg.block_size))[0]
        if bad.size:
            i = int(bad[0])
            raise StepError("request %s: computing tokens [%d, %d) but the worker knows %d tokens, max_model_len "
                            "is %d and its block table covers %d tokens"
                            % (req_ids[i], nc[i], end[i], b.num_tokens[i], self.ecfg.max_model_len,
                               b.num_blocks[i] * self.ecfg.block_size))

        # Flattened per-token inputs (vectorised as in vLLM's _prepare_inputs).
        T = total
        req_idx = np.repeat(self.arange_np[:num_reqs], ns)
        cu = np.cumsum(ns)
        within = self.arange_np[:T] - np.repeat(cu - ns, ns)
        pos = nc[req_idx] + within
        self.positions_np[:T] = pos
        self.input_ids_np[:T] = b.token_ids.reshape(-1)[req_idx * b.max_model_len + pos]
        bs = self.ecfg.block_size
        blk = b.block_table_np.reshape(-1)[req_idx * b.max_blocks + pos // bs]
        self.slots_np[:T] = blk.astype(np.int64) * bs + pos % bs
        self.qsl_np[0] = 0
        self.qsl_np[1:num_reqs + 1] = cu
        self.seq_lens_np[:num_reqs] = end

        size, rows = 0, num_reqs
        if T == num_reqs:  # decode only
            for s in self.graph_sizes or self.pad_sizes:
                if s >= num_reqs:
                    size = rows = s
                    break
            if size > num_reqs:
                self._fill_padding(num_reqs, size)
        else:
            for s in self.mixed_graph_sizes or self.pad_mixed_sizes:
                if s >= T and num_reqs + (s > T) <= min(s, self.ecfg.max_num_seqs):
                    size, rows = s, self._mixed_rows(s, num_reqs, T)
                    break
            if size:
                self._fill_mixed_padding(num_reqs, T, size, rows)
        b.commit_block_table(num_reqs + (T > num_reqs and size > T))  # the dummy request's row
        self._copy_inputs(size or T, rows)
        return num_reqs, T, size, rows, int(ns.max()), end

    def execute(self, msg):
        """Runs one step. Returns (sampled dict, timing dict)."""
        t0 = time.monotonic_ns()
        self.update_states(msg)
        num_reqs, T, size, rows, max_q, seq_end = self.prepare_inputs(msg)
        t1 = time.monotonic_ns()

        if self.is_cuda:
            ev0 = torch.cuda.Event(enable_timing=True)
            ev1 = torch.cuda.Event(enable_timing=True)
            ev0.record()
        decode_only = T == num_reqs
        graphs = self.graphs if decode_only else self.mixed_graphs
        use_graph = size in graphs
        n = size or T
        meta = AttnMeta(rows, n, max_q, self.qsl[:rows + 1], self.seq_lens[:rows],
                        self.batch.block_table_gpu[:rows], self.slots[:n], self.qsl_np, self.seq_lens_np)
        if use_graph:
            hidden = graphs[size].run(meta)
        else:
            hidden = self.model.forward(self.input_ids[:n], self.positions[:n], meta, self.k_cache, self.v_cache)
        if decode_only:
            hidden = hidden[:num_reqs]
        else:
            hidden = hidden.index_select(0, self.qsl[1:num_reqs + 1].long() - 1)
        logits = self.model.logits(hidden)
        if self.is_cuda:
            ev1.record()
            ev2 = torch.cuda.Event(enable_timing=True)
        t2 = time.monotonic_ns()

        will_sample = seq_end >= self.batch.num_tokens[:num_reqs]
        tok_t = self.sample(logits, num_reqs, will_sample)
        if self.is_cuda:
            ev2.record()
        tokens = tok_t.tolist()  # waits for the forward pass and the sampler
        t3 = time.monotonic_ns()
        self.last_logits = logits
        b = self.batch
        sampled = {}
        max_len = self.ecfg.max_model_len
        for i in range(num_reqs):
            rid = b.req_ids[i]
            st = self.requests[rid]
            st.num_computed_tokens = int(seq_end[i])
            b.num_computed_tokens[i] = seq_end[i]
            if will_sample[i]:
                tok = tokens[i]
                n = int(b.num_tokens[i])
                if n < max_len:  # at max_model_len the scheduler must finish it
                    st.output_token_ids.append(tok)
                    b.token_ids[i, n] = tok
                    b.num_tokens[i] = n + 1
                sampled[rid] = tok
            else:
                sampled[rid] = -1
        t4 = time.monotonic_ns()
        if self.is_cuda:
            device_ns = int(ev0.elapsed_time(ev1) * 1e6)
            sample_ns = int(ev1.elapsed_time(ev2) * 1e6) + (t4 - t3)
        else:
            device_ns = t2 - t1
            sample_ns = t4 - t2
        timing = {"prep_ns": t1 - t0, "device_ns": device_ns, "sample_ns": sample_ns,
                  "graph": size if use_graph else 0, "num_reqs": num_reqs, "num_tokens": T,
                  "padded_tokens": (size if size else T)}
        return sampled, timing

    # ------------------------------------------------------------- sampling
    def sample(self, logits, num_reqs, will_sample=None):
        """Greedy rows: argmax. Others: temperature, top-k/top-p, then the
        exponential race (argmax of p / Exp(1)), with each seeded request's own
        generator; a seeded generator only advances when its token is kept."""
        b = self.batch
        temp = b.temperature[:num_reqs]
        greedy = temp < 1e-5
        argmax = logits.argmax(dim=-1)
        if greedy.all():
            return argmax
        dev = logits.device
        t = torch.from_numpy(np.where(greedy, 1.0, temp).astype(np.float32)).to(dev)
        x = logits / t.unsqueeze(1)
        top_k = b.top_k[:num_reqs]
        top_p = b.top_p[:num_reqs]
        if (top_k > 0).any() or (top_p < 1.0).any():
            srt, idx = x.sort(dim=-1, descending=True)
            V = x.shape[1]
            k = torch.from_numpy(np.where(top_k > 0, np.minimum(top_k, V), V).astype(np.int64)).to(dev)
            ranks = torch.arange(V, device=dev).unsqueeze(0)
            drop = ranks >= k.unsqueeze(1)
            probs = torch.softmax(srt, dim=-1)
            cum = probs.cumsum(dim=-1) - probs  # mass strictly before each token
            p = torch.from_numpy(top_p.astype(np.float32)).to(dev)
            drop = drop | (cum > p.unsqueeze(1))
            drop[:, 0] = False
            srt = srt.masked_fill(drop, float("-inf"))
            x = torch.empty_like(x).scatter_(1, idx, srt)
        probs = torch.softmax(x, dim=-1)
        q = torch.empty_like(probs)
        seeded = b.generators
        unseeded = [i for i in range(num_reqs) if not greedy[i] and i not in seeded]
        if unseeded:
            if len(unseeded) == num_reqs:
                q.exponential_(generator=self.default_gen)
            else:
                for i in unseeded:
                    q[i].exponential_(generator=self.default_gen)
        for i, g in seeded.items():
            if i < num_reqs and not greedy[i] and (will_sample is None or will_sample[i]):
                q[i].exponential_(generator=g)
        sampled = (probs / q).argmax(dim=-1)
        g_t = torch.from_numpy(greedy).to(dev)
        return torch.where(g_t, argmax, sampled)

"""Persistent per-request batch state, as vLLM v1's GPUModelRunner keeps it
(CachedRequestState + InputBatch + BlockTable).

A brand-new request pays real set-up work: a state object, a batch row, its
prompt token ids and its block table copied into persistent host buffers (and
the block table later onto the device). A cached request only applies deltas.
"""

import numpy as np
import torch


class RequestState:
    __slots__ = ("req_id", "prompt_token_ids", "output_token_ids", "block_ids", "num_computed_tokens",
                 "temperature", "top_p", "top_k", "seed", "max_tokens", "generator")

    def __init__(self, req_id, prompt_token_ids, block_ids, num_computed_tokens,
                 temperature, top_p, top_k, seed, max_tokens, generator):
        self.req_id = req_id
        self.prompt_token_ids = prompt_token_ids  # np.int32 array
        self.output_token_ids = []
        self.block_ids = block_ids  # list of int
        self.num_computed_tokens = num_computed_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.seed = seed
        self.max_tokens = max_tokens
        self.generator = generator

    @property
    def num_tokens(self):
        return len(self.prompt_token_ids) + len(self.output_token_ids)


class InputBatch:
    """Rows 0..num_reqs-1 are the requests of the current step, in order.
    Removing a request leaves a hole; condense() moves the last rows into the
    holes (so rows stay dense without reordering everything)."""

    def __init__(self, max_num_reqs, max_model_len, max_blocks_per_req, device, pin_memory):
        self.max_num_reqs = max_num_reqs
        self.max_model_len = max_model_len
        self.max_blocks = max_blocks_per_req
        self.req_ids = [None] * max_num_reqs
        self.req_id_to_index = {}
        self.num_rows = 0  # rows in use including holes
        self.holes = []
        self.token_ids = np.zeros((max_num_reqs, max_model_len), dtype=np.int32)
        self.num_tokens = np.zeros(max_num_reqs, dtype=np.int32)
        self.num_prompt_tokens = np.zeros(max_num_reqs, dtype=np.int32)
        self.num_computed_tokens = np.zeros(max_num_reqs, dtype=np.int32)
        self.block_table_cpu = torch.zeros((max_num_reqs, max_blocks_per_req), dtype=torch.int32,
                                           pin_memory=pin_memory)
        self.block_table_np = self.block_table_cpu.numpy()
        self.num_blocks = np.zeros(max_num_reqs, dtype=np.int32)
        self.block_table_gpu = torch.zeros((max_num_reqs, max_blocks_per_req), dtype=torch.int32, device=device)
        self.temperature = np.zeros(max_num_reqs, dtype=np.float32)
        self.top_p = np.ones(max_num_reqs, dtype=np.float32)
        self.top_k = np.zeros(max_num_reqs, dtype=np.int32)
        self.generators = {}  # row -> torch.Generator (seeded requests)

    @property
    def num_reqs(self):
        return len(self.req_id_to_index)

    def add_request(self, st):
        if self.holes:
            row = self.holes.pop()
        else:
            row = self.num_rows
            self.num_rows += 1
        self.req_ids[row] = st.req_id
        self.req_id_to_index[st.req_id] = row
        p = len(st.prompt_token_ids)
        n = p + len(st.output_token_ids)
        self.token_ids[row, :p] = st.prompt_token_ids
        if st.output_token_ids:
            self.token_ids[row, p:n] = st.output_token_ids
        self.num_prompt_tokens[row] = p
        self.num_tokens[row] = n
        self.num_computed_tokens[row] = st.num_computed_tokens
        nb = len(st.block_ids)
        self.block_table_np[row, :nb] = st.block_ids
        self.num_blocks[row] = nb
        self.temperature[row] = st.temperature
        self.top_p[row] = st.top_p
        self.top_k[row] = st.top_k
        if st.generator is not None:
            self.generators[row] = st.generator
        else:
            self.generators.pop(row, None)
        return row

    def remove_request(self, req_id):
        row = self.req_id_to_index.pop(req_id, None)
        if row is None:
            return None
        self.req_ids[row] = None
        self.generators.pop(row, None)
        self.holes.append(row)
        return row

    def append_blocks(self, row, block_ids):
        start = int(self.num_blocks[row])
        end = start + len(block_ids)
        self.block_table_np[row, start:end] = block_ids
        self.num_blocks[row] = end

    def set_blocks(self, row, block_ids):
        nb = len(block_ids)
        self.block_table_np[row, :nb] = block_ids
        self.num_blocks[row] = nb

    def _move(self, src, dst):
        rid = self.req_ids[src]
        self.req_ids[dst] = rid
        self.req_ids[src] = None
        self.req_id_to_index[rid] = dst
        n = int(self.num_tokens[src])
        self.token_ids[dst, :n] = self.token_ids[src, :n]
        nb = int(self.num_blocks[src])
        self.block_table_np[dst, :nb] = self.block_table_np[src, :nb]
        for arr in (self.num_tokens, self.num_prompt_tokens, self.num_computed_tokens, self.num_blocks,
                    self.temperature, self.top_p, self.top_k):
            arr[dst] = arr[src]
        g = self.generators.pop(src, None)
        if g is not None:
            self.generators[dst] = g
        else:
            self.generators.pop(dst, None)

    def condense(self):
        """Fill holes with the last live rows so rows 0..num_reqs-1 are dense."""
        if not self.holes:
            return
        holes = sorted(self.holes)
        self.holes = []
        last = self.num_rows - 1
        for h in holes:
            while last >= 0 and self.req_ids[last] is None:
                last -= 1
            if last <= h:
                break
            self._move(last, h)
            last -= 1
        self.num_rows = self.num_reqs

    def commit_block_table(self, num_rows):
        """Ship the block-table rows of this step to the device (as vLLM does
        every step)."""
        self.block_table_gpu[:num_rows].copy_(self.block_table_cpu[:num_rows], non_blocking=True)

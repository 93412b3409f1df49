"""CUDA graphs of the forward pass (CUDA only).

- FullGraph: the whole forward pass of one padded size, attention included
  (decode batches; prefill and mixed steps in the `full` mode, vLLM's
  full-graph mode). Attention's launch grid is then the one it was captured
  with: a mixed graph's rows are fixed per size.
- PiecewiseGraph: the forward pass of one token count as layers + 1 graphs,
  the pieces between two attentions (model.head, model.tail), with each
  layer's attention launched eagerly between them on the step's own
  requests (vLLM V1's piecewise mode). Attention then sees the real request
  count, so its grid and KV split follow the step rather than the padded
  rows, and the pieces stay valid for any mix of prefill and decode.

Graphs sharing a pool must replay in the order they were captured; a
piecewise size's pieces always do, and one step replays one size.
"""

import torch


def _warm(model, meta, ids, pos, k_cache, v_cache, stream, times):
    """Eager passes on the capture stream: Triton JIT, cuBLAS handles and
    workspaces are created outside the capture."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(times):
            model.forward(ids, pos, meta, k_cache, v_cache)
    torch.cuda.synchronize()


class FullGraph:
    def __init__(self, model, meta, ids, pos, k_cache, v_cache, pool, stream):
        _warm(model, meta, ids, pos, k_cache, v_cache, stream, 2)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool, stream=stream):
            self.hidden = model.forward(ids, pos, meta, k_cache, v_cache)
        torch.cuda.synchronize()

    def run(self, meta):
        """Replays the graph; meta is the captured layout's (unused)."""
        self.graph.replay()
        return self.hidden


class PiecewiseGraph:
    def __init__(self, model, meta, ids, pos, k_cache, v_cache, pool, stream):
        cfg = model.cfg
        slots = meta.slot_mapping
        self.model, self.k_cache, self.v_cache = model, k_cache, v_cache
        # Attention writes here at replay; the next piece reads it.
        self.o = torch.zeros((ids.shape[0], cfg.heads, cfg.head_dim), dtype=cfg.torch_dtype, device=ids.device)
        _warm(model, meta, ids, pos, k_cache, v_cache, stream, 1)
        self.graphs, self.qs = [], []

        def piece(fn):
            # capture_begin/end rather than torch.cuda.graph: that one runs
            # gc and empties the cache around each of the many pieces.
            g = torch.cuda.CUDAGraph()
            with torch.cuda.stream(stream):
                g.capture_begin(pool=pool)
                try:
                    res = fn()
                finally:
                    g.capture_end()
            self.graphs.append(g)
            return res

        x, q = piece(lambda: model.head(ids, pos, slots, k_cache, v_cache))
        for li in range(cfg.layers):
            self.qs.append(q)
            x, q = piece(lambda: model.tail(li, self.o, x, pos, slots, k_cache, v_cache))
        self.hidden = x
        torch.cuda.synchronize()

    def run(self, meta):
        """Replays the pieces with each layer's attention on meta's layout
        (the step's requests, its padding one dummy request)."""
        self.graphs[0].replay()
        for li, q in enumerate(self.qs):
            self.model.attend(li, q, meta, self.k_cache, self.v_cache, out=self.o)
            self.graphs[li + 1].replay()
        return self.hidden

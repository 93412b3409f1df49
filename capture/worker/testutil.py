"""Message builders and attention test cases shared by test_worker.py and
selftest.py (no pytest dependency)."""

import torch


def tiny_init(**kw):
    m = dict(type="init", model="tiny", device="cpu", seed=7, num_gpu_blocks=128, block_size=4,
             max_num_seqs=8, max_num_batched_tokens=64, max_model_len=64, cuda_graph_sizes=[],
             attention_backend="auto")
    m.update(kw)
    return m


def new_req(rid, prompt, blocks, computed=0, temperature=0.0, seed=None, top_p=1.0, top_k=0):
    return {"req_id": rid, "prompt_token_ids": list(prompt), "block_ids": list(blocks),
            "num_computed_tokens": computed,
            "sampling_params": {"temperature": temperature, "top_p": top_p, "top_k": top_k,
                                "max_tokens": 16, "seed": seed}}


def step(step_id, new=(), cached=None, sched=None, finished=(), preempted=()):
    cached = cached or {}
    ids = cached.get("req_ids", [])
    cr = {"req_ids": ids, "resumed_req_ids": cached.get("resumed_req_ids", []),
          "new_token_ids": cached.get("new_token_ids"),
          "new_block_ids": cached.get("new_block_ids", [None] * len(ids)),
          "num_computed_tokens": cached.get("num_computed_tokens", []),
          "num_output_tokens": cached.get("num_output_tokens", [0] * len(ids))}
    sched = dict(sched or {})
    return {"type": "step", "step_id": step_id, "scheduled_new_reqs": list(new), "scheduled_cached_reqs": cr,
            "num_scheduled_tokens": sched, "total_num_scheduled_tokens": sum(sched.values()),
            "finished_req_ids": list(finished), "preempted_req_ids": list(preempted)}


def _paged_case(cases, dtype=torch.float32, device="cpu", block_size=4, kvh=2, heads=4, d=16, seed=0):
    """cases: list of (prefix_len, q_len). Returns inputs for paged attention
    and the per-request dense tensors."""
    g = torch.Generator().manual_seed(seed)
    num_blocks = sum(-(-(p + q) // block_size) for p, q in cases) + 3
    perm = torch.randperm(num_blocks, generator=g).tolist()  # scattered blocks
    kc = torch.randn(num_blocks, block_size, kvh, d, generator=g).to(dtype)
    vc = torch.randn(num_blocks, block_size, kvh, d, generator=g).to(dtype)
    max_blocks = max(-(-(p + q) // block_size) for p, q in cases)
    bt = torch.zeros(len(cases), max_blocks, dtype=torch.int32)
    qs, ks, vs = [], [], []
    qsl = [0]
    seq_lens = []
    nxt = 0
    for i, (p, ql) in enumerate(cases):
        s = p + ql
        nb = -(-s // block_size)
        blocks = perm[nxt:nxt + nb]
        nxt += nb
        bt[i, :nb] = torch.tensor(blocks, dtype=torch.int32)
        k = kc[blocks].reshape(-1, kvh, d)[:s]
        v = vc[blocks].reshape(-1, kvh, d)[:s]
        ks.append(k)
        vs.append(v)
        qs.append(torch.randn(ql, heads, d, generator=g).to(dtype))
        qsl.append(qsl[-1] + ql)
        seq_lens.append(s)
    q = torch.cat(qs)
    return dict(q=q.to(device), kc=kc.to(device), vc=vc.to(device), bt=bt.to(device), qsl=qsl,
                seq_lens=seq_lens), qs, ks, vs


CASES = [
    [(0, 7), (5, 3), (9, 1), (16, 1), (3, 12), (0, 1)],  # mixed: prefill chunks with cached prefixes + decode
    [(30, 1), (1, 1), (7, 1), (63, 1)],  # decode only
    [(0, 33)],  # one long first chunk
]

"""Counts the distinct experts a batch of decodes reaches, per MoE layer,
when each request decodes its prompt's last token (what a steady benchmark
step decodes) and then its own greedy outputs (what traffic decodes), on
the worker's random weights, outside the protocol:

  python3 capture/worker/routing_greedy.py [--layers 4] [--hidden 2048] [--batch 16] [--steps 10]

The shape is Qwen3-30B-A3B's routing (128 experts, top 8) on a few layers of
its hidden size, float32 on the CPU, every request recomputed in full each
step (the model's dense reference). Prints one line per step beside the
uniform-routing count, E * (1 - (1 - k/E)^batch).
"""

import argparse

import torch

from config import EngineConfig
from runner import ModelRunner
from testutil import tiny_init


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    shape = dict(layers=a.layers, hidden=a.hidden, heads=4, kv_heads=2, head_dim=64, intermediate=256, vocab=4096,
                 experts=128, top_k=8, expert_intermediate=16, dtype="float32", tie_word_embeddings=True)
    init = tiny_init(model=None, model_config=shape, max_model_len=a.prompt + a.steps + 1,
                     max_num_batched_tokens=a.prompt + a.steps + 1)
    model = ModelRunner(EngineConfig(init)).model
    last = {}  # layer -> the experts the last position picked
    for li, L in enumerate(model.layers):
        def route(x, route=L.moe.route, li=li):
            w, ids = route(x)
            last[li] = ids[-1].tolist()
            return w, ids
        L.moe.route = route
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, shape["vocab"], (a.prompt,), generator=g).tolist() for _ in range(a.batch)]
    E, k = shape["experts"], shape["top_k"]
    print("uniform routing: %.1f experts a layer for %d tokens" % (E * (1 - (1 - k / E) ** a.batch), a.batch))
    for step in range(a.steps + 1):
        reached = [set() for _ in model.layers]
        tokens = {s[-1] for s in seqs}
        for i, s in enumerate(seqs):
            with torch.no_grad():
                logits = model.dense_forward(s)
            for li, ids in last.items():
                reached[li].update(ids)
            seqs[i] = s + [int(logits[-1].argmax())]
        n = [len(r) for r in reached]
        print("step %2d (%s): %2d distinct input tokens, experts reached per layer %s, mean %.1f"
              % (step, "prompt's last token" if step == 0 else "greedy output", len(tokens), n, sum(n) / len(n)))


if __name__ == "__main__":
    main()

"""Model presets, engine configuration and the memory estimate made before
anything is allocated."""

import torch

# The worker's generation: the kernels a step runs change with it
# (datasets/h200/<generation>/ holds its captures; an operations database
# records the generation that measured it). Name a new one when a change
# alters what a step costs.
WORKER_GENERATION = "piecewise"

PRESETS = {
    "llama-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128,
                     intermediate=14336, vocab=128256, dtype="bfloat16",
                     rope_theta=500000.0, rms_eps=1e-5, tie_word_embeddings=False, qkv_bias=False),
    "tiny": dict(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
                 intermediate=128, vocab=512, dtype="bfloat16",
                 rope_theta=10000.0, rms_eps=1e-5, tie_word_embeddings=True, qkv_bias=False),
}

# The shape fields an explicit model_config must give when it names no
# preset; the others take these defaults (random weights: they do not
# change what a step costs).
SHAPE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab")
SHAPE_DEFAULTS = dict(dtype="bfloat16", rope_theta=10000.0, rms_eps=1e-5, tie_word_embeddings=False, qkv_bias=False,
                      experts=0, top_k=0, expert_intermediate=0, routing_skew=0.0)
# Mixture-of-experts fields: experts > 0 replaces every layer's dense MLP
# by `experts` routed SwiGLU experts of expert_intermediate, top_k a token.
MOE_FIELDS = ("experts", "top_k", "expert_intermediate", "routing_skew")
# Shape fields of architectures this worker cannot run: refused by name
# before anything is allocated rather than silently priced as dense GQA.
UNSUPPORTED_FIELDS = {
    "kv_lora_rank": "multi-head latent attention (MLA)",
    "q_lora_rank": "multi-head latent attention (MLA)",
    "linear_attention": "linear attention",
    "state_mixer": "linear attention / Mamba state mixers",
    "sliding_window": "sliding-window attention",
    "shared_experts": "shared experts",
}

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}

GiB = 1 << 30
# CUDA graph pools, allocator fragmentation, Triton/cuBLAS workspaces.
CUDA_MARGIN = 1 * GiB


class ConfigError(Exception):
    pass


def _int(d, k, default, lo=None):
    v = d.get(k, default)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError("init.%s must be an integer, got %r" % (k, v))
    if lo is not None and v < lo:
        raise ConfigError("init.%s must be >= %d, got %d" % (k, lo, v))
    return v


def _float(d, k, default):
    v = d.get(k, default)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError("init.%s must be a number, got %r" % (k, v))
    return float(v)


class ModelConfig:
    """A dense Llama-family decoder: a preset with model_config overriding
    the fields it names, or (preset None) model_config alone, which must
    give every shape field. head_dim is independent of hidden / heads."""

    FIELDS = SHAPE_FIELDS + ("dtype", "rope_theta", "rms_eps", "tie_word_embeddings", "qkv_bias") + MOE_FIELDS

    def __init__(self, preset, overrides):
        if overrides is not None and not isinstance(overrides, dict):
            raise ConfigError("init.model_config must be a map")
        if preset is None:
            if overrides is None:
                raise ConfigError("init: name a model preset (%s) or give model_config" % ", ".join(sorted(PRESETS)))
            missing = [k for k in SHAPE_FIELDS if overrides.get(k) is None]
            if missing:
                raise ConfigError("init.model_config without a preset must give %s (missing: %s)"
                                  % (", ".join(SHAPE_FIELDS), ", ".join(missing)))
            c = dict(SHAPE_DEFAULTS)
        elif preset not in PRESETS:
            raise ConfigError("unknown model preset %r (known: %s)" % (preset, ", ".join(sorted(PRESETS))))
        else:
            c = dict(SHAPE_DEFAULTS, **PRESETS[preset])
        if overrides is not None:
            for k, v in overrides.items():
                if k in UNSUPPORTED_FIELDS and v not in (None, 0, False, {}, []):
                    raise ConfigError("init.model_config.%s: this worker does not run %s (dense or MoE GQA decoders "
                                      "with full attention only)" % (k, UNSUPPORTED_FIELDS[k]))
                if k not in self.FIELDS:
                    raise ConfigError("init.model_config: unknown field %r (known: %s)" % (k, ", ".join(self.FIELDS)))
                if v is not None:
                    c[k] = v
        for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab"):
            v = c[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError("model_config.%s must be a positive integer, got %r" % (k, v))
        self._check_moe(c)
        if c["dtype"] not in DTYPES:
            raise ConfigError("model_config.dtype must be one of %s, got %r" % (sorted(DTYPES), c["dtype"]))
        if c["heads"] % c["kv_heads"]:
            raise ConfigError("model_config.heads (%d) must be a multiple of kv_heads (%d)" % (c["heads"], c["kv_heads"]))
        if c["head_dim"] % 2:
            raise ConfigError("model_config.head_dim must be even (RoPE)")
        for k in ("tie_word_embeddings", "qkv_bias"):
            if not isinstance(c[k], bool):
                raise ConfigError("model_config.%s must be a bool" % k)
        for k in ("rope_theta", "rms_eps"):
            if isinstance(c[k], bool) or not isinstance(c[k], (int, float)) or not c[k] > 0:
                raise ConfigError("model_config.%s must be a positive number, got %r" % (k, c[k]))
        c["rope_theta"] = float(c["rope_theta"])
        c["rms_eps"] = float(c["rms_eps"])
        self.__dict__.update(c)
        # The name logs and errors use: the preset, or the explicit shape.
        self.preset = preset or "model_config(layers=%d hidden=%d heads=%d/%d head_dim=%d)" % (
            c["layers"], c["hidden"], c["heads"], c["kv_heads"], c["head_dim"]) + (
            " moe(experts=%d top_k=%d)" % (c["experts"], c["top_k"]) if c["experts"] else "")

    @staticmethod
    def _check_moe(c):
        for k in ("experts", "top_k", "expert_intermediate"):
            v = c[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError("model_config.%s must be a non-negative integer, got %r" % (k, v))
        sk = c["routing_skew"]
        if isinstance(sk, bool) or not isinstance(sk, (int, float)) or sk < 0:
            raise ConfigError("model_config.routing_skew must be a number >= 0, got %r" % (sk,))
        c["routing_skew"] = float(sk)
        if c["experts"] == 0:
            if c["top_k"] or c["expert_intermediate"]:
                raise ConfigError("model_config.top_k and expert_intermediate need experts > 0")
            return
        if not 1 <= c["top_k"] <= c["experts"]:
            raise ConfigError("model_config.top_k must be in [1, experts=%d], got %d" % (c["experts"], c["top_k"]))
        if c["expert_intermediate"] < 1:
            raise ConfigError("model_config.expert_intermediate must be >= 1 when experts > 0")

    @property
    def is_moe(self):
        return self.experts > 0

    @property
    def torch_dtype(self):
        return DTYPES[self.dtype]

    @property
    def elt(self):
        return torch.tensor([], dtype=self.torch_dtype).element_size()

    def as_dict(self):
        return {k: getattr(self, k) for k in self.FIELDS}

    def weight_elems(self):
        h, d = self.hidden, self.head_dim
        qkv = h * (self.heads + 2 * self.kv_heads) * d
        if self.qkv_bias:
            qkv += (self.heads + 2 * self.kv_heads) * d
        o = self.heads * d * h
        if self.is_moe:  # routed experts plus the router
            mlp = self.experts * 3 * h * self.expert_intermediate + self.experts * h
        else:
            mlp = 3 * h * self.intermediate
        per_layer = qkv + o + mlp + 2 * h
        emb = self.vocab * h
        lm = 0 if self.tie_word_embeddings else self.vocab * h
        return self.layers * per_layer + emb + lm + h

    def weight_bytes(self):
        return self.weight_elems() * self.elt

    def kv_bytes_per_block(self, block_size):
        return 2 * self.layers * block_size * self.kv_heads * self.head_dim * self.elt


class EngineConfig:
    def __init__(self, msg):
        pv = msg.get("protocol_version", 1)
        if pv is not None and pv != 1:
            raise ConfigError("protocol_version %r not supported (this worker speaks 1)" % (pv,))
        preset = msg.get("model")
        if preset is not None and not isinstance(preset, str):
            raise ConfigError("init.model must be a string")
        mc = msg.get("model_config")
        if not preset:
            # No preset: the explicit shape alone, else the default preset.
            preset = None if mc is not None else "llama-8b"
        self.model = ModelConfig(preset, mc)
        self.seed = _int(msg, "seed", 0)
        dev = msg.get("device", "cuda") or "cuda"
        if not isinstance(dev, str) or not (dev == "cpu" or dev == "cuda" or dev.startswith("cuda:")):
            raise ConfigError("init.device must be 'cuda', 'cuda:N' or 'cpu', got %r" % (dev,))
        self.device = dev
        self.num_gpu_blocks = _int(msg, "num_gpu_blocks", 0, lo=0)
        self.gpu_memory_utilization = _float(msg, "gpu_memory_utilization", 0.9)
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ConfigError("init.gpu_memory_utilization must be in (0, 1]")
        self.block_size = _int(msg, "block_size", 16, lo=1)
        self.max_num_seqs = _int(msg, "max_num_seqs", 256, lo=1)
        self.max_num_batched_tokens = _int(msg, "max_num_batched_tokens", 8192, lo=1)
        self.max_model_len = _int(msg, "max_model_len", 8192, lo=2)
        sizes = msg.get("cuda_graph_sizes", []) or []
        if not isinstance(sizes, list) or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
            raise ConfigError("init.cuda_graph_sizes must be a list of positive integers")
        self.cuda_graph_sizes = sorted(set(sizes))
        be = msg.get("attention_backend", "auto") or "auto"
        if be not in ("auto", "triton", "torch"):
            raise ConfigError("init.attention_backend must be auto, triton or torch, got %r" % (be,))
        self.attention_backend = be
        mode = msg.get("cuda_graph_mode", "piecewise") or "piecewise"
        if mode not in ("piecewise", "full"):
            raise ConfigError("init.cuda_graph_mode must be piecewise or full, got %r" % (mode,))
        self.cuda_graph_mode = mode

    @property
    def max_blocks_per_req(self):
        return -(-self.max_model_len // self.block_size)

    def activation_bytes(self):
        """Rough peak of the forward pass's temporaries plus sampling buffers."""
        m = self.model
        t = max(self.max_num_batched_tokens, self.max_num_seqs)
        mlp_w = m.top_k * 4 * m.expert_intermediate + 3 * m.hidden * m.top_k if m.is_moe else 4 * m.intermediate
        per_tok = (4 * m.hidden + 2 * (m.heads + 2 * m.kv_heads) * m.head_dim + mlp_w) * m.elt
        logits = self.max_num_seqs * m.vocab * 4 * 4  # fp32 logits, probs, sorted, noise
        bufs = t * 8 * 6 + self.max_num_seqs * self.max_blocks_per_req * 4
        split_bufs = 64 * 16 * m.heads * (m.head_dim + 2) * 4
        return t * per_tok + logits + bufs + split_bufs

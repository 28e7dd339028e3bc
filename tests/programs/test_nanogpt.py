"""nanoGPT as NVIDIA's example writes it (GPTConfig, a quant-aware linear_layer, tril mask + masked_fill(-inf),
split/reshape/transpose heads, weights loaded through state_dict, dynamic batch and sequence, a top-k sampling
loop on the Executable's outputs), float and int8 weight-only, against numpy."""

import math
from dataclasses import dataclass

import numpy as np

import tripy_lab as tp


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 32
    num_layers: int = 1  # one block: xla compiles per new shape, so the module stays fast
    num_heads: int = 2
    embedding_size: int = 16
    bias: bool = True
    seq_len: int = 8
    batch_size: int = 1
    dtype: tp.dtype = tp.float32
    quant_mode: str = None


def linear_layer(config, in_feat, out_feat, bias):
    quant = {}
    if config.quant_mode == "int8-weight-only":
        quant = {"quant_dtype": tp.int8, "weight_quant_dim": 0}
    return tp.Linear(in_feat, out_feat, bias=bias, dtype=config.dtype, **quant)


class CausalSelfAttention(tp.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_heads
        self.embedding_size = config.embedding_size
        self.c_attn = linear_layer(config, config.embedding_size, 3 * config.embedding_size, config.bias)
        self.c_proj = linear_layer(config, config.embedding_size, config.embedding_size, config.bias)
        n = config.block_size
        self.bias = tp.reshape(tp.tril(tp.ones((n, n), dtype=config.dtype)), (1, 1, n, n))

    def forward(self, x):
        B, T = x.shape[0:2]
        qkv = self.c_attn(x)
        if self.c_attn.quant_dtype in (tp.float8, tp.int4):  # the example reads quant_dtype in float mode too
            qkv = tp.cast(qkv, tp.float32)
        q, k, v = tp.split(qkv, 3, dim=2)
        head_shape = [B, T, self.num_heads, self.embedding_size // self.num_heads]

        def heads(t):
            return tp.transpose(tp.reshape(t, head_shape), 1, 2)

        q, k, v = heads(q), heads(k), heads(v)
        att = (q @ tp.transpose(k, -2, -1)) * (1.0 / math.sqrt(self.embedding_size // self.num_heads))
        att = tp.masked_fill(att, self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = tp.softmax(att, dim=-1)
        out = tp.cast(att @ v, x.dtype)
        out = tp.reshape(tp.transpose(out, 1, 2), [B, T, self.embedding_size])
        return self.c_proj(out)


class MLP(tp.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = linear_layer(config, config.embedding_size, 4 * config.embedding_size, config.bias)
        self.c_proj = linear_layer(config, 4 * config.embedding_size, config.embedding_size, config.bias)

    def forward(self, x):
        return self.c_proj(tp.gelu(self.c_fc(x)))


class Block(tp.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = tp.LayerNorm(config.embedding_size)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = tp.LayerNorm(config.embedding_size)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(tp.cast(self.ln_1(tp.cast(x, self.ln_1.dtype)), x.dtype))
        return x + self.mlp(tp.cast(self.ln_2(tp.cast(x, self.ln_2.dtype)), x.dtype))


class Transformer(tp.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = tp.Embedding(config.vocab_size, config.embedding_size, dtype=config.dtype)
        self.wpe = tp.Embedding(config.block_size, config.embedding_size, dtype=config.dtype)
        self.h = [Block(config) for _ in range(config.num_layers)]
        self.ln_f = tp.LayerNorm(config.embedding_size)
        self.pos = tp.reshape(tp.arange(0, config.block_size, dtype=tp.int32), (1, config.block_size))

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(self.pos[:, : idx.shape[1]])
        for block in self.h:
            x = block(x)
        return tp.cast(self.ln_f(tp.cast(x, self.ln_f.dtype)), x.dtype)


class GPT(tp.Module):
    def __init__(self, config):
        super().__init__()
        self.transformer = Transformer(config)
        self.lm_head = tp.Linear(config.embedding_size, config.vocab_size, bias=False, dtype=config.dtype)

    def forward(self, idx):
        return self.lm_head(self.transformer(idx))


def load_random_weights(model, rng, quant):
    """The example's loader: fill state_dict by key (skipping the causal masks), scales from amax / 127."""
    weights = {}
    for key, param in model.state_dict().items():
        if isinstance(param, tp.Tensor) or key.endswith("input_scale"):  # masks/positions are built in __init__
            continue
        if key.endswith("weight_scale"):
            w = weights[key.replace("weight_scale", "weight")]
            weights[key] = (np.abs(w).max(axis=1) / 127).astype(np.float32)
            continue
        scale = 1.0 if ".ln_" in key else 0.3
        arr = (rng.standard_normal(param.shape) * scale).astype(np.float32)
        if ".ln_" in key and key.endswith(".weight"):
            arr += 1.0
        weights[key] = arr
    weights["lm_head.weight"] = weights["transformer.wte.weight"]  # weight tying, as the example does
    model.load_state_dict({k: tp.Tensor(v) for k, v in weights.items()}, strict=False)
    if quant:
        weights = {k: _fake_quant(v, weights.get(k.replace(".weight", ".weight_scale"))) for k, v in weights.items()}
    return weights


def _fake_quant(w, scale):
    if scale is None or w.ndim != 2:
        return w
    return (np.clip(np.rint(w / scale[:, None]), -128, 127) * scale[:, None]).astype(np.float32)


def _ln(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x):
    from math import erf

    return x * 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def numpy_gpt(w, idx, cfg):
    B, T = idx.shape
    H, C = cfg.num_heads, cfg.embedding_size
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][np.arange(T)][None]
    for i in range(cfg.num_layers):
        p = f"transformer.h.{i}."
        h = _ln(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        qkv = h @ w[p + "attn.c_attn.weight"].T + w[p + "attn.c_attn.bias"]
        q, k, v = (t.reshape(B, T, H, C // H).transpose(0, 2, 1, 3) for t in np.split(qkv, 3, axis=2))
        att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(C // H)
        att = np.where(np.tril(np.ones((T, T), bool)), att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        out = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + out @ w[p + "attn.c_proj.weight"].T + w[p + "attn.c_proj.bias"]
        h = _ln(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        h = _gelu(h @ w[p + "mlp.c_fc.weight"].T + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"].T + w[p + "mlp.c_proj.bias"]
    x = _ln(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"])
    return (x @ w["lm_head.weight"].T).astype(np.float32)


def _program(quant, check_program):
    cfg = GPTConfig(quant_mode="int8-weight-only" if quant else None)
    rng = np.random.default_rng(3)
    model = GPT(cfg)
    weights = load_random_weights(model, rng, quant)
    info = tp.InputInfo(((1, 2, 3), (1, 4, cfg.block_size)), dtype=tp.int32)  # dynamic batch and sequence
    cases = []
    for b, t in ((1, 1), (3, 9)):  # xla compiles once per shape: keep the shapes few
        idx = rng.integers(0, cfg.vocab_size, (b, t)).astype(np.int32)
        cases.append(((idx,), numpy_gpt(weights, idx, cfg)))
    exe = check_program(model, [info], cases)
    return cfg, weights, exe


def _sample(exe, weights, cfg, prompt, steps, rng):
    """The example's loop: logits[:, -1] / T, keep the top k, softmax, sample, append, run again."""
    idx = prompt
    for _ in range(steps):
        logits = np.asarray(exe(tp.Tensor(idx).eval()))
        np.testing.assert_allclose(logits, numpy_gpt(weights, idx, cfg), rtol=1e-4, atol=1e-4)
        last = logits[:, -1, :] / 0.8
        kth = np.sort(last, axis=-1)[:, -5][:, None]
        last = np.where(last < kth, -np.inf, last)
        probs = np.exp(last - last.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        nxt = np.array([[rng.choice(cfg.vocab_size, p=p)] for p in probs], np.int32)
        idx = np.concatenate([idx, nxt], axis=1)
    return idx


def test_nanogpt_float(check_program):
    cfg, weights, exe = _program(False, check_program)
    assert "transformer.h.0.attn.c_attn.weight" in exe.stages["traced"].as_text()
    out = _sample(exe, weights, cfg, np.array([[1, 2, 3]], np.int32), 2, np.random.default_rng(0))
    assert out.shape == (1, 5) and np.all((out >= 0) & (out < cfg.vocab_size))


def test_nanogpt_int8_weight_only(check_program):
    cfg, weights, exe = _program(True, check_program)
    mlir = exe.stages["lowered"].as_text()
    assert mlir.count("tensorrt.quantize") == 4 * cfg.num_layers  # c_attn, c_proj, c_fc, mlp.c_proj
    assert mlir.count("tensorrt.dequantize") == 4 * cfg.num_layers
    out = _sample(exe, weights, cfg, np.array([[5, 6], [7, 8]], np.int32), 2, np.random.default_rng(1))
    assert out.shape == (2, 4)

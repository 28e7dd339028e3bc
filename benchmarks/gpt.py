"""A GPT-2-small-sized decoder three ways with the same weights: tripy-lab (tp.Module), torch, jax.

GPT-2 small: 12 layers, d 768, 12 heads, vocab 50257, context 1024, pre-LayerNorm blocks, exact GELU,
lm head tied to the token embedding; fp16, random weights (``weights(rng)``). Input: token ids [B, T].
"""

from __future__ import annotations

import math

import numpy as np

import tripy_lab as tp

L, D, H, V, TMAX = 12, 768, 12, 50257, 1024
DH = D // H


def weights(rng, layers: int = L, d: int = D, vocab: int = V, tmax: int = TMAX) -> dict[str, np.ndarray]:
    def w(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float16)

    p = {"wte.weight": w(vocab, d), "wpe.weight": w(tmax, d, scale=0.01),
         "ln_f.weight": np.ones(d, np.float16), "ln_f.bias": np.zeros(d, np.float16)}
    for i in range(layers):
        b = f"h.{i}."
        p.update({b + "ln_1.weight": np.ones(d, np.float16), b + "ln_1.bias": np.zeros(d, np.float16),
                  b + "attn.c_attn.weight": w(3 * d, d), b + "attn.c_attn.bias": w(3 * d),
                  b + "attn.c_proj.weight": w(d, d), b + "attn.c_proj.bias": w(d),
                  b + "ln_2.weight": np.ones(d, np.float16), b + "ln_2.bias": np.zeros(d, np.float16),
                  b + "mlp.c_fc.weight": w(4 * d, d), b + "mlp.c_fc.bias": w(4 * d),
                  b + "mlp.c_proj.weight": w(d, 4 * d), b + "mlp.c_proj.bias": w(d)})
    return p


# ------------------------------------------------------------------------------------------------- tripy-lab
class Attention(tp.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.d, self.heads = d, heads
        self.c_attn = tp.Linear(d, 3 * d, dtype=tp.float16)
        self.c_proj = tp.Linear(d, d, dtype=tp.float16)

    def qkv(self, x, b, t, dh):
        """q, k, v as [B, H, T, dh], sliced from the packed projection."""
        qkv = tp.permute(tp.reshape(self.c_attn(x), (b, t, 3, self.heads, dh)), (2, 0, 3, 1, 4))
        return qkv[0], qkv[1], qkv[2]

    def forward(self, x, mask):
        b, t = x.shape[0], x.shape[1]
        dh = self.d // self.heads
        q, k, v = self.qkv(x, b, t, dh)
        att = (q @ tp.transpose(k, -1, -2)) * (1.0 / math.sqrt(dh))
        att = tp.masked_fill(att, mask == 0, float("-inf"))
        out = tp.softmax(att, dim=-1) @ v
        return self.c_proj(tp.reshape(tp.permute(out, (0, 2, 1, 3)), (b, t, self.d)))


class SeparateAttention(Attention):
    """The same attention with q, k and v from three Linear layers (the packed c_attn weight cut in three)."""

    def __init__(self, d: int, heads: int):
        tp.Module.__init__(self)
        self.d, self.heads = d, heads
        self.q_proj, self.k_proj, self.v_proj = (tp.Linear(d, d, dtype=tp.float16) for _ in range(3))
        self.c_proj = tp.Linear(d, d, dtype=tp.float16)

    def qkv(self, x, b, t, dh):
        return tuple(tp.permute(tp.reshape(p(x), (b, t, self.heads, dh)), (0, 2, 1, 3))
                     for p in (self.q_proj, self.k_proj, self.v_proj))


class SplitAttention(Attention):
    """The same attention written another way, as ported code often is: q, k, v by ``tp.split`` of the packed
    projection, the causal mask an int ``tril`` buffer compared with 0 (nanoGPT's ``bias``)."""

    def qkv(self, x, b, t, dh):
        return tuple(tp.permute(tp.reshape(part, (b, t, self.heads, dh)), (0, 2, 1, 3))
                     for part in tp.split(self.c_attn(x), 3, dim=2))


class Mlp(tp.Module):
    def __init__(self, d: int):
        super().__init__()
        self.c_fc = tp.Linear(d, 4 * d, dtype=tp.float16)
        self.c_proj = tp.Linear(4 * d, d, dtype=tp.float16)

    def forward(self, x):
        return self.c_proj(tp.gelu(self.c_fc(x)))


class Block(tp.Module):
    def __init__(self, d: int, heads: int, separate_qkv: bool = False, split_qkv: bool = False):
        super().__init__()
        self.ln_1 = tp.LayerNorm(d, dtype=tp.float16)
        self.attn = (SeparateAttention if separate_qkv else SplitAttention if split_qkv else Attention)(d, heads)
        self.ln_2 = tp.LayerNorm(d, dtype=tp.float16)
        self.mlp = Mlp(d)

    def forward(self, x, mask):
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.mlp(self.ln_2(x))


class GPT(tp.Module):
    def __init__(self, layers: int = L, d: int = D, heads: int = H, vocab: int = V, tmax: int = TMAX,
                 separate_qkv: bool = False, split_qkv: bool = False):
        super().__init__()
        self.wte = tp.Embedding(vocab, d, dtype=tp.float16)
        self.wpe = tp.Embedding(tmax, d, dtype=tp.float16)
        self.h = [Block(d, heads, separate_qkv, split_qkv) for _ in range(layers)]
        self.ln_f = tp.LayerNorm(d, dtype=tp.float16)
        self.causal = np.tril(np.ones((tmax, tmax), np.int32 if split_qkv else np.float32))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(tp.arange(t, dtype=tp.int32))
        mask = tp.Tensor(self.causal)[:t, :t]
        for block in self.h:
            x = block(x, mask)
        return self.ln_f(x) @ tp.transpose(self.wte.weight, 0, 1)


def tripy_gpt(params, separate_qkv: bool = False, split_qkv: bool = False, **sizes) -> GPT:
    """The tripy-lab GPT; ``separate_qkv``: q, k, v from three Linear layers holding c_attn's thirds;
    ``split_qkv``: the other spelling (``SplitAttention``, an int mask buffer)."""
    model = GPT(separate_qkv=separate_qkv, split_qkv=split_qkv, **sizes)
    if separate_qkv:
        params = dict(params)
        for key in [k for k in params if ".attn.c_attn." in k]:
            parts = np.split(params.pop(key), 3)
            for name, part in zip(("q_proj", "k_proj", "v_proj"), parts):
                params[key.replace("c_attn", name)] = part
    model.load_state_dict({k: tp.Tensor(v) for k, v in params.items()})
    return model


# ------------------------------------------------------------------------------------------------- torch
def torch_gpt(params, layers: int = L, heads: int = H):
    import torch
    import torch.nn.functional as F

    p = {k: torch.from_numpy(v).cuda() for k, v in params.items()}
    d = p["wte.weight"].shape[1]

    def forward(idx):
        b, t = idx.shape
        x = p["wte.weight"][idx] + p["wpe.weight"][:t]
        for i in range(layers):
            g = lambda n, i=i: p[f"h.{i}.{n}"]  # noqa: E731
            h = F.layer_norm(x, (d,), g("ln_1.weight"), g("ln_1.bias"))
            q, k, v = F.linear(h, g("attn.c_attn.weight"), g("attn.c_attn.bias")).view(
                b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + F.linear(o.transpose(1, 2).reshape(b, t, d), g("attn.c_proj.weight"), g("attn.c_proj.bias"))
            h = F.layer_norm(x, (d,), g("ln_2.weight"), g("ln_2.bias"))
            x = x + F.linear(F.gelu(F.linear(h, g("mlp.c_fc.weight"), g("mlp.c_fc.bias"))),
                             g("mlp.c_proj.weight"), g("mlp.c_proj.bias"))
        return F.layer_norm(x, (d,), p["ln_f.weight"], p["ln_f.bias"]) @ p["wte.weight"].T

    return forward


# ------------------------------------------------------------------------------------------------- jax
def jax_gpt(params, layers: int = L, heads: int = H):
    """Hand-written jax with cuDNN attention (jax.nn.dot_product_attention); returns (jitted f, params)."""
    import jax
    import jax.numpy as jnp

    gpu = jax.devices()[0]
    p = {k: jax.device_put(v, gpu) for k, v in params.items()}
    d = params["wte.weight"].shape[1]

    def ln(x, g, b):
        xf = x.astype(jnp.float32)
        mu = xf.mean(-1, keepdims=True)
        var = ((xf - mu) ** 2).mean(-1, keepdims=True)
        return ((xf - mu) * jax.lax.rsqrt(var + 1e-5) * g + b).astype(x.dtype)

    def f(p, idx):
        b, t = idx.shape
        x = p["wte.weight"][idx] + p["wpe.weight"][:t]
        for i in range(layers):
            g = lambda n, i=i: p[f"h.{i}.{n}"]  # noqa: E731
            h = ln(x, g("ln_1.weight"), g("ln_1.bias"))
            qkv = (h @ g("attn.c_attn.weight").T + g("attn.c_attn.bias")).reshape(b, t, 3, heads, d // heads)
            o = jax.nn.dot_product_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], is_causal=True,
                                             implementation="cudnn")
            x = x + o.reshape(b, t, d) @ g("attn.c_proj.weight").T + g("attn.c_proj.bias")
            h = ln(x, g("ln_2.weight"), g("ln_2.bias"))
            h = jax.nn.gelu(h @ g("mlp.c_fc.weight").T + g("mlp.c_fc.bias"), approximate=False)
            x = x + h @ g("mlp.c_proj.weight").T + g("mlp.c_proj.bias")
        return ln(x, p["ln_f.weight"], p["ln_f.bias"]) @ p["wte.weight"].T

    return jax.jit(f), p


def flops(b: int, t: int, layers: int = L, d: int = D, vocab: int = V) -> float:
    """Matmul FLOPs of one forward (causal attention counted in full, as the kernels compute it)."""
    per_layer = 2 * b * t * (3 * d * d + d * d + 8 * d * d) + 2 * 2 * b * t * t * d
    return layers * per_layer + 2 * b * t * d * vocab

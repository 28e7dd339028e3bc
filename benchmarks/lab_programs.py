"""Real-model-sized programs for the lab's views (benchmarks/bench_lab_scale.py, tests/e2e/test_graph_browser.py).

- ``gpt_small()``: the GPT-2-small-sized ``tp.Module`` of ``gpt.py`` (12 blocks, d 768, vocab 50257), random
  fp16 weights, token ids with a dynamic batch (1..2) and sequence (1..8).
- ``sam2_stack()``: a SAM2-style image encoder: a conv patch embedding, Hiera-like blocks (LayerNorm, multi-head
  attention over the patches, MLP) at two scales joined by a strided conv, and a conv neck.
- ``many_ops(n)``: a program of about ``n`` trace ops made by a Python loop outside any module.
Each returns (callable, args) for ``tp.compile`` / ``pipeline.trace``.
"""

from __future__ import annotations

import math

import numpy as np

import tripy_lab as tp


def gpt_small(seq_max: int = 8):
    import gpt

    model = gpt.tripy_gpt(gpt.weights(np.random.default_rng(0)))
    return model, [tp.InputInfo(((1, 1, 2), (1, 4, seq_max)), tp.int32)]


class Attention(tp.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = tp.Linear(d, 3 * d)
        self.proj = tp.Linear(d, d)

    def forward(self, x):
        b, n, d = x.shape[0], x.shape[1], x.shape[2]
        dh = d // self.heads
        qkv = tp.permute(tp.reshape(self.qkv(x), (b, n, 3, self.heads, dh)), (2, 0, 3, 1, 4))
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = tp.softmax((q @ tp.transpose(k, -1, -2)) * (1.0 / math.sqrt(dh)), dim=-1)
        return self.proj(tp.reshape(tp.permute(att @ v, (0, 2, 1, 3)), (b, n, d)))


class Mlp(tp.Module):
    def __init__(self, d: int):
        super().__init__()
        self.fc1 = tp.Linear(d, 4 * d)
        self.fc2 = tp.Linear(4 * d, d)

    def forward(self, x):
        return self.fc2(tp.gelu(self.fc1(x)))


class HieraBlock(tp.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.norm1 = tp.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.norm2 = tp.LayerNorm(d)
        self.mlp = Mlp(d)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Sam2Encoder(tp.Module):
    def __init__(self, d: int = 96, heads: int = 2, depth: tuple[int, int] = (2, 4)):
        super().__init__()
        self.d = d
        self.patch_embed = tp.Conv(3, d, (4, 4), stride=(4, 4))
        self.stage1 = [HieraBlock(d, heads) for _ in range(depth[0])]
        self.downsample = tp.Conv(d, 2 * d, (2, 2), stride=(2, 2))
        self.stage2 = [HieraBlock(2 * d, 2 * heads) for _ in range(depth[1])]
        self.neck = tp.Conv(2 * d, 64, (1, 1))

    def _tokens(self, x):  # [B, C, H, W] -> [B, H*W, C]
        b, c = x.shape[0], x.shape[1]
        return tp.permute(tp.reshape(x, (b, c, -1)), (0, 2, 1))

    def _image(self, t, h, w):  # [B, H*W, C] -> [B, C, H, W]
        b, c = t.shape[0], t.shape[2]
        return tp.reshape(tp.permute(t, (0, 2, 1)), (b, c, h, w))

    def forward(self, img):
        x = self.patch_embed(img)
        h, w = x.shape[2], x.shape[3]
        t = self._tokens(x)
        for block in self.stage1:
            t = block(t)
        x = self.downsample(self._image(t, h, w))
        h, w = x.shape[2], x.shape[3]
        t = self._tokens(x)
        for block in self.stage2:
            t = block(t)
        return self.neck(self._image(t, h, w))


def sam2_stack():
    model = Sam2Encoder()
    model.initialize_dummy_parameters()
    return model, [tp.InputInfo(((1, 1, 2), 3, 64, 64), tp.float32)]


def many_ops(n: int = 20_000):
    """~``n`` ops: a loop of elementwise steps (a scan unrolled by Python, as a long generated program is)."""
    steps = max(1, n // 7)

    def long_program(x):
        for i in range(steps):
            x = tp.relu(x * 0.5 + float(i % 7))
        return x

    return long_program, [tp.InputInfo(((1, 2, 4), 16), tp.float32)]

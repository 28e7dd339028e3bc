"""Diffusion-VAE-style blocks as NVIDIA's diffusion example writes them: GroupNorm + silu + Conv resnet blocks
with a conv (or lambda) shortcut, a GroupNorm attention block over `b, c, h, w = x.shape`, nearest upsampling
by reshape -> expand -> reshape on DimensionSizes, a strided-conv downsample, a channel slice and clamp."""

import math

import numpy as np

import tripy_lab as tp

from .test_resnet_stack import _conv
from .weights import randn


def attention(query, key, value, embedding_dim):
    qk = (query @ tp.transpose(key, -2, -1)) * (1.0 / math.sqrt(embedding_dim))
    return tp.softmax(qk, -1) @ value


class ResnetBlock(tp.Module):
    def __init__(self, in_channels, out_channels):
        self.norm1 = tp.GroupNorm(2, in_channels)
        self.conv1 = tp.Conv(in_channels, out_channels, (3, 3), padding=((1, 1), (1, 1)))
        self.norm2 = tp.GroupNorm(2, out_channels)
        self.conv2 = tp.Conv(out_channels, out_channels, (3, 3), padding=((1, 1), (1, 1)))
        self.nonlinearity = tp.silu
        self.conv_shortcut = tp.Conv(in_channels, out_channels, (1, 1)) if in_channels != out_channels else (
            lambda x: x)

    def __call__(self, x):
        h = self.conv1(self.nonlinearity(self.norm1(x)))
        h = self.conv2(self.nonlinearity(self.norm2(h)))
        return self.conv_shortcut(x) + h


class AttnBlock(tp.Module):
    def __init__(self, in_channels):
        self.group_norm = tp.GroupNorm(2, in_channels)
        self.to_q, self.to_k, self.to_v = (tp.Linear(in_channels, in_channels) for _ in range(3))
        self.to_out = [tp.Linear(in_channels, in_channels)]
        self.in_channels = in_channels

    def __call__(self, x):
        h_ = self.group_norm(x)
        b, c, h, w = h_.shape
        flat = tp.transpose(tp.reshape(h_, (b, c, h * w)), 1, 2)
        h_ = attention(self.to_q(flat), self.to_k(flat), self.to_v(flat), embedding_dim=self.in_channels)
        return x + tp.reshape(tp.transpose(self.to_out[0](h_), 1, 2), (b, c, h, w))


class Upsample(tp.Module):
    def __init__(self, channels):
        self.conv = tp.Conv(channels, channels, (3, 3), padding=((1, 1), (1, 1)))

    def __call__(self, x):
        bs, c, py, px = x.shape
        x = tp.reshape(tp.expand(tp.reshape(x, (bs, c, py, 1, px, 1)), (bs, c, py, 2, px, 2)), (bs, c, py * 2, px * 2))
        return self.conv(x)


class TinyVAE(tp.Module):
    def __init__(self):
        self.resnets = [ResnetBlock(4, 8), ResnetBlock(8, 8)]
        self.attentions = [AttnBlock(8)]
        self.upsamplers = [Upsample(8)]
        self.down = tp.Conv(8, 8, (3, 3), stride=(2, 2), padding=((1, 1), (1, 1)))

    def __call__(self, x):
        for i in range(len(self.resnets)):
            x = self.resnets[i](x)
        x = self.attentions[0](x)
        if hasattr(self, "upsamplers"):
            x = self.upsamplers[0](x)
        x = self.down(x)[:, 0:4]
        return tp.minimum(tp.maximum(x, -1.0), 1.0)


def _gn(x, p, key, groups=2, eps=1e-5):
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    g = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)
    return g.reshape(x.shape) * p[key + ".weight"].reshape(1, c, 1, 1) + p[key + ".bias"].reshape(1, c, 1, 1)


def _cv(x, p, key, stride=1, pad=0):
    return _conv(x, p[key + ".weight"], stride, pad) + p[key + ".bias"].reshape(1, -1, 1, 1)


def _silu(x):
    return x / (1 + np.exp(-x))


def numpy_vae(p, x):
    for i in range(2):
        k = f"resnets.{i}."
        h = _cv(_silu(_gn(x, p, k + "norm1")), p, k + "conv1", pad=1)
        h = _cv(_silu(_gn(h, p, k + "norm2")), p, k + "conv2", pad=1)
        x = (_cv(x, p, k + "conv_shortcut") if i == 0 else x) + h
    b, c, hh, ww = x.shape
    flat = _gn(x, p, "attentions.0.group_norm").reshape(b, c, hh * ww).transpose(0, 2, 1)

    def lin(t, key):
        return t @ p[f"attentions.0.{key}.weight"].T + p[f"attentions.0.{key}.bias"]

    att = lin(flat, "to_q") @ lin(flat, "to_k").transpose(0, 2, 1) / math.sqrt(c)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    x = x + lin(att @ lin(flat, "to_v"), "to_out.0").transpose(0, 2, 1).reshape(b, c, hh, ww)
    x = _cv(x.repeat(2, axis=2).repeat(2, axis=3), p, "upsamplers.0.conv", pad=1)
    x = _cv(x, p, "down", stride=2, pad=1)[:, 0:4]
    return np.clip(x, -1.0, 1.0)


def test_vae_style_blocks(check_program):
    rng = np.random.default_rng(11)
    model = TinyVAE()
    params = {k: randn(rng, *p.shape) + (1.0 if "norm" in k and k.endswith("weight") else 0.0)
              for k, p in model.state_dict().items()}
    model.load_state_dict({k: tp.Tensor(a) for k, a in params.items()})
    cases = []
    for n in (1, 2):
        x = randn(rng, n, 4, 4, 4)
        cases.append(((x,), numpy_vae(params, x)))
    check_program(model, [tp.InputInfo(((1, 1, 2), 4, 4, 4), tp.float32)], cases, rtol=1e-3, atol=1e-3)

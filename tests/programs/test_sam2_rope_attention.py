"""A SAM2-style RoPE cross-attention block (as NVIDIA's SAM2 example writes it: axial cos/sin tables from
arange/outer, complex multiply on (..., 2) pairs, keys repeated over the memory, `num_k_exclude_rope` as a
DimensionInputInfo, `tp.sqrt(tp.cast(k.shape[-1], dtype))`), against numpy."""

import numpy as np

import tripy_lab as tp

from .weights import randn


def init_t_xy(end_x, end_y):
    t = tp.arange(end_x * end_y, dtype=tp.float32)
    t_x = t % end_x
    t_y = t // end_x
    return t_x, t_y


def cartesian_via_polar(abs, angles):  # noqa: A002 - the example's name
    return tp.stack([abs * tp.cos(angles), abs * tp.sin(angles)], dim=-1)


def compute_axial_cis(dim, end_x, end_y, theta=10000.0):
    freqs_x = 1.0 / (theta ** (tp.cast(tp.arange(0, dim, 4)[: (dim // 4)], tp.float32) / dim))
    freqs_y = 1.0 / (theta ** (tp.cast(tp.arange(0, dim, 4)[: (dim // 4)], tp.float32) / dim))
    t_x, t_y = init_t_xy(end_x, end_y)
    freqs_x, freqs_y = tp.outer(t_x, freqs_x), tp.outer(t_y, freqs_y)
    cis_x = cartesian_via_polar(tp.ones_like(freqs_x), freqs_x)
    cis_y = cartesian_via_polar(tp.ones_like(freqs_y), freqs_y)
    return tp.concatenate([cis_x, cis_y], dim=-2)


def mul_as_complex(a, b):
    real = a[:, :, :, :, 0] * b[:, :, :, :, 0] - a[:, :, :, :, 1] * b[:, :, :, :, 1]
    imag = a[:, :, :, :, 0] * b[:, :, :, :, 1] + a[:, :, :, :, 1] * b[:, :, :, :, 0]
    return tp.stack([real, imag], dim=-1)


def reshape_for_broadcast(freqs_cis, x):
    shape = [d if i >= x.rank - 3 else 1 for i, d in enumerate(x.shape)]
    return tp.reshape(freqs_cis, shape)


def apply_rotary_enc(xq, xk, freqs_cis, repeat_freqs_k=False):
    xq_ = tp.reshape(xq, (*xq.shape[:-1], -1, 2))
    xk_ = tp.reshape(xk, (*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = mul_as_complex(xq_, freqs_cis)
    xq_out = tp.reshape(xq_out, (xq_out.shape[0], xq_out.shape[1], xq_out.shape[2], -1))
    if repeat_freqs_k:
        r = xk_.shape[-3] // xq_.shape[-3]
        freqs_cis = tp.flatten(tp.expand(tp.unsqueeze(freqs_cis, 2), (-1, -1, r, -1, -1, -1)), 2, 3)
    xk_out = tp.flatten(mul_as_complex(xk_, freqs_cis), 3)
    return tp.cast(xq_out, xq.dtype), tp.cast(xk_out, xk.dtype)


def scaled_dot_product_attention(query, key, value, embedding_dim=None):
    if embedding_dim is None:
        embedding_dim = query.shape[-1]
    qk = query @ tp.transpose(key, -2, -1) / tp.sqrt(tp.cast(embedding_dim, query.dtype))
    return tp.cast(tp.softmax(qk, -1), query.dtype) @ value


class RoPEAttention(tp.Module):
    def __init__(self, embedding_dim, num_heads, feat_sizes=(2, 2), rope_k_repeat=True):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = tp.Linear(embedding_dim, embedding_dim)
        self.k_proj = tp.Linear(embedding_dim, embedding_dim)
        self.v_proj = tp.Linear(embedding_dim, embedding_dim)
        self.out_proj = tp.Linear(embedding_dim, embedding_dim)
        self.head_dim = embedding_dim // num_heads
        self.feat_sizes = feat_sizes
        self.rope_k_repeat = rope_k_repeat

    def _separate_heads(self, x, num_heads):
        b, n, c = x.shape[0], x.shape[1], x.shape[2]
        return tp.transpose(tp.reshape(x, [b, n, num_heads, c // num_heads]), 1, 2)

    def _recombine_heads(self, x):
        b, n_head, n_token, c_per_head = x.shape[0], x.shape[1], x.shape[2], x.shape[3]
        return tp.reshape(tp.transpose(x, 1, 2), [b, n_token, n_head * c_per_head])

    def forward(self, q, k, v, num_k_exclude_rope):
        q = self._separate_heads(self.q_proj(q), self.num_heads)
        k = self._separate_heads(self.k_proj(k), self.num_heads)
        v = self._separate_heads(self.v_proj(v), self.num_heads)
        w, h = self.feat_sizes
        freqs_cis = compute_axial_cis(self.head_dim, tp.DimensionSize(w), tp.DimensionSize(h))
        num_k_rope = k.shape[-2] - num_k_exclude_rope
        q, new_k = apply_rotary_enc(q, k[:, :, :num_k_rope], freqs_cis, repeat_freqs_k=self.rope_k_repeat)
        k = tp.concatenate([new_k, k[:, :, num_k_rope:, :]], dim=-2)
        out = scaled_dot_product_attention(q, k, v, embedding_dim=k.shape[-1])
        return self.out_proj(self._recombine_heads(out))


def _numpy_block(p, q, k, v, n_excl, heads, feat=(2, 2)):
    def lin(x, name):
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def split(x):
        b, n, c = x.shape
        return x.reshape(b, n, heads, c // heads).transpose(0, 2, 1, 3)

    q, k, v = split(lin(q, "q_proj")), split(lin(k, "k_proj")), split(lin(v, "v_proj"))
    d = q.shape[-1]
    freqs = 1.0 / (10000.0 ** (np.arange(0, d, 4)[: d // 4].astype(np.float32) / d))
    t = np.arange(feat[0] * feat[1], dtype=np.float32)
    ang = np.concatenate([np.outer(t % feat[0], freqs), np.outer(t // feat[0], freqs)], axis=-1)
    cis = np.cos(ang) + 1j * np.sin(ang)  # (Lq, d/2)

    def rot(x, c):
        xc = x[..., 0::2] + 1j * x[..., 1::2]
        out = xc * c
        return np.stack([out.real, out.imag], axis=-1).reshape(x.shape).astype(np.float32)

    n_rope = k.shape[2] - n_excl
    r = n_rope // q.shape[2]
    q = rot(q, cis)
    k = np.concatenate([rot(k[:, :, :n_rope], np.tile(cis, (r, 1))), k[:, :, n_rope:]], axis=2)
    att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(np.float32(d))
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    out = (att @ v).transpose(0, 2, 1, 3)
    out = out.reshape(out.shape[0], out.shape[1], -1)
    return lin(out, "out_proj").astype(np.float32)


def test_sam2_rope_cross_attention_with_dimension_input(check_program):
    rng = np.random.default_rng(2)
    C, H = 16, 2
    block = RoPEAttention(C, H)
    params = {key: randn(rng, *p.shape) for key, p in block.state_dict().items()}
    block.load_state_dict({key: tp.Tensor(a) for key, a in params.items()})
    # 4 query tokens (a 2x2 feature map); keys: 8 rope'd memory tokens (2 per query) + 0..4 excluded pointers.
    args = [tp.InputInfo((1, 4, C), tp.float32), tp.InputInfo((1, (8, 10, 12), C), tp.float32),
            tp.InputInfo((1, (8, 10, 12), C), tp.float32), tp.DimensionInputInfo((0, 2, 4))]
    cases = []
    for n_excl in (0, 3):
        q, k, v = randn(rng, 1, 4, C), randn(rng, 1, 8 + n_excl, C), randn(rng, 1, 8 + n_excl, C)
        cases.append(((q, k, v, tp.DimensionSize(n_excl)), _numpy_block(params, q, k, v, n_excl, H)))
    exe = check_program(block, args, cases)
    assert list(exe.input_infos) == ["q", "k", "v", "num_k_exclude_rope"]

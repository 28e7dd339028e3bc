"""A CLIP-style text encoder as NVIDIA's diffusion example writes it: modules with no ``super().__init__()``
that override __call__, token + position Embedding (position ids from ``tp.iota``), a causal mask from
``tp.triu(tp.full(..., -inf), 1)``, quick-GELU, pre-norm residual blocks, dynamic batch -- against numpy."""

import math
from dataclasses import dataclass

import numpy as np

import tripy_lab as tp

from .weights import randn


@dataclass
class CLIPConfig:
    vocab_size: int = 40
    embedding_size: int = 16
    num_heads: int = 2
    max_seq_len: int = 6
    num_hidden_layers: int = 2
    dtype: tp.dtype = tp.float32


def scaled_dot_product_attention(query, key, value, embedding_dim, attn_mask=None):
    qk = query @ tp.transpose(key, -2, -1) / math.sqrt(embedding_dim)
    return tp.cast(tp.softmax((qk + attn_mask) if attn_mask is not None else qk, -1), query.dtype) @ value


class CLIPMLP(tp.Module):
    def __init__(self, config):
        self.fc1 = tp.Linear(config.embedding_size, config.embedding_size * 4, dtype=config.dtype)
        self.fc2 = tp.Linear(config.embedding_size * 4, config.embedding_size, dtype=config.dtype)

    def __call__(self, hidden_states):
        hidden_states = self.fc1(hidden_states)
        hidden_states = tp.sigmoid(1.702 * hidden_states) * hidden_states  # quick GELU
        return self.fc2(hidden_states)


class CLIPAttention(tp.Module):
    def __init__(self, config):
        self.embed_dim = config.embedding_size
        self.num_heads = config.num_heads
        self.head_dim = self.embed_dim // self.num_heads
        self.k_proj = tp.Linear(self.embed_dim, self.embed_dim, dtype=config.dtype)
        self.v_proj = tp.Linear(self.embed_dim, self.embed_dim, dtype=config.dtype)
        self.q_proj = tp.Linear(self.embed_dim, self.embed_dim, dtype=config.dtype)
        self.out_proj = tp.Linear(self.embed_dim, self.embed_dim, dtype=config.dtype)

    def __call__(self, hidden_states, causal_attention_mask):
        bsz, tgt_len, embed_dim = hidden_states.shape[0], hidden_states.shape[1], hidden_states.shape[2]
        q, k, v = self.q_proj(hidden_states), self.k_proj(hidden_states), self.v_proj(hidden_states)
        q, k, v = [tp.transpose(tp.reshape(x, (bsz, tgt_len, self.num_heads, self.head_dim)), 1, 2)
                   for x in (q, k, v)]
        out = scaled_dot_product_attention(q, k, v, embedding_dim=self.head_dim, attn_mask=causal_attention_mask)
        return self.out_proj(tp.reshape(tp.transpose(out, 1, 2), (bsz, tgt_len, embed_dim)))


class CLIPEncoderLayer(tp.Module):
    def __init__(self, config):
        self.self_attn = CLIPAttention(config)
        self.layer_norm1 = tp.LayerNorm(config.embedding_size, dtype=config.dtype)
        self.mlp = CLIPMLP(config)
        self.layer_norm2 = tp.LayerNorm(config.embedding_size, dtype=config.dtype)

    def __call__(self, hidden_states, causal_attention_mask):
        hidden_states = hidden_states + self.self_attn(self.layer_norm1(hidden_states), causal_attention_mask)
        return hidden_states + self.mlp(self.layer_norm2(hidden_states))


class CLIPTextEmbeddings(tp.Module):
    def __init__(self, config):
        self.token_embedding = tp.Embedding(config.vocab_size, config.embedding_size, dtype=config.dtype)
        self.position_embedding = tp.Embedding(config.max_seq_len, config.embedding_size, dtype=config.dtype)

    def __call__(self, input_ids, position_ids):
        return self.token_embedding(input_ids) + self.position_embedding(position_ids)


class CLIPTextTransformer(tp.Module):
    def __init__(self, config):
        self.embeddings = CLIPTextEmbeddings(config)
        self.layers = [CLIPEncoderLayer(config) for _ in range(config.num_hidden_layers)]
        self.final_layer_norm = tp.LayerNorm(config.embedding_size, dtype=config.dtype)
        self.max_seq_len = config.max_seq_len

    def __call__(self, input_ids):
        x = self.embeddings(input_ids, tp.unsqueeze(tp.iota((input_ids.shape[1],), dtype=tp.int32), 0))
        mask = tp.triu(tp.full((1, 1, self.max_seq_len, self.max_seq_len), float("-inf")), 1)
        for layer in self.layers:
            x = layer(x, mask)
        return self.final_layer_norm(x)


def _ln(x, p, key):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * p[key + ".weight"] + p[key + ".bias"]


def numpy_clip(p, ids, cfg):
    def lin(x, key):
        return x @ p[key + ".weight"].T + p[key + ".bias"]

    b, t = ids.shape
    h, d = cfg.num_heads, cfg.embedding_size // cfg.num_heads
    x = p["embeddings.token_embedding.weight"][ids] + p["embeddings.position_embedding.weight"][np.arange(t)][None]
    mask = np.triu(np.full((t, t), -np.inf, np.float32), 1)
    for i in range(cfg.num_hidden_layers):
        key = f"layers.{i}."
        y = _ln(x, p, key + "layer_norm1")
        q, k, v = (lin(y, key + f"self_attn.{n}_proj").reshape(b, t, h, d).transpose(0, 2, 1, 3) for n in "qkv")
        att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        x = x + lin((att @ v).transpose(0, 2, 1, 3).reshape(b, t, -1), key + "self_attn.out_proj")
        y = lin(_ln(x, p, key + "layer_norm2"), key + "mlp.fc1")
        x = x + lin(y / (1 + np.exp(-1.702 * y)), key + "mlp.fc2")
    return _ln(x, p, "final_layer_norm").astype(np.float32)


def test_clip_style_text_encoder(check_program):
    cfg = CLIPConfig()
    rng = np.random.default_rng(7)
    model = CLIPTextTransformer(cfg)
    params = {key: randn(rng, *p.shape) + (1.0 if "layer_norm" in key and key.endswith("weight") else 0.0)
              for key, p in model.state_dict().items()}
    model.load_state_dict({k: tp.Tensor(a) for k, a in params.items()})
    cases = []
    for b in (1, 2):
        ids = rng.integers(0, cfg.vocab_size, (b, cfg.max_seq_len)).astype(np.int32)
        cases.append(((ids,), numpy_clip(params, ids, cfg)))
    exe = check_program(model, [tp.InputInfo(((1, 2, 4), cfg.max_seq_len), tp.int32)], cases)
    assert list(exe.input_infos) == ["input_ids"]

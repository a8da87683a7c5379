"""Position encodings, one class each, registered by the name `config.position_embedding_type` takes.

A new encoding is a `PositionEncoding` subclass here and one line in `POSITION_ENCODINGS`: the config validates
against the registry, and the model and the answering code ask the class what they need to know.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from transformers import PretrainedConfig

Rotation = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def inverse_frequencies(dim: int, base: float, device: torch.device | None = None) -> torch.Tensor:
    """theta_i = base^(-2(i-1)/dim) for i = 1..dim/2, shared by rope and the sinusoidal table."""
    return base ** (-torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim)


def sinusoidal_positions(position_ids: torch.Tensor, dim: int) -> torch.Tensor:
    """Phi(t, 2i) = sin(t / 10000^(2i/d)), Phi(t, 2i+1) = cos(...); computed on the fly so loading needs no buffer."""
    angles = position_ids.float()[..., None] * inverse_frequencies(dim, 10000.0, position_ids.device)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[..., :dim]


def rope_cos_sin(position_ids: torch.Tensor, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotation angles t * theta_i, shaped (B, 1, T, head_dim/2) to broadcast over heads."""
    angles = position_ids.float()[:, None, :, None] * inverse_frequencies(head_dim, base, position_ids.device)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ADJACENT pairs (x1, x2), (x3, x4), ...: the complex-multiplication form of the 2024 handout."""
    x_even, x_odd = x.float().unflatten(-1, (-1, 2)).unbind(-1)
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
    return rotated.flatten(-2).type_as(x)


class PositionEncoding(nn.Module):
    """No positions ("none"), and the hooks a subclass overrides to give the model them:

    - `forward` adds position vectors to the token embeddings (learned, sinusoidal);
    - `rotation` returns what every attention layer applies to its queries and keys (rope);
    - `attention_bias` returns what every attention layer adds to its scores, by how far back each key lies;
    - `bounded`: no position can reach block_size (one learned row per position), so the model and the answering
      code refuse longer inputs (`config.bounded_context`);
    - `learned_table`: the model owns a (1, block_size, n_embd) table for it, `pos_emb`, the name every checkpoint
      has given it since 2021 (new parameters belong to the subclass itself);
    - `check_config` raises ValueError for a config it cannot serve.
    """

    bounded = False
    learned_table = False

    def __init__(self, config: PretrainedConfig) -> None:
        super().__init__()
        self.config = config

    @classmethod
    def check_config(cls, config: PretrainedConfig) -> None:
        pass

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, table: torch.Tensor | None) -> torch.Tensor:
        return x

    def rotation(self, position_ids: torch.Tensor) -> Rotation | None:
        return None

    def attention_bias(self, distance: torch.Tensor) -> torch.Tensor | None:
        """An additive bias on the attention scores, (n_head, q_len, kv_len) or broadcastable to it, from `distance`
        (q_len, kv_len): how many tokens before its query each key lies (negative: after it, masked anyway). Within
        a packed example or after left padding this is the distance of their positions; None: no bias."""
        return None


class LearnedPositions(PositionEncoding):
    """minGPT's learned row per position, added to the token embeddings; no row past block_size."""

    bounded = True
    learned_table = True

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, table: torch.Tensor | None) -> torch.Tensor:
        return x + table[0, position_ids]


class SinusoidalPositions(PositionEncoding):
    """The fixed sin/cos table of "Attention is all you need", added to the token embeddings; any length."""

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, table: torch.Tensor | None) -> torch.Tensor:
        return x + sinusoidal_positions(position_ids, self.config.n_embd).to(x.dtype)


class RotaryPositions(PositionEncoding):
    """rope (2024 handout): queries and keys rotated by t * theta_i in every layer, so scores see only t - s; any
    length."""

    @classmethod
    def check_config(cls, config: PretrainedConfig) -> None:
        if config.head_dim % 2 != 0:  # it rotates pairs of dimensions
            raise ValueError(
                f"position_embedding_type='rope' needs an even head dimension, but n_embd/n_head = "
                f"{config.n_embd}/{config.n_head} = {config.head_dim}"
            )

    def rotation(self, position_ids: torch.Tensor) -> Rotation:
        cos, sin = rope_cos_sin(position_ids, self.config.head_dim, self.config.rope_theta)  # once for all layers
        return lambda q, k: (apply_rope(q, cos, sin), apply_rope(k, cos, sin))


def alibi_slopes(n_head: int) -> torch.Tensor:
    """ALiBi's head slopes: 2^(-8/n), 2^(-16/n), ..., 2^(-8) for n heads a power of two; otherwise those of the power
    of two below n, then every other slope of twice as many heads (Press et al., 2022)."""
    def geometric(n: int) -> list[float]:
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]

    below = 2 ** math.floor(math.log2(n_head))
    return torch.tensor(geometric(below) + geometric(2 * below)[0::2][: n_head - below])


class ALiBiPositions(PositionEncoding):
    """ALiBi (Press et al., 2022): no position vectors; each head lowers a key's score by its slope times how far
    back the key lies, so scores see only t - s, and any length."""

    def attention_bias(self, distance: torch.Tensor) -> torch.Tensor:
        slopes = alibi_slopes(self.config.n_head).to(distance.device)
        return -slopes[:, None, None] * distance.clamp(min=0)


POSITION_ENCODINGS: dict[str, type[PositionEncoding]] = {
    "learned": LearnedPositions,
    "rope": RotaryPositions,
    "sinusoidal": SinusoidalPositions,
    "none": PositionEncoding,
    "alibi": ALiBiPositions,
}

__all__ = ["POSITION_ENCODINGS", "PositionEncoding", "alibi_slopes", "apply_rope", "rope_cos_sin",
           "sinusoidal_positions"]

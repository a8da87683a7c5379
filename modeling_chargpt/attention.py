"""chargpt's attention masks and kernels; a model picks its kernel by name through transformers' attention interface.

Select one with `from_pretrained(folder, attn_implementation=NAME)`, `CharGPTConfig(attn_implementation=NAME)` or
`model.set_attn_implementation(NAME)`; the model's attention modules look `config._attn_implementation` up in
`ALL_ATTENTION_FUNCTIONS` and nothing else. All of them compute the same attention (equal to float rounding, and
with the same dropout distribution); they differ in speed, and in which random numbers dropout draws:

- "chargpt" (the default): SDPA, except in training on CPU with attention dropout or in bf16, where SDPA has no
  fast path (with dropout it falls back to an unfused math kernel; its bf16 backward does not use the AMX matmul
  units). There it runs `attention_with_dropout`, batched matmuls with chargpt's 16-bit dropout masks: about 2.5x
  less attention time with dropout in fp32, and ~1.9x faster bf16 training steps on an AMX CPU
  (results/performance_cpu.json). It is the default because it is, bit for bit, what chargpt ran before kernels
  became selectable, on every device: the runs and results of this project were made with it.
- "sdpa": transformers' `torch.nn.functional.scaled_dot_product_attention` throughout, dropout inside SDPA.
- "eager": the reference minGPT op by op (q k^T / sqrt(d), -inf where masked, softmax, dropout, times v), for
  reading and checking; it also returns the attention probabilities. Its dropout is chargpt's, so on CPU it draws
  the same masks as "chargpt".

A kernel receives the model's mask, built by `build_attention_mask`: a boolean (B or 1, 1, q_len, kv_len) tensor,
True = attend, or None for plain causal attention (the queries are the last q_len of the kv_len keys); or, where
the position encoding biases the scores (`PositionEncoding.attention_bias`), an additive float mask (B or 1, H or 1,
q_len, kv_len), -inf where masked (`with_bias`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from .dropout import dropout as apply_dropout

DEFAULT_ATTN_IMPLEMENTATION = "chargpt"
ATTN_IMPLEMENTATIONS = ("chargpt", "sdpa", "eager")


def packed_causal_mask(position_ids: torch.Tensor) -> torch.Tensor:
    """Block-diagonal causal mask (B, 1, T, T) for rows packing several examples whose positions restart at 0.

    Each example starts where `position_ids` is 0, so token i may attend to token j iff j <= i and no example
    starts in (j, i].
    """
    segment = (position_ids == 0).cumsum(-1)
    same = segment[:, :, None] == segment[:, None, :]
    return (same & causal_mask(position_ids.shape[-1], position_ids.shape[-1], position_ids.device))[:, None]


def causal_mask(q_len: int, kv_len: int, device: torch.device) -> torch.Tensor:
    """(q_len, kv_len) boolean mask, True = attend, for queries that are the last q_len of kv_len positions."""
    return torch.ones(q_len, kv_len, dtype=torch.bool, device=device).tril(kv_len - q_len)


def build_attention_mask(
    attention_mask: torch.Tensor | None,
    q_len: int,
    past_len: int,
    batch: int,
    device: torch.device,
    kv_len: int | None = None,
) -> torch.Tensor | None:
    """The kernels' mask from the model's input: boolean (B, 1, q_len, kv_len), True = attend, or None when plain
    causal attention suffices.

    A 2D padding mask is combined with causality over cache positions; every query may always see itself,
    so the rows of left padding never become all-masked (which would make NaNs that leak through 0 * NaN).
    `kv_len` is the key length the cache returns: more than `past_len + q_len` for a preallocated (static)
    cache, whose unwritten slots lie after every query and are therefore hidden by causality.
    A 4D boolean mask (from `packed_causal_mask`) is used as given, plus the diagonal for the same reason.
    """
    filled = past_len + q_len
    if attention_mask is not None and attention_mask.dim() == 4:
        q_idx = torch.arange(past_len, filled, device=device)[:, None]
        return attention_mask.bool() | (torch.arange(attention_mask.shape[-1], device=device)[None, :] == q_idx)
    kv_len = filled if kv_len is None else kv_len
    if attention_mask is not None and bool(attention_mask.all()):
        attention_mask = None
    if attention_mask is None and (past_len == 0 or q_len == 1) and kv_len == filled:
        return None
    q_idx = torch.arange(past_len, filled, device=device)[:, None]
    k_idx = torch.arange(kv_len, device=device)[None, :]
    mask = (k_idx <= q_idx)[None, None].expand(batch, 1, q_len, kv_len)
    if attention_mask is not None:
        padding = attention_mask[:, -filled:].bool()
        if kv_len > filled:
            padding = F.pad(padding, (0, kv_len - filled), value=False)
        mask = (mask & padding[:, None, None, :]) | (k_idx == q_idx)
    return mask


def key_distances(q_len: int, kv_len: int, past_len: int, device: torch.device) -> torch.Tensor:
    """(q_len, kv_len): how many tokens before each query (the last q_len of past_len + q_len) each key lies."""
    return (torch.arange(past_len, past_len + q_len, device=device)[:, None]
            - torch.arange(kv_len, device=device)[None, :])


def with_bias(mask: torch.Tensor | None, bias: torch.Tensor, q_len: int, kv_len: int) -> torch.Tensor:
    """A boolean mask (None: causal) and an additive bias as one float mask for the kernels: the bias where the
    mask attends, -inf elsewhere; shaped (B or 1, H or 1, q_len, kv_len)."""
    if mask is None:
        mask = causal_mask(q_len, kv_len, bias.device)
    bias = bias.float().reshape((1,) * (4 - bias.dim()) + tuple(bias.shape))
    return bias.masked_fill(~mask, float("-inf"))


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A kernel's mask as scores to add: a float mask as it is, a boolean one as 0 / -inf."""
    if mask.is_floating_point():
        return mask.to(dtype)
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """"eager": the reference minGPT's attention op by op; returns (output (B, T, H, Dv), probabilities)."""
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    if attention_mask is None:
        attention_mask = causal_mask(query.shape[-2], key.shape[-2], query.device)
    scores = (query @ key.transpose(-2, -1)) * scaling + additive(attention_mask, query.dtype)
    probs = apply_dropout(F.softmax(scores, dim=-1), dropout, module.training)
    return (probs @ value).transpose(1, 2), probs


def attention_with_dropout(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    dropout_p: float,
    scaling: float | None = None,
) -> torch.Tensor:
    """softmax(q k^T * scaling + mask) with dropout on the probabilities, times v: (B, H, T, Dv).

    On CPU, SDPA with dropout falls back to an unfused math kernel; scaling and masking inside one `baddbmm`
    is faster there. `scaling` defaults to 1/sqrt(head_dim); dropout is applied whenever `dropout_p` > 0.
    """
    B, H, T, D = q.shape
    S = k.shape[-2]
    scaling = D**-0.5 if scaling is None else scaling
    if mask is None:
        mask = causal_mask(T, S, q.device)
    bias = additive(mask, q.dtype)
    if bias.dim() == 4:  # per-row (packed) or per-head masks: broadcast rather than copy them B*H times
        att = (q @ k.transpose(-2, -1)).mul_(scaling).add_(bias)
        return apply_dropout(att.softmax(-1), dropout_p, training=True) @ v
    att = torch.baddbmm(bias, q.reshape(B * H, T, D), k.reshape(B * H, S, D).transpose(1, 2), alpha=scaling)
    att = apply_dropout(att.softmax(-1), dropout_p, training=True)
    return torch.bmm(att, v.reshape(B * H, S, v.shape[-1])).view(B, H, T, v.shape[-1])


def chargpt_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """"chargpt": `attention_with_dropout` where SDPA is slow on CPU (see the module doc), SDPA elsewhere."""
    if query.device.type == "cpu" and module.training and (dropout > 0.0 or query.dtype == torch.bfloat16):
        return attention_with_dropout(query, key, value, attention_mask, dropout, scaling).transpose(1, 2), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling)


AttentionInterface.register("chargpt", chargpt_attention_forward)

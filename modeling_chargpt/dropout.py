"""chargpt's dropout: `nn.Dropout`'s semantics with a cheaper random mask on CPU, for every dropout in the model."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def bernoulli_keep_mask(shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
    """Boolean keep-mask with P(drop) = round(p * 65536) / 65536, from 16 random bits per element.

    torch's CPU dropout draws one random number per element (~6 ns each here: ~25% of a training step); one
    64-bit draw split into four 16-bit lanes costs a quarter of that. The drop rate is exact to 1/65536.
    """
    n = shape.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), None)
    return words.view(torch.int16)[:n].view(shape) >= (round(p * 65536) - 32768)


class _FastDropout(torch.autograd.Function):
    """Dropout with `bernoulli_keep_mask`; also returns the mask (for its backward). Its `vmap` rule draws one mask
    for the whole batched input, so members vmapped together (`torch.func.vmap(..., randomness="different")`, as
    chargpt/training/stacking.py's `SeedEnsemble`) get independent masks."""

    @staticmethod
    def forward(x: torch.Tensor, p: float) -> tuple[torch.Tensor, torch.Tensor]:
        keep = bernoulli_keep_mask(x.shape, p, x.device)
        return x.mul(keep).mul_(1.0 / (1.0 - p)), keep

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: tuple) -> None:
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])
        ctx.scale = 1.0 / (1.0 - inputs[1])

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _: torch.Tensor) -> tuple[torch.Tensor, None]:
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None

    @staticmethod
    def vmap(info, in_dims: tuple, x: torch.Tensor, p: float) -> tuple[tuple, tuple]:
        if info.randomness != "different":
            raise RuntimeError("chargpt's CPU dropout under vmap needs randomness='different'")
        if in_dims[0] is None:
            return _FastDropout.apply(x.expand(info.batch_size, *x.shape), p), (0, 0)
        return _FastDropout.apply(x, p), (in_dims[0], in_dims[0])  # x's own layout: no strided copy


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout; on CPU with 16-bit keep-masks (see `bernoulli_keep_mask`), elsewhere `F.dropout`."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0:
        return F.dropout(x, p, training=True)
    return _FastDropout.apply(x, p)[0]


class CharGPTDropout(nn.Dropout):
    """`nn.Dropout` with the fast CPU mask: same p, same scaling, same state dict (none)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

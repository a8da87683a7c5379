"""Training compute as a number that compares across machines: the FLOPs of what a run computed.

Counted per token position computed (a padded position costs as much as a real one; a packed row holds no PAD), a
training step costing three forward passes (the backward two):

    6 × (the weights of every matrix multiply: the Linear layers, the output head included)
    + 12 × n_layer × block_size × n_embd   (attention's two T × T products, QKᵀ and AV, in full as the reference
                                             computes them: a causal mask does not skip the masked half)

Embedding lookups, biases, layer norms, softmax, dropout and the optimizer are left out (a few percent at this size);
tests/test_flops.py checks the count against torch's own FLOP counter.
"""

from __future__ import annotations

from torch import nn


def flops_per_position(model: nn.Module) -> float:
    """Training FLOPs per token position computed by `model` (a chargpt model, or a `--seeds` model: its first
    member's, every member being the same shape)."""
    model = next(iter(getattr(model, "members", [model])))
    config = model.config
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    return 6.0 * weights + 12.0 * config.n_layer * config.block_size * config.n_embd

"""The CPU dropout (16-bit keep-masks) must be inverted dropout with the configured rate."""

from __future__ import annotations

import pytest
import torch

from modeling_chargpt.dropout import CharGPTDropout, bernoulli_keep_mask, dropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.03])
def test_drop_rate_and_independence(p):
    torch.manual_seed(0)
    keep = bernoulli_keep_mask(torch.Size([1 << 21]), p, torch.device("cpu"))
    n = keep.numel()
    dropped = (~keep).float().mean().item()
    assert abs(dropped - round(p * 65536) / 65536) < 4 * (p * (1 - p) / n) ** 0.5
    # neighbours (which share one 64-bit draw) are independent: P(both dropped) = p^2
    pairs = (~keep[0::2] & ~keep[1::2]).float().mean().item()
    assert abs(pairs - p * p) < 4 * (p * p / (n / 2)) ** 0.5 + 1e-4
    # every lane of the 64-bit word drops at the same rate (a biased top lane would show here)
    lanes = (~keep).view(-1, 4).float().mean(0)
    assert (lanes - p).abs().max() < 4 * (p * (1 - p) / (n / 4)) ** 0.5


def test_scaling_gradient_and_odd_sizes():
    torch.manual_seed(1)
    x = torch.randn(3, 7, 5, requires_grad=True)  # 105 elements: not a multiple of 4
    torch.manual_seed(2)
    y = dropout(x, 0.25, training=True)
    kept = y != 0
    assert torch.allclose(y[kept], x[kept] / 0.75)
    assert 0 < kept.sum() < x.numel()
    y.backward(torch.full_like(y, 2.0))
    assert torch.equal(x.grad, kept.float() * 2.0 / 0.75)
    torch.manual_seed(2)
    assert torch.equal(dropout(x, 0.25, training=True), y)  # seeded like every torch RNG op


def test_identity_when_off_and_module_behaves_like_nn_dropout():
    x = torch.randn(4, 8)
    assert dropout(x, 0.1, training=False) is x
    assert dropout(x, 0.0, training=True) is x
    assert torch.equal(dropout(x, 1.0, training=True), torch.zeros_like(x))
    module = CharGPTDropout(0.2)
    assert isinstance(module, torch.nn.Dropout) and module.p == 0.2 and module.state_dict() == {}
    assert torch.equal(module.eval()(x), x)
    module.train()
    out = module(torch.ones(1 << 16))
    assert abs((out == 0).float().mean().item() - 0.2) < 0.01 and torch.allclose(out[out != 0], torch.tensor(1.25))

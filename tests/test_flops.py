"""Training FLOPs as chargpt/training/flops.py counts them, against torch's own counter on a real step (a run's
train_results.json: tests/test_training_scripts.py and tests/test_multiseed.py)."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from chargpt.training.flops import flops_per_position
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM


@pytest.mark.parametrize("position", ["rope", "learned"])
def test_the_count_is_what_torch_counts_for_a_forward_and_backward(position):
    config = CharGPTConfig(vocab_size=40, n_layer=2, n_head=4, n_embd=64, block_size=32,
                           position_embedding_type=position, attn_implementation="eager")
    model = CharGPTForCausalLM(config)
    ids = torch.randint(1, 40, (3, 32))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    measured = counter.get_total_flops()
    counted = flops_per_position(model) * ids.numel()
    assert counted == pytest.approx(measured, rel=0.02)

"""`--stack_seeds`: the `--seeds` members trained as one model whose parameters are stacked, for host-bound GPUs.

A `SeedStack` runs its members one after the other, so a step launches every kernel once per member; on a GPU this
small model's step is bound by those launches (docs/performance.md#gpu), and three seeds in one process took nearly
as long as three runs. A `SeedEnsemble` stacks each parameter of the N members along a new first dimension and runs one
member's forward under `torch.func.vmap` over that dimension (`functional_call`, the torch.func ensembling recipe):
each operation runs once for all members (batched matmuls), and one AdamW steps N-times-larger tensors.

What stays each member's separate run: the init (the `SeedStack`'s members, built after `set_seed(S)`, are copied
into slice i), the batches (`SeedBatches`, every member packed into the same number of rows: the most any member's
estimate asks), the schedule, AdamW (elementwise, so a slice steps as its own tensor would) and gradient clipping
(`clip_members_`: each member's norm on its own). What does not: dropout masks are drawn for all members at once
(`randomness="different"`: independent masks at nn.Dropout's rate, a function of the first seed and the step, not the
separate runs' masks), and batched kernels round differently. So a member is its separate run in distribution, and
without dropout equal to it up to float rounding (tests/test_stacking.py). The trained slices are copied back into
the `SeedStack`'s members whenever the loop saves (`members`), which export.py saves as it saves a `SeedStack`'s.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from accelerate import Accelerator
from torch import nn
from torch.func import functional_call, vmap

from .seeds import SeedStack, SeedStackOutput, dropout_seed


class SeedEnsemble(nn.Module):
    """The members of a `SeedStack` as one module with stacked parameters; `forward` takes `SeedStack.forward`'s
    arguments and returns its output (the summed loss and each member's)."""

    def __init__(self, stack: SeedStack) -> None:
        super().__init__()
        members = list(stack.members)
        if any(getattr(m.config, "tie_word_embeddings", False) for m in members):
            raise ValueError("--stack_seeds stacks untied models only (tie_word_embeddings=False)")
        template = copy.deepcopy(members[0])
        for name, parameter in members[0].named_parameters():
            owner, _, leaf = name.rpartition(".")
            stacked = torch.stack([member.get_parameter(name).detach() for member in members])
            setattr(template.get_submodule(owner), leaf, nn.Parameter(stacked, parameter.requires_grad))
        template.base_model.caller_checks_positions = True  # `forward` checks them outside vmap
        self.stacked = template
        # the stacked Parameters by name, built once (moving the module to a device keeps the same Parameter objects)
        self._named_parameters = dict(template.named_parameters())
        self.seeds = list(stack.seeds)
        self._stack = (stack,)  # a tuple: not a submodule, so its copies are neither prepared nor saved twice
        self._losses: Callable = vmap(self._member_loss, randomness="different")

    def compiled_steps(self, compile: Callable) -> SeedEnsemble:
        """What the steps call under `--torch_compile`: this module, its vmapped members' loss compiled (seeding
        and stacking the batches stay eager)."""
        self._losses = compile(self._losses)
        return self

    def clipper(self, accelerator: Accelerator, prepared: nn.Module, max_norm: float) -> Callable[[], None]:
        """The stacked gradients clipped member by member (`clip_members_`), as the separate runs clip."""
        del accelerator
        parameters = list(prepared.parameters())
        return lambda: clip_members_(parameters, max_norm)

    def _member_loss(self, parameters: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return functional_call(self.stacked, parameters, kwargs=batch).loss

    def forward(self, batches: list[dict], step: int) -> SeedStackOutput:
        torch.manual_seed(dropout_seed(self.seeds[0], step))
        batch = {key: torch.stack([b[key] for b in batches]) for key in batches[0]}
        if "position_ids" in batch:
            self.stacked.base_model.check_positions(batch["position_ids"])
        losses = self._losses(self._named_parameters, batch)
        return SeedStackOutput(loss=losses.sum(), losses=losses)

    @property
    def members(self) -> list[nn.Module]:
        """The `SeedStack`'s member models holding the trained slices (copied now): what export.py saves."""
        (stack,) = self._stack
        with torch.no_grad():
            for name, parameter in self.stacked.named_parameters():
                for i, member in enumerate(stack.members):
                    member.get_parameter(name).copy_(parameter[i])
        return list(stack.members)


def clip_members_(parameters: list[nn.Parameter], max_norm: float) -> torch.Tensor:
    """`torch.nn.utils.clip_grad_norm_` for each member of stacked `parameters` on its own (dimension 0 is the
    member): member i's gradients are scaled by min(1, max_norm / (norm_i + 1e-6)). Returns the N norms.
    One norm per tensor and one multi-tensor multiply: a GPU step is bound by the operations it launches."""
    grads = [p.grad for p in parameters if p.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(g, dim=tuple(range(1, g.dim()))) for g in grads])
    total = torch.linalg.vector_norm(norms, dim=0)
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    shaped = {d: scale.view(-1, *[1] * (d - 1)) for d in {g.dim() for g in grads}}  # one view per rank
    torch._foreach_mul_(grads, [shaped[g.dim()] for g in grads])
    return total

"""Seeds: the dropout seed of a step, and several seeds trained in one process (`--seeds 0,1,2`).

A separate run with `--seed S --device_data True` is a function of S alone: the model is built right after
`set_seed(S)`, batch `step` is `DeviceBatches(seed=S)(step)`, and the step's dropout masks come from
`torch.manual_seed(dropout_seed(S, step))`. `--seeds` trains N such runs in lockstep, and each member computes
exactly what its separate run computes:

* init: member i is built right after `set_seed(seed_i)` (`SeedStack.build`);
* data: one `DeviceBatches` per seed (`SeedBatches`): the batch of step k is a list, member i's being its run's;
* dropout: `SeedStack.forward` reseeds with `dropout_seed(seed_i, step)` before member i's forward, `step` being
  the loop's optimizer step;
* gradients: the loss is the SUM of the members' losses and their parameters are disjoint, so member i's
  gradient is its run's; the loop clips each member's norm on its own (`SeedStack.clipper`);
* optimizer and schedule: one AdamW over every member's tensors with the same two groups is elementwise the
  same per tensor, and every member sees the same examples per step, hence the same learning rate.

On one CPU thread member S ends bit-for-bit equal to the separate run (tests/test_multiseed.py); with more threads,
or on a GPU, kernels that accumulate in a varying order (the learned position embedding's gradient on CPU, atomics
on a GPU) make even two separate runs of one seed differ in the last bits. The members run one after
the other inside a step, so neither the models' arithmetic nor their kernel launches are shared; what is: the
start-up and the loop's per-step work (one optimizer step over every member's tensors, one loss read-back for all).
results/bench_seeds_cpu.json measures what that saves. fp16 is refused: its one loss scaler would skip a step
for every member when one overflows. `--torch_compile` compiles each member on its own (the loop's `compile_model`), so
the reseeding between members stays outside the compiled graphs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from transformers.utils import ModelOutput

from data_scripts import DeviceBatches


def dropout_seed(seed: int, step: int, process_index: int = 0) -> int:
    """The global RNG seed of optimizer step `step`: dropout masks are a function of (seed, step, process), so a
    resumed run draws what an uninterrupted one would, and a `--seeds` member what its separate run would."""
    return (seed * 1_000_003 + step) * 256 + process_index


def seeds_card(seeds: list[int] | None, stack_seeds: bool) -> dict[str, str]:
    """The model card's record of how a `--seeds` member was trained (nothing for a plain run)."""
    if seeds is None:
        return {}
    return {"trained_with_seeds": ",".join(map(str, seeds)) + (" (stacked)" if stack_seeds else "")}


def models_for(make_model: Callable[[int | None], nn.Module], seeds: list[int] | None) -> nn.Module:
    """The model a run trains: `make_model(None)`, or with --seeds a `SeedStack` whose member S is `make_model(S)`;
    the scripts build either the same way."""
    return make_model(None) if seeds is None else SeedStack.build(make_model, seeds)


def members_of(model: nn.Module) -> list[nn.Module]:
    """The models a run saves: the model itself, or each member of a --seeds run."""
    return list(getattr(model, "members", [model]))


@dataclass
class SeedStackOutput(ModelOutput):
    """`loss`: the sum of the members' losses (what backward needs); `losses`: each member's, in seed order."""

    loss: torch.Tensor | None = None
    losses: torch.Tensor | None = None


class SeedStack(nn.Module):
    """N independent models trained as one module: disjoint parameters, one forward and backward per step."""

    def __init__(self, members: Iterable[nn.Module], seeds: Sequence[int]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)
        self.seeds = list(seeds)
        if len(self.members) != len(self.seeds):
            raise ValueError(f"{len(self.members)} members for {len(self.seeds)} seeds")

    @classmethod
    def build(cls, make_model: Callable[[int], nn.Module], seeds: Sequence[int]) -> SeedStack:
        """Member S is `make_model(S)`, called right after `set_seed(S)`, as a separate run builds its model after
        `make_accelerator` seeds: the same init."""
        members = []
        for seed in seeds:
            set_seed(seed)
            members.append(make_model(seed))
        return cls(members, seeds)

    def forward(self, batches: Sequence[dict], step: int) -> SeedStackOutput:
        """Member i on `batches[i]`, its dropout seeded as its separate run seeds optimizer step `step` (the loop's
        global step)."""
        losses = []
        for seed, member, batch in zip(self.seeds, self.members, batches, strict=True):
            torch.manual_seed(dropout_seed(seed, step))
            losses.append(member(**batch).loss)
        stacked = torch.stack(losses)
        return SeedStackOutput(loss=stacked.sum(), losses=stacked)

    def compiled_steps(self, compile: Callable[[nn.Module], nn.Module]) -> SeedStack:
        """What the steps call under `--torch_compile`: each member compiled on its own, the dropout reseeding
        between them outside (the members' parameters are shared, so saving keeps using this stack)."""
        return SeedStack([compile(member) for member in self.members], self.seeds)

    def clipper(self, accelerator: Accelerator, prepared: nn.Module, max_norm: float) -> Callable[[], None]:
        """Each member's gradient norm clipped on its own, as its separate run clips (`prepared`, the stack as
        Accelerate wrapped it, shares the members' parameters)."""
        del prepared
        groups = [list(member.parameters()) for member in self.members]

        def clip() -> None:
            for parameters in groups:
                accelerator.clip_grad_norm_(parameters, max_norm)

        return clip


class SeedBatches:
    """One `DeviceBatches` per seed, stepped together: batch `step` is ``{"batches": [...], "num_examples": n}``,
    member i's batch of its separate run and the example count the schedule needs (the same for every member: the
    same examples, other draws)."""

    def __init__(self, members: Sequence[DeviceBatches]) -> None:
        if len({len(m) for m in members}) != 1 or len({len(m.examples) for m in members}) != 1:
            raise ValueError("every member needs the same examples and batch size")
        self.members = list(members)

    def __len__(self) -> int:
        return len(self.members[0])

    def __call__(self, step: int) -> dict:
        batches = [member(step) for member in self.members]
        counts = {batch.pop("num_examples") for batch in batches}
        (num_examples,) = counts
        positions = [batch.pop("num_positions") for batch in batches]  # each member's
        return {"batches": batches, "num_examples": num_examples, "num_positions": positions}

    def epoch(self, epoch: int, skip: int = 0) -> Iterator[dict]:
        """As `DeviceBatches.epoch`: the batches of `epoch` from its batch `skip` on, each with its optimizer step
        (`SeedStack.forward` seeds each member's dropout with it)."""
        steps = len(self)
        for k in range(skip, steps):
            yield {**self(epoch * steps + k), "step": epoch * steps + k}

    def compile_packing(self, backend: str | None = None) -> None:
        """As `DeviceBatches.compile_packing`, for every member."""
        for member in self.members:
            member.compile_packing(backend)

    def dropped(self) -> int:
        """Examples left out of their packed rows, summed over the members (a host sync, as `DeviceBatches`)."""
        return sum(member.dropped() for member in self.members)

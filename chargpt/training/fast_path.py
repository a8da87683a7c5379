"""The fast path as the loop sees it: one batch source (chargpt/training/batching.py's `BatchSource`).

`device_batches` builds it for `--device_data True`: batches drawn and packed on the device from the step alone
(data_scripts/device_batches.py), one `DeviceBatches` per seed with `--seeds` (chargpt/training/seeds.py), their
models stacked into one with `--stack_seeds` (chargpt/training/stacking.py). The source sets up that model, compiles
and clips it as its kind needs, and the loop knows none of this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from accelerate import Accelerator
from torch import nn
from torch.optim import Optimizer

from data_scripts import DeviceBatches, EncodedExamples

from .arguments import TrainingArguments
from .batching import clip_whole
from .errors import UsageError
from .seeds import SeedBatches
from .stacking import SeedEnsemble


class OnDeviceBatches:
    """Batches built on the device (one run's `DeviceBatches`, or a `--seeds` run's `SeedBatches`) as a batch
    source: one process only, no DataLoader; the model trained is the `SeedStack` the script built, or with
    `stacked` its members as one `SeedEnsemble`, which compile and clip member by member as their separate runs."""

    def __init__(self, source: DeviceBatches | SeedBatches, seeds: list[int] | None = None,
                 stacked: bool = False) -> None:
        self.source, self.seeds, self.stacked = source, seeds, stacked

    def setup(self, accelerator: Accelerator, model: nn.Module, make_optimizer: Callable[[nn.Module], Optimizer],
              args: TrainingArguments) -> tuple[nn.Module, Optimizer]:
        if accelerator.num_processes > 1:
            flag = "--seeds" if self.seeds is not None else "--device_data True"
            raise UsageError(f"{flag} runs in one process; launch without --num_processes")
        if self.stacked:
            model = SeedEnsemble(model)
        model, optimizer = accelerator.prepare(model, make_optimizer(model))
        if args.torch_compile_batches:
            self.source.compile_packing(args.torch_compile_backend)
        return model, optimizer

    def compile(self, model: nn.Module, compile: Callable[[nn.Module], nn.Module]) -> nn.Module:
        """The steps compiled: one model whole; a `--seeds` model each member on its own (`compiled_steps`), so the
        dropout reseeding between members stays outside the compiled graphs."""
        return compile(model) if self.seeds is None else model.compiled_steps(compile)

    def clipper(self, accelerator: Accelerator, model: nn.Module, max_norm: float) -> Callable[[], None]:
        """The gradient norm clipped as a separate run clips it: the model's, or each member's on its own."""
        if self.seeds is not None:
            return accelerator.unwrap_model(model).clipper(accelerator, model, max_norm)
        return clip_whole(accelerator, model, max_norm)

    def __len__(self) -> int:
        return len(self.source)

    def epoch(self, epoch: int, skip: int = 0) -> Iterable[dict]:
        return self.source.epoch(epoch, skip)

    def dropped(self) -> int:
        return self.source.dropped()


def device_batches(examples: EncodedExamples, args: TrainingArguments, seeds: list[int] | None) -> OnDeviceBatches:
    """`--device_data`'s batches of `examples`: the run's (drawn from --seed), or with `seeds` one `DeviceBatches`
    per member, each its separate run's (with `--stack_seeds` all packed into as many rows as the most any asks).
    The fixed rows per step are --packed_rows, or estimated. On a CPU an eager step computes only the rows that hold a
    target (`trim_rows`); a GPU, a compiled step and stacked members keep the fixed rows (no host read, static
    shapes)."""
    rows, size = args.packed_rows, args.per_device_train_batch_size  # checked with the flags (check_training)
    trim = examples.device.type == "cpu" and not args.torch_compile and not args.stack_seeds
    batches = [DeviceBatches(examples, size, seed=seed, shuffle=args.shuffle, packing=args.packing, rows=rows,
                             trim=trim) for seed in seeds or [args.seed]]
    if seeds is not None and args.stack_seeds:  # stacked members need batches of one shape
        rows = max(member.rows for member in batches)
        for member in batches:
            member.rows = rows
    if seeds is None:
        return OnDeviceBatches(batches[0])
    return OnDeviceBatches(SeedBatches(batches), seeds, stacked=args.stack_seeds)

"""The one Accelerate training loop that pretraining and finetuning share: minGPT's trainer, resumable.

Around it: `make_accelerator` (precision, seeding, CPU subnormals) and `build_optimizer` (the reference AdamW).
Checkpoints are `training.checkpoints`, the saved model and snapshots `training.export`, Ctrl-C
`training.stopping`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable
from functools import partial

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, ProjectConfiguration, set_seed
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizer
from transformers.utils import logging

from .arguments import TrainingArguments
from .batching import CountingCollate
from .checkpoints import find_latest_checkpoint, load_checkpoint, resolve_checkpoint, save_checkpoint
from .errors import TrainingDivergedError
from .export import save_final, save_snapshot
from .precision import resolve_precision
from .schedule import TokenCosineSchedule
from .state import TrainResult, TrainState
from .stopping import StopRequest

logger = logging.get_logger(__name__)


def make_accelerator(args: TrainingArguments) -> Accelerator:
    """Accelerator for this run; call it (and seed) before building the model so init is reproducible."""
    precision = resolve_precision(args.mixed_precision)
    accelerator = Accelerator(
        mixed_precision=precision,
        log_with=None if args.report_to == "none" else args.report_to,
        project_config=ProjectConfiguration(
            project_dir=args.output_dir, logging_dir=os.path.join(args.output_dir, "runs")
        ),
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True, data_seed=args.seed),
    )
    set_seed(args.seed)
    if accelerator.device.type == "cpu":
        # Subnormal floats appear in the weights, gradients and Adam moments as training goes on; x86 CPUs
        # process them ~100x slower, which made steps 1.8x slower after a few epochs. Flushing them to zero
        # (|x| < 1.2e-38) changes no result that matters; GPUs run subnormals at full speed anyway.
        torch.set_flush_denormal(True)
    return accelerator


def build_optimizer(model: torch.nn.Module, args: TrainingArguments, lr: float) -> torch.optim.AdamW:
    """AdamW with two groups; which parameters decay is `--weight_decay_scope` (see its help)."""
    if args.weight_decay_scope == "reference":
        decay = {n for n, _ in model.named_parameters() if "bias" not in n}
    else:
        linears = [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
        decay = {f"{name}.weight" if name else "weight" for name in linears}
    params = dict(model.named_parameters())
    groups = [
        {"params": [p for n, p in params.items() if n in decay], "weight_decay": args.weight_decay},
        {"params": [p for n, p in params.items() if n not in decay], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(args.adam_beta1, args.adam_beta2))


def train(
    accelerator: Accelerator,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizer,
    train_dataset: torch.utils.data.Dataset,
    collate_fn: Callable,
    args: TrainingArguments,
    *,
    final_tokens: int,
    tokens_per_example: int,
    on_epoch_start: Callable[[int], None] | None = None,
    card: dict | None = None,
    run_name: str = "chargpt",
) -> TrainResult:
    """Train with the reference optimiser and token schedule, resumably; save the model when done.

    `tokens_per_example` is what the reference schedule counts per example (block_size - 1 target positions,
    PAD included), so packing changes the compute but not the schedule. `on_epoch_start(epoch)` lets the
    corruption transform re-draw for each epoch.
    """
    card, start = dict(card or {}), time.perf_counter()
    loader = DataLoader(train_dataset, batch_size=args.per_device_train_batch_size, shuffle=args.shuffle,
                        collate_fn=CountingCollate(collate_fn), num_workers=args.dataloader_num_workers)
    optimizer = build_optimizer(model, args, args.learning_rate)
    schedule = TokenCosineSchedule(optimizer, args.learning_rate, args.warmup_tokens, final_tokens
                                   if args.final_tokens is None else args.final_tokens, decay=args.lr_decay)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    state = _start_state(accelerator, args, schedule, steps_per_epoch=len(loader))
    total_steps = len(loader) * args.num_train_epochs
    total_steps = min(total_steps, args.max_steps) if args.max_steps > 0 else total_steps
    progress = _Progress(accelerator, args, state, total_steps, start, run_name, card)
    checkpoint = partial(save_checkpoint, accelerator, args.output_dir, args.save_total_limit, state, schedule)
    save_epochs = {int(e) for e in args.save_epochs.split(",") if e.strip()}

    model.train()
    stop, interrupted = StopRequest().install(), False
    try:
        while state.epoch < args.num_train_epochs and state.global_step < total_steps:
            for batch in _epoch_batches(accelerator, loader, state, on_epoch_start):
                n_examples = int(batch.pop("num_examples"))
                loss = _optimizer_step(accelerator, model, optimizer, batch, args, state)
                lr = schedule.step(n_examples * tokens_per_example * accelerator.num_processes)
                state.advance(loss)
                progress.step(lr)
                if args.checkpointing_steps > 0 and state.global_step % args.checkpointing_steps == 0:
                    checkpoint()
                if stop.anywhere(accelerator):
                    raise KeyboardInterrupt
                if state.global_step >= total_steps:
                    break
            else:  # a whole epoch (a run stopped by max_steps or at the end keeps its last epoch open)
                state.end_epoch()
                if state.epoch in save_epochs:
                    save_snapshot(accelerator, model, tokenizer, args.output_dir, state, time.perf_counter() - start)
    except KeyboardInterrupt:
        interrupted = True
        progress.bar.close()
        logger.warning("interrupted: saved %s; continue with --resume_from_checkpoint latest", checkpoint())
    finally:
        stop.restore()
    progress.close()
    epochs_done = round(state.epoch + state.step_in_epoch / max(1, len(loader)), 3)
    result = TrainResult(state.global_step, epochs_done, state.last_loss, state.losses,
                         time.perf_counter() - start, interrupted)
    if not interrupted:
        if args.checkpointing_steps > 0 and state.global_step % args.checkpointing_steps != 0:
            checkpoint()
        save_final(accelerator, model, tokenizer, args.output_dir, result, card)
    return result


def _start_state(
    accelerator: Accelerator, args: TrainingArguments, schedule: TokenCosineSchedule, steps_per_epoch: int
) -> TrainState:
    """A new run's counters, or those of `--resume_from_checkpoint` (with the model, optimizer, RNG and schedule)."""
    if not args.resume_from_checkpoint:
        return TrainState()
    path = resolve_checkpoint(args.output_dir, args.resume_from_checkpoint)
    state = load_checkpoint(accelerator, path, schedule)
    if state.step_in_epoch >= steps_per_epoch:  # saved after an epoch's last batch
        state.end_epoch()
    logger.info("resumed from %s at step %d (epoch %d, batch %d)", path, state.global_step, state.epoch,
                state.step_in_epoch)
    return state


def _epoch_batches(
    accelerator: Accelerator, loader: DataLoader, state: TrainState, on_epoch_start: Callable[[int], None] | None
) -> Iterable[dict]:
    """The current epoch's batches after the ones `state` has already trained on (a resumed run skips them)."""
    if on_epoch_start is not None:
        on_epoch_start(state.epoch)
    loader.set_epoch(state.epoch)
    return accelerator.skip_first_batches(loader, state.step_in_epoch) if state.step_in_epoch else loader


def _optimizer_step(
    accelerator: Accelerator, model: PreTrainedModel, optimizer: torch.optim.Optimizer, batch: dict,
    args: TrainingArguments, state: TrainState,
) -> float:
    """Forward, backward, clip and step on one batch; returns its loss. A NaN or infinite loss stops the run before
    it reaches the weights, naming the last good checkpoint."""
    # Dropout masks are a function of (seed, step, process): a resumed run draws exactly what an uninterrupted one
    # would, whatever the DataLoader iterators consumed from the global RNG.
    torch.manual_seed((args.seed * 1_000_003 + state.global_step) * 256 + accelerator.process_index)
    loss = model(**batch).loss
    loss_value = loss.item()
    if not math.isfinite(loss_value):
        latest = find_latest_checkpoint(args.output_dir)
        raise TrainingDivergedError(
            f"loss became {loss_value} at step {state.global_step + 1} (epoch {state.epoch + 1}); stopped before "
            f"updating the weights. Last good checkpoint: {latest or 'none'}. Try a lower --learning_rate."
        )
    accelerator.backward(loss)
    if args.max_grad_norm > 0:
        accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss_value


class _Progress:
    """The progress bar, a log line every 10 logging steps when it is off, and the trackers (TensorBoard)."""

    def __init__(self, accelerator: Accelerator, args: TrainingArguments, state: TrainState, total_steps: int,
                 start: float, run_name: str, card: dict) -> None:
        self.accelerator, self.args, self.state, self.total_steps = accelerator, args, state, total_steps
        self.start, self.first_step = start, state.global_step
        if accelerator.is_main_process and args.report_to != "none":
            hparams = {k: v for k, v in {**vars(args), **card}.items() if isinstance(v, (int, float, str, bool))}
            accelerator.init_trackers(run_name, config=hparams)
        self.bar = tqdm(total=total_steps, initial=state.global_step, desc=run_name, dynamic_ncols=True,
                        disable=not accelerator.is_local_main_process or args.disable_tqdm)

    def step(self, lr: float) -> None:
        """Report the step `state` has just counted; `lr` is the rate the schedule set for the next one."""
        args, state, loss = self.args, self.state, self.state.last_loss
        self.bar.update(1)
        self.bar.set_postfix(epoch=state.epoch + 1, loss=f"{loss:.4f}", lr=f"{lr:.2e}", refresh=False)
        main_process = self.accelerator.is_main_process
        if args.disable_tqdm and main_process and state.global_step % (10 * args.logging_steps) == 0:
            seconds_per_step = (time.perf_counter() - self.start) / (state.global_step - self.first_step)
            logger.info("step %d/%d epoch %d loss %.4f lr %.2e %.2fs/step", state.global_step, self.total_steps,
                        state.epoch + 1, loss, lr, seconds_per_step)
        if args.report_to != "none" and state.global_step % args.logging_steps == 0:
            self.accelerator.log({"train/loss": loss, "train/lr": lr, "train/epoch": state.epoch + 1},
                                 step=state.global_step)

    def close(self) -> None:
        self.bar.close()
        if self.args.report_to != "none":
            self.accelerator.end_training()

"""The one Accelerate training loop that pretraining and finetuning share: minGPT's trainer, resumable.

Around it: `make_accelerator` (precision, seeding, CPU subnormals), `build_optimizer` (the reference AdamW) and
`compile_model` (`--torch_compile`).
Checkpoints are `chargpt.training.checkpoints`, the saved model and snapshots `chargpt.training.export`, Ctrl-C
`chargpt.training.stopping`, the losses kept on the device between sync points `chargpt.training.syncing`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import partial

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, ProjectConfiguration, set_seed
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizer
from transformers.utils import logging

from .arguments import OPTIMIZERS, TrainingArguments
from .batching import BatchSource, LoaderBatches
from .checkpoints import load_checkpoint, resolve_checkpoint, run_identity, save_checkpoint
from .errors import UsageError
from .export import save_final, save_snapshot
from .flops import flops_per_position
from .outputs import check_output_dir
from .precision import allow_tf32, resolve_precision
from .schedule import TokenCosineSchedule
from .seeds import dropout_seed
from .state import Loss, TrainResult, TrainState
from .stopping import StopRequest
from .syncing import LossWindow, resolve_sync_steps

logger = logging.get_logger(__name__)


def make_accelerator(args: TrainingArguments) -> Accelerator:
    """Accelerator for this run; call it (and seed) before building the model so init is reproducible. A bad
    `--output_dir` fails here, before any data is read."""
    check_output_dir(args.output_dir, args.overwrite_output_dir, resuming=bool(args.resume_from_checkpoint))
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


def build_optimizer(
    model: torch.nn.Module, args: TrainingArguments, lr: float, device: torch.device | None = None
) -> torch.optim.AdamW:
    """AdamW with two groups; which parameters decay is `--weight_decay_scope`, which implementation `--optim` (see
    their help). `device` is where training runs: a capturable AdamW cannot step on a CPU, so there it is the
    default one."""
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
    implementation = OPTIMIZERS[args.optim]
    if implementation.get("capturable") and device is not None and device.type == "cpu":
        logger.info("--optim %s has no effect on cpu (no CUDA graphs there): the default AdamW", args.optim)
        implementation = {}
    return torch.optim.AdamW(groups, lr=lr, betas=(args.adam_beta1, args.adam_beta2), **implementation)


def compile_model(model: torch.nn.Module, args: TrainingArguments, batches: BatchSource) -> torch.nn.Module:
    """`--torch_compile`: the model the steps call, compiled with `--torch_compile_mode` and `--torch_compile_backend`
    as its batch source compiles it (or `model` itself without the flag). The compiled wrapper shares `model`'s
    parameters; everything that saves keeps using `model`, so no `_orig_mod.` prefix reaches a checkpoint or the saved
    weights."""
    if not args.torch_compile:
        return model
    backend = args.torch_compile_backend or "inductor"
    compile = partial(torch.compile, mode=args.torch_compile_mode, backend=backend)
    try:
        compiled = batches.compile(model, compile)
    except RuntimeError as err:  # an unknown mode or backend; torch's message lists the valid ones
        raise UsageError(f"--torch_compile_mode {args.torch_compile_mode} --torch_compile_backend {backend}: "
                         f"{err}") from None
    logger.info("training steps compiled with torch.compile (backend %s, mode %s); the first steps compile",
                backend, args.torch_compile_mode or "default")
    return compiled


def train(
    accelerator: Accelerator,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizer,
    train_dataset: torch.utils.data.Dataset | BatchSource,
    collate_fn: Callable | None,
    args: TrainingArguments,
    *,
    final_tokens: int,
    tokens_per_example: int,
    on_epoch_start: Callable[[int], None] | None = None,
    card: dict | None = None,
    run_name: str = "chargpt",
) -> TrainResult:
    """Train with the reference optimiser and token schedule, resumably; save the model when done.

    `tokens_per_example` is what the reference schedule counts per example (the length of its y, PAD included), so
    packing changes the compute but not the schedule. `on_epoch_start(epoch)` lets span corruption re-draw each
    epoch. `train_dataset` is a dataset (read through a DataLoader) or any other batch source
    (chargpt/training/batching.py): the fast path's is chargpt/training/fast_path.py.
    Losses are read back every `--sync_steps` steps and before every save; the NaN check, logs and Ctrl-C act there.
    """
    start = time.perf_counter()  # the run's wall time counts setting it up too
    if not hasattr(train_dataset, "setup"):
        train_dataset = LoaderBatches(train_dataset, collate_fn, on_epoch_start)
    model, optimizer, batches = _prepare(accelerator, model, args, train_dataset)
    schedule = TokenCosineSchedule(optimizer, args.learning_rate, args.warmup_tokens, final_tokens
                                   if args.final_tokens is None else args.final_tokens, decay=args.lr_decay)
    step_model = compile_model(model, args, batches)
    clip = batches.clipper(accelerator, model, args.max_grad_norm) if args.max_grad_norm > 0 else lambda: None
    run = _Run(accelerator, model, tokenizer, args, schedule, batches, run_name, card, start)
    state = run.state
    model.train()
    stop, interrupted = StopRequest().install(), False
    restore_precision = allow_tf32(args.tf32, accelerator.device)
    try:
        while not run.done():
            for batch in batches.epoch(state.epoch, skip=state.step_in_epoch):
                n_examples = int(batch.pop("num_examples"))
                state.count(batch.pop("num_positions") * accelerator.num_processes)  # a list (--seeds) has one process
                sync = _syncs_at(state.global_step + 1, run.sync_steps, args.checkpointing_steps, run.total_steps)
                _optimizer_step(accelerator, step_model, optimizer, batch, args, state, run.window, sync, clip)
                lr = schedule.step(n_examples * tokens_per_example * accelerator.num_processes)
                state.advance()
                run.progress.step(lr)
                if not sync:
                    continue
                run.progress.report(run.window.take())
                if args.checkpointing_steps > 0 and state.global_step % args.checkpointing_steps == 0:
                    run.checkpoint()
                if stop.anywhere(accelerator):
                    raise KeyboardInterrupt
                if state.global_step >= run.total_steps or run.out_of_time():
                    break
            else:  # a whole epoch (a run stopped by max_steps or at the end keeps its last epoch open)
                state.end_epoch()
                if state.epoch in run.save_epochs:
                    run.flush()
                    save_snapshot(accelerator, model, tokenizer, args.output_dir, state, run.seconds())
    except KeyboardInterrupt:
        interrupted = True
        run.window.drop_after(state.global_step)  # a second Ctrl-C can land inside a step not counted yet
        run.progress.bar.close()
        logger.warning("interrupted: saved %s; continue with --resume_from_checkpoint latest", run.checkpoint())
    except BaseException:  # the error is the last thing the user sees: no bar redrawn below it
        run.progress.close()
        raise
    finally:
        stop.restore()
        restore_precision()
    return run.finish(batches, interrupted)


def _prepare(accelerator: Accelerator, model: torch.nn.Module, args: TrainingArguments,
             batches: BatchSource) -> tuple[torch.nn.Module, torch.optim.Optimizer, BatchSource]:
    """The model and the reference AdamW, set up by the batch source (prepared by Accelerate), and the source."""
    model, optimizer = batches.setup(accelerator, model, partial(build_optimizer, args=args, lr=args.learning_rate,
                                                                 device=accelerator.device), args)
    return model, optimizer, batches


class _Run:
    """One run's bookkeeping around its steps: the counters (new or resumed), wall time, progress, the losses still
    on the device, checkpoints, and the end (the last checkpoint and the saved model)."""

    def __init__(self, accelerator: Accelerator, model: torch.nn.Module, tokenizer: PreTrainedTokenizer,
                 args: TrainingArguments, schedule: TokenCosineSchedule, batches: BatchSource,
                 run_name: str, card: dict | None, start: float) -> None:
        self.start = start
        self.accelerator, self.model, self.tokenizer, self.args = accelerator, model, tokenizer, args
        self.card = dict(card or {})
        seeds, steps_per_epoch = batches.seeds, len(batches)
        identity = run_identity(accelerator.unwrap_model(model), tokenizer, run_name)
        self.state = state = _start_state(accelerator, args, schedule, steps_per_epoch, seeds, batches.stacked,
                                          identity)
        self.seconds_before = state.train_seconds  # a resumed run's seconds count its earlier processes too
        total = steps_per_epoch * args.num_train_epochs
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = min(total, args.max_steps) if args.max_steps > 0 else total
        self.progress = _Progress(accelerator, args, state, self.total_steps, self.start, run_name, self.card, seeds)
        self.save = partial(save_checkpoint, accelerator, args.output_dir, args.save_total_limit, state, schedule,
                            identity)
        self.save_epochs = {int(e) for e in args.save_epochs.split(",") if e.strip()}
        self.sync_steps = resolve_sync_steps(args.sync_steps, args.logging_steps, accelerator)
        self.window = LossWindow(args.output_dir, self.sync_steps, seeds)
        self.timed_out = False

    def seconds(self) -> float:
        return self.seconds_before + time.perf_counter() - self.start

    def out_of_time(self) -> bool:
        """Whether `--max_time_seconds` of this process's training have passed, agreed by every process (all stop at
        the same step, or the others would hang in the next reduce)."""
        if self.args.max_time_seconds <= 0 or self.timed_out:
            return self.timed_out
        late = time.perf_counter() - self.start >= self.args.max_time_seconds
        if self.accelerator.num_processes > 1:
            flag = torch.tensor(float(late), device=self.accelerator.device)
            late = self.accelerator.reduce(flag, reduction="sum").item() > 0
        self.timed_out = late
        return late

    def done(self) -> bool:
        state = self.state
        return (state.epoch >= self.args.num_train_epochs or state.global_step >= self.total_steps
                or self.timed_out)

    def flush(self) -> None:
        """Read back and report every loss still on the device: before saving, the weights must be checked."""
        self.window.read_back(self.state.global_step + 1)
        self.progress.report(self.window.take())

    def checkpoint(self) -> os.PathLike:
        self.flush()
        self.state.train_seconds = self.seconds()
        return self.save()

    def finish(self, batches: BatchSource, interrupted: bool) -> TrainResult:
        """The result; unless interrupted (its checkpoint is saved already), the last checkpoint and the model."""
        state, args = self.state, self.args
        if not interrupted:
            self.flush()
        dropped = batches.dropped()
        if dropped:
            logger.warning("%d examples found no room in their packed rows and were left out of the loss", dropped)
        self.progress.close()
        epochs_done = round(state.epoch + state.step_in_epoch / max(1, self.steps_per_epoch), 3)
        per_position = flops_per_position(self.accelerator.unwrap_model(self.model))
        result = TrainResult(state.global_step, epochs_done, state.last_loss, state.losses, self.seconds(),
                             interrupted, stopped_at_time_limit=self.timed_out and state.global_step < self.total_steps,
                             train_positions=state.train_positions, flops_per_position=per_position)
        if not interrupted:
            just_saved = args.checkpointing_steps > 0 and state.global_step % args.checkpointing_steps == 0
            if (args.checkpointing_steps > 0 or result.stopped_at_time_limit) and not just_saved:
                self.checkpoint()  # a run stopped at its time limit can always go on
            save_final(self.accelerator, self.model, self.tokenizer, args.output_dir, result, self.card)
            if result.stopped_at_time_limit:
                logger.warning("stopped at --max_time_seconds %g after step %d of %d: saved the model as it is in %s; "
                               "--resume_from_checkpoint latest goes on", args.max_time_seconds, state.global_step,
                               self.total_steps, args.output_dir)
        return result


def _start_state(
    accelerator: Accelerator, args: TrainingArguments, schedule: TokenCosineSchedule, steps_per_epoch: int,
    seeds: list[int] | None, stacked: bool, identity: dict,
) -> TrainState:
    """A new run's counters, or those of `--resume_from_checkpoint` (with the model, optimizer, RNG and schedule)."""
    if not args.resume_from_checkpoint:
        return TrainState(seeds=seeds, stacked=stacked)
    path = resolve_checkpoint(args.output_dir, args.resume_from_checkpoint)
    state = load_checkpoint(accelerator, path, schedule, seeds, stacked, identity)
    if state.step_in_epoch >= steps_per_epoch:  # saved after an epoch's last batch
        state.end_epoch()
    logger.info("resumed from %s at step %d (epoch %d, batch %d)", path, state.global_step, state.epoch,
                state.step_in_epoch)
    return state


def _syncs_at(step: int, sync_steps: int, checkpointing_steps: int, total_steps: int) -> bool:
    """Whether optimizer step `step` reads the losses back: every `sync_steps`, at checkpoints and at the end."""
    checkpoint_due = checkpointing_steps > 0 and step % checkpointing_steps == 0
    return step % sync_steps == 0 or checkpoint_due or step >= total_steps


def _optimizer_step(
    accelerator: Accelerator, model: PreTrainedModel, optimizer: torch.optim.Optimizer, batch: dict,
    args: TrainingArguments, state: TrainState, window: LossWindow, sync: bool, clip: Callable[[], None],
) -> None:
    """Forward, backward, `clip` and step on one batch, its loss kept in `window`. At a sync point the window is
    read back first: a NaN or infinite loss stops the run (before this step reaches the weights), naming the last
    good checkpoint."""
    # Dropout masks are a function of (seed, step, process) (`dropout_seed`), whatever the DataLoader iterators
    # consumed from the global RNG (a `--seeds` model reseeds before each member). Seeding is a host operation.
    torch.manual_seed(dropout_seed(args.seed, state.global_step, accelerator.process_index))
    output = model(**batch)
    loss = output.loss
    window.add(state.global_step + 1, state.epoch, output.get("losses", loss))
    if sync:
        window.read_back(state.global_step + 1)
    accelerator.backward(loss)
    clip()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


class _Progress:
    """The progress bar, a log line every 10 logging steps when it is off, and the trackers (TensorBoard).

    The bar moves every step; losses are reported when they are read back from the device, each under its own step
    with the learning rate of that step, so the logs are the same whatever `--sync_steps`.
    """

    def __init__(self, accelerator: Accelerator, args: TrainingArguments, state: TrainState, total_steps: int,
                 start: float, run_name: str, card: dict, seeds: list[int] | None = None) -> None:
        self.accelerator, self.args, self.state, self.total_steps = accelerator, args, state, total_steps
        self.seeds = seeds
        self.start, self.first_step = start, state.global_step
        self.lrs: dict[int, float] = {}  # learning rate after each step whose loss is not reported yet
        if accelerator.is_main_process and args.report_to != "none":
            hparams = {k: v for k, v in {**vars(args), **card}.items() if isinstance(v, (int, float, str, bool))}
            accelerator.init_trackers(run_name, config=hparams)
        self.bar = tqdm(total=total_steps, initial=state.global_step, desc=run_name, dynamic_ncols=True,
                        disable=not accelerator.is_local_main_process or args.disable_tqdm)

    def step(self, lr: float) -> None:
        """Count the step `state` has just counted; `lr` is the rate the schedule set for the next one."""
        self.bar.update(1)
        self.lrs[self.state.global_step] = lr

    def report(self, losses: list[tuple[int, int, Loss]]) -> None:
        """Record and log the `(step, epoch, loss)` of steps read back from the device, oldest first; a `--seeds`
        run shows the mean of its members' losses and logs each under its seed too."""
        args, state, main_process = self.args, self.state, self.accelerator.is_main_process
        for step, epoch, losses_read in losses:
            lr = self.lrs.pop(step)
            state.record(step, losses_read)
            members = losses_read if isinstance(losses_read, list) else []
            loss = sum(members) / len(members) if members else losses_read
            self.bar.set_postfix(epoch=epoch + 1, loss=f"{loss:.4f}", lr=f"{lr:.2e}", refresh=False)
            if args.disable_tqdm and main_process and step % (10 * args.logging_steps) == 0:
                seconds_per_step = (time.perf_counter() - self.start) / (state.global_step - self.first_step)
                logger.info("step %d/%d epoch %d loss %.4f lr %.2e %.2fs/step", step, self.total_steps, epoch + 1,
                            loss, lr, seconds_per_step)
            if args.report_to != "none" and step % args.logging_steps == 0:
                per_seed = {f"train/loss_seed_{seed}": x for seed, x in zip(self.seeds or [], members, strict=True)}
                self.accelerator.log({"train/loss": loss, "train/lr": lr, "train/epoch": epoch + 1, **per_seed},
                                     step=step)

    def close(self) -> None:
        self.bar.close()
        if self.args.report_to != "none":
            self.accelerator.end_training()

"""The one Accelerate training loop that pretraining and finetuning share."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, ProjectConfiguration, set_seed
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizer
from transformers.utils import logging

from .arguments import TrainingArguments
from .files import atomic_write_json, replace_folder
from .reporting import plot_loss_curve, write_model_card
from .schedule import TokenCosineSchedule

logger = logging.get_logger(__name__)

CHECKPOINT_DIR = "checkpoints"
TRAINER_STATE = "trainer_state.json"


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; training stopped before the bad step touched the weights."""


class StopRequest:
    """Ctrl-C as a flag the loop reads between steps; a second Ctrl-C raises at once.

    A KeyboardInterrupt raised wherever SIGINT lands can be lost (inside a `__del__` Python only prints it) and the
    run would go on to its end; a flag cannot be lost.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: object = None
        self._installed = False

    def install(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            self._previous, self._installed = signal.signal(signal.SIGINT, self._handle), True
        return self

    def restore(self) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def anywhere(self, accelerator: Accelerator) -> bool:
        """Whether any process was asked: all stop at the same step, or the others would hang in the next reduce."""
        if accelerator.num_processes == 1:
            return self.requested
        flag = torch.tensor(float(self.requested), device=accelerator.device)
        return accelerator.reduce(flag, reduction="sum").item() > 0


@dataclass
class TrainResult:
    global_step: int
    epoch: float  # epochs completed, fractional when max_steps stopped mid-epoch
    final_loss: float
    losses: list[tuple[int, float]] = field(default_factory=list)
    train_seconds: float = 0.0
    interrupted: bool = False


class CountingCollate:
    """Adds `num_examples` to each batch: packing changes the rows, not the examples the schedule counts.

    A class rather than a closure so DataLoader workers can pickle it on every OS.
    """

    def __init__(self, collate_fn: Callable) -> None:
        self.collate_fn = collate_fn

    def __call__(self, examples: list) -> dict:
        return {**self.collate_fn(examples), "num_examples": len(examples)}


def cpu_has_fast_bf16() -> bool:
    """True when this CPU has AMX bf16 tiles: bf16 matmuls ~10x faster than fp32 there (benchmarks/bench_bf16.py)."""
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(probe()) if probe is not None else False


def resolve_precision(requested: str) -> str:
    """Accelerate's `mixed_precision` for `--mixed_precision` ('auto' and 'fast' depend on the hardware)."""
    gpu_bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if requested == "auto":
        return "bf16" if gpu_bf16 else "no"
    if requested == "fast":
        return "bf16" if gpu_bf16 or (not torch.cuda.is_available() and cpu_has_fast_bf16()) else "no"
    return requested


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


def find_latest_checkpoint(output_dir: str) -> Path | None:
    root = Path(output_dir) / CHECKPOINT_DIR
    done = sorted(p for p in root.glob("step-*") if (p / TRAINER_STATE).is_file()) if root.is_dir() else []
    return done[-1] if done else None


def resolve_checkpoint(output_dir: str, spec: str) -> Path:
    if spec == "latest":
        latest = find_latest_checkpoint(output_dir)
        if latest is None:
            root = Path(output_dir) / CHECKPOINT_DIR
            raise FileNotFoundError(f"--resume_from_checkpoint latest: no checkpoint in {root}")
        return latest
    path = Path(spec)
    if not (path / TRAINER_STATE).is_file():
        raise FileNotFoundError(f"--resume_from_checkpoint {spec}: not a complete checkpoint (no {TRAINER_STATE})")
    return path


def _save_checkpoint(accelerator: Accelerator, args: TrainingArguments, state: dict) -> Path:
    """Write into a temporary folder and rename it, so a crash mid-save never leaves a broken latest checkpoint."""
    root = Path(args.output_dir) / CHECKPOINT_DIR
    final = root / f"step-{state['global_step']:08d}"
    tmp = root / f".tmp-step-{state['global_step']:08d}"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp), safe_serialization=True)
    if accelerator.is_main_process:
        atomic_write_json(tmp / TRAINER_STATE, state, indent=None)
        replace_folder(tmp, final)
        for old in sorted(root.glob("step-*"))[: -max(1, args.save_total_limit)]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def _write_pretrained(
    accelerator: Accelerator, model: PreTrainedModel, tokenizer: PreTrainedTokenizer, folder: Path, results: dict
) -> None:
    """A fresh `folder` with save_pretrained's model and tokenizer files and `train_results.json`."""
    shutil.rmtree(folder, ignore_errors=True)
    accelerator.unwrap_model(model).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    atomic_write_json(folder / "train_results.json", results, indent=None)


def _save_final(
    accelerator: Accelerator,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizer,
    args: TrainingArguments,
    result: TrainResult,
    card: dict,
) -> None:
    """save_pretrained into a temporary folder, then move the files into --output_dir."""
    accelerator.wait_for_everyone()
    if not accelerator.is_main_process:
        return
    out = Path(args.output_dir)
    tmp = out / ".tmp-final"
    summary = {
        "global_step": result.global_step,
        "epoch": result.epoch,
        "final_loss": result.final_loss,
        "train_seconds": round(result.train_seconds, 1),
    }
    _write_pretrained(accelerator, model, tokenizer, tmp, {**summary, "losses": result.losses})
    write_model_card(tmp / "README.md", {**card, **summary})
    plot_loss_curve(result.losses, tmp / "loss_curve.png", title=card.get("title", "training loss"))
    for item in tmp.iterdir():
        os.replace(item, out / item.name)
    tmp.rmdir()


def _save_snapshot(
    accelerator: Accelerator,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizer,
    args: TrainingArguments,
    epoch: int,
    global_step: int,
    loss: float,
    seconds: float,
) -> None:
    """save_pretrained the model as it is after `epoch` epochs into OUTPUT_DIR/epoch-N (atomically)."""
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        final = Path(args.output_dir) / f"epoch-{epoch}"
        tmp = Path(args.output_dir) / f".tmp-epoch-{epoch}"
        _write_pretrained(accelerator, model, tokenizer, tmp, {"epoch": epoch, "global_step": global_step,
                                                               "final_loss": loss, "train_seconds": round(seconds, 3)})
        replace_folder(tmp, final)
    accelerator.wait_for_everyone()


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
    card = dict(card or {})
    start = time.perf_counter()
    loader = DataLoader(
        train_dataset,
        batch_size=args.per_device_train_batch_size,
        shuffle=args.shuffle,
        collate_fn=CountingCollate(collate_fn),
        num_workers=args.dataloader_num_workers,
        drop_last=False,
    )
    optimizer = build_optimizer(model, args, args.learning_rate)
    schedule = TokenCosineSchedule(
        optimizer, args.learning_rate, args.warmup_tokens, final_tokens if args.final_tokens is None
        else args.final_tokens, decay=args.lr_decay,
    )
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    steps_per_epoch = len(loader)
    total_steps = steps_per_epoch * args.num_train_epochs
    if args.max_steps > 0:
        total_steps = min(total_steps, args.max_steps)
    global_step, epoch, skip, losses = 0, 0, 0, []
    if args.resume_from_checkpoint:
        path = resolve_checkpoint(args.output_dir, args.resume_from_checkpoint)
        accelerator.load_state(str(path))
        with open(path / TRAINER_STATE) as f:
            state = json.load(f)
        schedule.load_state_dict(state["schedule"])
        global_step, epoch, skip = state["global_step"], state["epoch"], state["step_in_epoch"]
        losses = [tuple(x) for x in state["losses"]]
        if skip >= steps_per_epoch:
            epoch, skip = epoch + 1, 0
        logger.info("resumed from %s at step %d (epoch %d, batch %d)", path, global_step, epoch, skip)

    if accelerator.is_main_process and args.report_to != "none":
        hparams = {k: v for k, v in {**vars(args), **card}.items() if isinstance(v, (int, float, str, bool))}
        accelerator.init_trackers(run_name, config=hparams)
    bar = tqdm(total=total_steps, initial=global_step, disable=not accelerator.is_local_main_process
               or args.disable_tqdm, desc=run_name, dynamic_ncols=True)
    step_in_epoch, last_loss, interrupted = skip, float("nan"), False
    first_step = global_step
    save_epochs = {int(e) for e in args.save_epochs.split(",") if e.strip()}

    def state_now() -> dict:
        return {"global_step": global_step, "epoch": epoch, "step_in_epoch": step_in_epoch,
                "schedule": schedule.state_dict(), "losses": losses}

    model.train()
    stop = StopRequest().install()
    try:
        while epoch < args.num_train_epochs and global_step < total_steps:
            if on_epoch_start is not None:
                on_epoch_start(epoch)
            loader.set_epoch(epoch)
            batches = accelerator.skip_first_batches(loader, skip) if skip else loader
            step_in_epoch, skip = skip, 0
            for batch in batches:
                n_examples = int(batch.pop("num_examples"))
                # Dropout masks are a function of (seed, step, process): a resumed run draws exactly what an
                # uninterrupted one would, whatever the DataLoader iterators consumed from the global RNG.
                torch.manual_seed((args.seed * 1_000_003 + global_step) * 256 + accelerator.process_index)
                loss = model(**batch).loss
                loss_value = loss.item()
                if not math.isfinite(loss_value):
                    latest = find_latest_checkpoint(args.output_dir)
                    raise TrainingDivergedError(
                        f"loss became {loss_value} at step {global_step + 1} (epoch {epoch + 1}); stopped before "
                        f"updating the weights. Last good checkpoint: {latest or 'none'}. Try a lower --learning_rate."
                    )
                accelerator.backward(loss)
                if args.max_grad_norm > 0:
                    accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                lr = schedule.step(n_examples * tokens_per_example * accelerator.num_processes)
                global_step += 1
                step_in_epoch += 1
                last_loss = loss_value
                losses.append((global_step, round(loss_value, 5)))
                bar.update(1)
                bar.set_postfix(epoch=epoch + 1, loss=f"{loss_value:.4f}", lr=f"{lr:.2e}", refresh=False)
                if args.disable_tqdm and accelerator.is_main_process and global_step % (10 * args.logging_steps) == 0:
                    logger.info("step %d/%d epoch %d loss %.4f lr %.2e %.2fs/step", global_step, total_steps,
                                epoch + 1, loss_value, lr, (time.perf_counter() - start) / (global_step - first_step))
                if args.report_to != "none" and global_step % args.logging_steps == 0:
                    accelerator.log({"train/loss": loss_value, "train/lr": lr, "train/epoch": epoch + 1},
                                    step=global_step)
                if args.checkpointing_steps > 0 and global_step % args.checkpointing_steps == 0:
                    _save_checkpoint(accelerator, args, state_now())
                if stop.anywhere(accelerator):
                    raise KeyboardInterrupt
                if global_step >= total_steps:
                    break
            else:
                epoch, step_in_epoch = epoch + 1, 0
                if epoch in save_epochs:
                    _save_snapshot(accelerator, model, tokenizer, args, epoch, global_step, last_loss,
                                   time.perf_counter() - start)
                continue
            break
    except KeyboardInterrupt:
        interrupted = True
        bar.close()
        path = _save_checkpoint(accelerator, args, state_now())
        logger.warning("interrupted: saved %s; continue with --resume_from_checkpoint latest", path)
    finally:
        stop.restore()
    bar.close()
    if args.report_to != "none":
        accelerator.end_training()
    epochs_done = round(epoch + step_in_epoch / max(1, steps_per_epoch), 3)
    result = TrainResult(global_step, epochs_done, last_loss, losses, time.perf_counter() - start, interrupted)
    if not interrupted:
        if args.checkpointing_steps > 0 and global_step % args.checkpointing_steps != 0:
            _save_checkpoint(accelerator, args, state_now())
        _save_final(accelerator, model, tokenizer, args, result, card)
    return result

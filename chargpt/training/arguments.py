"""Command-line dataclasses shared by the training scripts (parsed with `HfArgumentParser`).

Their defaults are the reference values every stage shares. Fields left at `None` differ by stage (pretraining
and finetuning use different epochs, batch sizes and learning rates) or by `--preset`:
`chargpt/training/presets.py` holds
them, and `chargpt.training.cli.parse_args` fills them in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from modeling_chargpt import ATTENTION_TYPES, POSITION_EMBEDDING_TYPES, CharGPTConfig

from .errors import UsageError
from .presets import PRESETS, REFERENCE, describe, reference_value

FLOAT32_MAX = 3.4028234663852886e38  # torch.finfo(torch.float32).max
# `--optim`: torch.optim.AdamW's keyword arguments for each implementation (names as in transformers' `--optim`)
OPTIMIZERS: dict[str, dict[str, bool]] = {
    "adamw_torch": {},
    "adamw_torch_fused": {"fused": True},
    "adamw_torch_capturable": {"capturable": True},
}


@dataclass
class ModelArguments:
    """Shape of a model built from scratch (ignored when loading `--model_name_or_path`)."""

    n_layer: int = field(default=4, metadata={"help": "Transformer blocks."})
    n_head: int = field(default=8, metadata={"help": "Attention heads per block."})
    n_embd: int = field(default=256, metadata={"help": "Hidden size."})
    block_size: int = field(default=128, metadata={"help": "Context length; examples are padded/packed to it."})
    position_embedding_type: str = field(
        default="learned", metadata={"help": "Position encoding.", "choices": list(POSITION_EMBEDDING_TYPES)}
    )
    attention_type: str = field(default="causal", metadata={"help": "Attention.", "choices": list(ATTENTION_TYPES)})
    dropout: float | None = field(
        default=None,
        metadata={"help": "embd/resid dropout: 0.1 (reference) for a new model; a loaded model keeps its own "
                  "unless this is given."},
    )
    attn_dropout: float | None = field(
        default=None, metadata={"help": "Attention dropout; defaults to --dropout (reference 0.1)."}
    )

    def dropout_overrides(self) -> dict[str, float]:
        """Config dropout fields for the rates given on the command line (or by a preset), and only those."""
        out = {}
        if self.dropout is not None:
            out.update(embd_pdrop=self.dropout, resid_pdrop=self.dropout, attn_pdrop=self.dropout)
        if self.attn_dropout is not None:
            out["attn_pdrop"] = self.attn_dropout
        return out


@dataclass
class TrainingArguments:
    """Optimisation, checkpointing and logging. `None` means: this stage's value in `chargpt/training/presets.py`."""

    output_dir: str = field(metadata={"help": "Where the model, checkpoints, logs and loss curve go."})
    push_to_hub: bool = field(
        default=False, metadata={"help": "Upload the final model to the Hugging Face Hub (token from the environment, "
                                 "as huggingface_hub reads it: HF_TOKEN or `hf auth login`)."})
    hub_model_id: str | None = field(
        default=None, metadata={"help": "The repository to push to, NAME or OWNER/NAME (default: the folder's name; "
                                "a --seeds run pushes each member to ID-seed-S)."})
    hub_private_repo: bool | None = field(
        default=None, metadata={"help": "Create the repository private (default: the Hub's default)."})
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Replace the final model another run left in --output_dir (refused without it)."},
    )
    preset: str = field(
        default=REFERENCE,
        metadata={"help": "Named recipe: " + "; ".join(describe(name) for name in PRESETS) + ". Flags you give "
                  "explicitly override the preset's. Measured results: docs/results.md.", "choices": list(PRESETS)},
    )
    num_train_epochs: int | None = field(
        default=None, metadata={"help": f"Epochs (reference: {reference_value('num_train_epochs')})."}
    )
    per_device_train_batch_size: int | None = field(
        default=None,
        metadata={"help": "Examples per step per process "
                  f"(reference: {reference_value('per_device_train_batch_size')})."},
    )
    learning_rate: float | None = field(
        default=None, metadata={"help": f"Peak learning rate (reference: {reference_value('learning_rate')})."}
    )
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW weight decay."})
    weight_decay_scope: str = field(
        default="reference",
        metadata={
            "help": "Which parameters decay. 'reference' = every parameter whose name has no 'bias' (what the "
            "reference trainer's name filter does in practice); 'matmul' = only Linear weights (what its comment "
            "intends).",
            "choices": ["reference", "matmul"],
        },
    )
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient-norm clip."})
    lr_decay: bool = field(default=True, metadata={"help": "Warmup + cosine decay by tokens (reference)."})
    warmup_tokens: int = field(default=512 * 20, metadata={"help": "Linear warmup length in tokens."})
    final_tokens: int | None = field(
        default=None, metadata={"help": "Tokens at which the cosine reaches its 10%% floor (reference: per script)."}
    )
    shuffle: bool = field(
        default=False, metadata={"help": "Shuffle examples each epoch (the reference DataLoader does not)."}
    )
    packing: bool = field(
        default=True,
        metadata={"help": "Pack several examples per row: the same examples per step and the same per-example "
                  "losses as padded batches, without the PAD compute (2.5-3.5x faster on CPU). --packing False "
                  "gives the reference's padded batches."},
    )
    packed_rows: int | None = field(
        default=None,
        metadata={"help": "Not in the reference; with --device_data True: the fixed number of packed rows per step "
                  "(default: the most the first 128 batches need, plus 15%% and 2: 86 for wiki.txt at batch 128, "
                  "of which about 64 hold examples). Fewer rows compute less on a GPU, where the rows are fixed; an "
                  "example that finds no room is left out of its step's loss, counted and logged."},
    )
    save_epochs: str = field(
        default="",
        metadata={"help": "Comma-separated epochs after which the model is also saved to OUTPUT_DIR/epoch-N "
                  "(save_pretrained, with the elapsed training seconds): snapshots of one run for an "
                  "accuracy-vs-compute curve."},
    )
    seed: int = field(default=0, metadata={"help": "Seeds Python, NumPy, torch and the corruption draws."})
    seeds: str | None = field(
        default=None,
        metadata={"help": "Comma-separated seeds, e.g. 0,1,2: train one model per seed in one process, in lockstep, "
                  "each saved to OUTPUT_DIR/seed-S and equal to a separate run with --seed S "
                  "(chargpt/training/seeds.py). "
                  "Needs --device_data True; one process. None: one model from --seed."},
    )
    stack_seeds: bool = field(
        default=False,
        metadata={"help": "Not in the reference; needs --seeds: train the members as one model with each parameter "
                  "stacked (torch.func.vmap, chargpt/training/stacking.py), so a step launches its kernels once "
                  "for all "
                  "members instead of once per member (for GPUs, where the step is bound by the launches). The same "
                  "init, batches and optimizer per member; dropout masks drawn for all members at once, so each "
                  "member is its separate run in distribution, not bit for bit."},
    )
    max_steps: int = field(default=-1, metadata={"help": "Stop after this many optimizer steps (-1: all epochs)."})
    max_time_seconds: float = field(default=0.0, metadata={
        "help": "Not in the reference: stop at the first loss read-back after this many seconds of this process's "
                "training and save the model as it is, with a checkpoint that --resume_from_checkpoint latest goes on "
                "from (0: no limit). A GPU call or a job with a time limit then always leaves a usable model."})
    checkpointing_steps: int = field(default=500, metadata={"help": "Save a resumable checkpoint every N steps."})
    save_total_limit: int = field(default=2, metadata={"help": "Checkpoints kept (oldest deleted)."})
    resume_from_checkpoint: str | None = field(
        default=None, metadata={"help": "A checkpoint folder, or 'latest' (in --output_dir/checkpoints)."}
    )
    logging_steps: int = field(default=10, metadata={"help": "Log loss and lr to TensorBoard every N steps."})
    sync_steps: int = field(
        default=0,
        metadata={"help": "Read the losses back from the device every N steps (and before every save): the NaN check, "
                  "the logs and Ctrl-C act then, so the steps between need no host synchronisation. A NaN still "
                  "stops training before a checkpoint holding it is written. 0 = every step on a CPU (as the "
                  "reference), every --logging_steps on a GPU."},
    )
    report_to: str = field(default="tensorboard", metadata={"help": "'tensorboard' or 'none'.",
                                                            "choices": ["tensorboard", "none"]})
    mixed_precision: str = field(
        default="no",
        metadata={"help": "'no' = fp32 on every device, the reference's precision (under bf16 autocast the reference "
                          "recipe diverged on an H100: docs/results.md). 'auto' = bf16 on a GPU that has it, else "
                          "fp32. 'fast' = bf16 wherever the hardware runs it fast (such a GPU, a CPU with AMX bf16 "
                          "units, or one whose avx512_bf16 matmuls measure at least 1.5x as fast as fp32), else "
                          "fp32.",
                  "choices": ["auto", "fast", "no", "bf16", "fp16"]},
    )
    optim: str = field(
        default="adamw_torch",
        metadata={"help": "The AdamW implementation (same update, same hyperparameters): 'adamw_torch' = "
                  "torch.optim.AdamW's default (multi-tensor), as the reference; 'adamw_torch_fused' = one fused "
                  "kernel per step (CPU and GPU); 'adamw_torch_capturable' = step counts kept on the device, so the "
                  "update can be captured in a CUDA graph (no effect on a CPU, logged).",
                  "choices": list(OPTIMIZERS)},
    )
    tf32: bool = field(
        default=False,
        metadata={"help": "Not in the reference: fp32 matmuls and convolutions in TF32 on a CUDA GPU's tensor cores "
                  "(Ampere or later; products with a 10-bit mantissa, fp32 sums), for speed. No effect elsewhere. "
                  "Default: true fp32."},
    )
    torch_compile: bool = field(
        default=False,
        metadata={"help": "Not in the reference: run the training steps through torch.compile; the saved model and "
                  "checkpoints are the plain model. The first steps compile (a minute or more on a CPU, where it "
                  "does not pay). Implied by --torch_compile_mode or --torch_compile_backend."},
    )
    torch_compile_batches: bool = field(
        default=False,
        metadata={"help": "Not in the reference; needs --device_data True: pack each step's batch through "
                  "torch.compile (one graph, static shapes, --torch_compile_backend), so a GPU launches a few fused "
                  "kernels instead of about 100 small ones. The same batches; slower on a CPU. Independent of "
                  "--torch_compile (the model's steps)."},
    )
    torch_compile_mode: str | None = field(
        default=None,
        metadata={"help": "torch.compile's mode, e.g. 'reduce-overhead' (CUDA graphs) or 'max-autotune'; "
                  "default: torch's default."},
    )
    torch_compile_backend: str | None = field(
        default=None, metadata={"help": "torch.compile's backend (default: 'inductor'), e.g. 'aot_eager'."}
    )
    dataloader_num_workers: int = field(default=0, metadata={"help": "0 works on every OS."})
    disable_tqdm: bool = field(default=False, metadata={"help": "No progress bar."})

    def __post_init__(self) -> None:
        if self.torch_compile_mode is not None or self.torch_compile_backend is not None:
            self.torch_compile = True  # as in transformers' TrainingArguments


def check_training(args: TrainingArguments, *, device_data: bool) -> None:
    """Every check of the training flags both scripts share, as one-line UsageErrors: the optimiser's values, the
    schedule's, and what the fast path and `--seeds` need (`device_data`: the script's --device_data)."""
    if args.learning_rate is not None and not (math.isfinite(args.learning_rate) and args.learning_rate > 0):
        raise UsageError(f"--learning_rate must be a positive number, got {args.learning_rate}")
    for name in ("adam_beta1", "adam_beta2"):
        if not 0 <= getattr(args, name) < 1:
            raise UsageError(f"--{name} must be in [0, 1), got {getattr(args, name)}")
    # AdamW's first step moves by lr / (1 - beta1), a float32 value in torch's kernel
    if args.learning_rate is not None and args.learning_rate / (1 - args.adam_beta1) > FLOAT32_MAX:
        raise UsageError(f"--learning_rate {args.learning_rate}: AdamW's step overflows float32; give a smaller "
                         "rate")
    for name in ("num_train_epochs", "per_device_train_batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name} must be at least 1, got {value}")
    if not (math.isfinite(args.max_time_seconds) and args.max_time_seconds >= 0):
        raise UsageError(f"--max_time_seconds must be a number of seconds, 0 or more, got {args.max_time_seconds}")
    if args.torch_compile_batches and not device_data:
        raise UsageError("--torch_compile_batches packs the fast path's batches: it needs --device_data True")
    rows, size = args.packed_rows, args.per_device_train_batch_size
    if rows is not None and not device_data:
        raise UsageError("--packed_rows sets the fast path's fixed rows: it needs --device_data True")
    if rows is not None and not args.packing:
        raise UsageError(f"--packed_rows {rows}: these batches are not packed (--packing False)")
    if rows is not None and size is not None and not 1 <= rows <= size:
        raise UsageError(f"--packed_rows {rows}: give between 1 and --per_device_train_batch_size ({size})")
    check_seeds(parse_seeds(args.seeds), device_data=device_data, mixed_precision=args.mixed_precision,
                stack_seeds=args.stack_seeds)


def parse_seeds(text: str | None) -> list[int] | None:
    """`--seeds 0,1,2` as distinct ints; None when not given; anything else is a one-line UsageError."""
    if text is None:
        return None
    parts = [part.strip() for part in str(text).split(",")]
    try:
        seeds = [int(part) for part in parts]
    except ValueError:
        raise UsageError(f"--seeds {text!r}: expected comma-separated integers such as 0,1,2") from None
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds {text!r}: each seed once (a repeated seed would train the same model twice)")
    return seeds


def check_seeds(seeds: list[int] | None, *, device_data: bool, mixed_precision: str,
                stack_seeds: bool = False) -> None:
    """What `--seeds` needs, as one-line UsageErrors: batches that are a function of (seed, step), no fp16;
    `--stack_seeds` needs `--seeds`."""
    if seeds is None:
        if stack_seeds:
            raise UsageError("--stack_seeds stacks the models of --seeds: give --seeds too (e.g. --seeds 0,1,2)")
        return
    if not device_data:
        raise UsageError("--seeds needs --device_data True (each member's batches are a function of its seed and "
                         "the step)")
    if mixed_precision == "fp16":
        raise UsageError("--seeds does not run with --mixed_precision fp16 (one loss scaler would skip a step for "
                         "every member when one overflows); use no or bf16")




def build_model_config(model_args: ModelArguments, vocab_size: int, **fields: Any) -> CharGPTConfig:
    """The model config a from-scratch run asks for, with `fields` (how it answers) on top; an invalid combination
    becomes a one-line usage error.

    Dropout rates not given keep `CharGPTConfig`'s defaults, the reference's 0.1.
    """
    try:
        return CharGPTConfig(
            vocab_size=vocab_size,
            block_size=model_args.block_size,
            n_layer=model_args.n_layer,
            n_head=model_args.n_head,
            n_embd=model_args.n_embd,
            position_embedding_type=model_args.position_embedding_type,
            attention_type=model_args.attention_type,
            **model_args.dropout_overrides(),
            **fields,
        )
    except ValueError as err:
        raise UsageError(str(err)) from err

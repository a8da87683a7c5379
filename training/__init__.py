"""Training machinery shared by train_pretrain.py and train_finetune.py: one Accelerate loop, one schedule."""

from .arguments import ModelArguments, TrainingArguments, build_model_config, fill_reference_defaults
from .cli import UsageError, parse_args, run_cli
from .loop import (
    TrainingDivergedError,
    TrainResult,
    build_optimizer,
    cpu_has_fast_bf16,
    find_latest_checkpoint,
    make_accelerator,
    resolve_precision,
    train,
)
from .reporting import report_done, run_card
from .schedule import TokenCosineSchedule

__all__ = [
    "ModelArguments",
    "TokenCosineSchedule",
    "TrainResult",
    "TrainingArguments",
    "TrainingDivergedError",
    "UsageError",
    "build_model_config",
    "build_optimizer",
    "fill_reference_defaults",
    "find_latest_checkpoint",
    "make_accelerator",
    "cpu_has_fast_bf16",
    "resolve_precision",
    "parse_args",
    "report_done",
    "run_card",
    "run_cli",
    "train",
]

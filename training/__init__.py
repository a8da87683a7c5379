"""Training machinery shared by train_pretrain.py and train_finetune.py: one Accelerate loop, one schedule."""

from .arguments import ModelArguments, TrainingArguments, build_model_config, fill_reference_defaults
from .cli import UsageError, parse_args, run_cli
from .files import atomic_write_bytes, atomic_write_json, atomic_write_text, replace_folder
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
from .pretrained import check_chargpt_folder, load_chargpt
from .reporting import report_done, run_card
from .schedule import TokenCosineSchedule

__all__ = [
    "ModelArguments",
    "TokenCosineSchedule",
    "TrainResult",
    "TrainingArguments",
    "TrainingDivergedError",
    "UsageError",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "build_model_config",
    "build_optimizer",
    "check_chargpt_folder",
    "fill_reference_defaults",
    "load_chargpt",
    "find_latest_checkpoint",
    "make_accelerator",
    "cpu_has_fast_bf16",
    "resolve_precision",
    "parse_args",
    "replace_folder",
    "report_done",
    "run_card",
    "run_cli",
    "train",
]

"""Training machinery shared by train_pretrain.py and train_finetune.py: one Accelerate loop, one schedule.

Modules import in one direction, bottom to top: `errors`, `state`, `files`, `schedule`, `precision`, `stopping`,
`outputs` (nothing of the package, or only the ones before); `presets` (each stage's defaults); `arguments`; `cli`;
`seeds` (several seeds in one process), `stacking` (their stacked form); `batching`, `pretrained`, `reporting`,
`hub`; `checkpoints`, `export`; `loop`; `stage` (the scripts' shared end). tests/test_imports.py checks it.

Names are imported lazily (PEP 562), as in `data_scripts`: a tool that only writes files (`chargpt.training.files`) or
reads flags does not import the training loop, accelerate or the model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_EXPORTS = {
    "arguments": ["ModelArguments", "TrainingArguments", "build_model_config", "check_seeds", "check_training",
                  "parse_seeds"],
    "batching": ["collate_for"],
    "checkpoints": ["find_latest_checkpoint"],
    "cli": ["parse_args", "run_cli", "run_logged"],
    "errors": ["TrainingDivergedError", "UsageError"],
    "hub": ["add_eval_result", "note_answering", "push_if_asked", "push_run"],
    "files": ["atomic_write_bytes", "atomic_write_json", "atomic_write_text", "replace_folder"],
    "loop": ["build_optimizer", "make_accelerator", "train"],
    "outputs": ["check_not_input", "check_output_dir", "check_output_file"],
    "precision": ["cpu_has_fast_bf16", "resolve_precision"],
    "pretrained": ["check_chargpt_folder", "load_chargpt", "resolve_model_path"],
    "reporting": ["report_done", "run_card"],
    "schedule": ["TokenCosineSchedule"],
    "stage": ["train_stage"],
    "fast_path": ["device_batches"],
    "seeds": ["SeedBatches", "SeedStack", "members_of", "models_for", "seeds_card"],
    "state": ["TrainResult"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

if TYPE_CHECKING:
    from .arguments import (
        ModelArguments,
        TrainingArguments,
        build_model_config,
        check_seeds,
        check_training,
        parse_seeds,
    )
    from .batching import collate_for
    from .checkpoints import find_latest_checkpoint
    from .cli import parse_args, run_cli, run_logged
    from .errors import TrainingDivergedError, UsageError
    from .fast_path import device_batches
    from .files import atomic_write_bytes, atomic_write_json, atomic_write_text, replace_folder
    from .hub import add_eval_result, note_answering, push_if_asked, push_run
    from .loop import build_optimizer, make_accelerator, train
    from .outputs import check_not_input, check_output_dir, check_output_file
    from .precision import cpu_has_fast_bf16, resolve_precision
    from .pretrained import check_chargpt_folder, load_chargpt, resolve_model_path
    from .reporting import report_done, run_card
    from .schedule import TokenCosineSchedule
    from .seeds import SeedBatches, SeedStack, members_of, models_for, seeds_card
    from .stage import train_stage
    from .state import TrainResult


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))


__all__ = [
    "ModelArguments",
    "SeedBatches",
    "SeedStack",
    "TokenCosineSchedule",
    "TrainResult",
    "TrainingArguments",
    "TrainingDivergedError",
    "UsageError",
    "add_eval_result",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "build_model_config",
    "build_optimizer",
    "check_chargpt_folder",
    "check_not_input",
    "check_output_dir",
    "check_output_file",
    "check_seeds",
    "check_training",
    "collate_for",
    "cpu_has_fast_bf16",
    "device_batches",
    "find_latest_checkpoint",
    "load_chargpt",
    "make_accelerator",
    "note_answering",
    "members_of",
    "models_for",
    "parse_args",
    "parse_seeds",
    "push_if_asked",
    "push_run",
    "replace_folder",
    "report_done",
    "resolve_model_path",
    "resolve_precision",
    "run_card",
    "run_cli",
    "run_logged",
    "seeds_card",
    "train",
    "train_stage",
]

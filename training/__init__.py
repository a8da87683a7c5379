"""Training machinery shared by train_pretrain.py and train_finetune.py: one Accelerate loop, one schedule.

Modules import in one direction, bottom to top: `errors`, `state`, `files`, `schedule`, `precision`, `stopping`
(nothing of the package, or only the ones before); `presets` (each stage's defaults); `arguments`; `cli`; `seeds`
(several seeds in one process), `stacking` (their stacked form); `batching`, `pretrained`, `reporting`;
`checkpoints`, `export`; `loop`. tests/test_imports.py checks it.
"""

from .arguments import ModelArguments, TrainingArguments, build_model_config
from .batching import collate_for
from .checkpoints import find_latest_checkpoint
from .cli import parse_args, run_cli, run_logged
from .errors import TrainingDivergedError, UsageError
from .files import atomic_write_bytes, atomic_write_json, atomic_write_text, replace_folder
from .loop import build_optimizer, make_accelerator, train
from .precision import cpu_has_fast_bf16, resolve_precision
from .pretrained import check_chargpt_folder, load_chargpt
from .reporting import report_done, run_card
from .schedule import TokenCosineSchedule
from .seeds import SeedBatches, SeedStack, check_seeds, device_batches, parse_seeds, seeds_card
from .state import TrainResult

__all__ = [
    "ModelArguments",
    "SeedBatches",
    "SeedStack",
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
    "check_seeds",
    "check_chargpt_folder",
    "collate_for",
    "cpu_has_fast_bf16",
    "device_batches",
    "find_latest_checkpoint",
    "load_chargpt",
    "make_accelerator",
    "parse_args",
    "parse_seeds",
    "seeds_card",
    "replace_folder",
    "report_done",
    "resolve_precision",
    "run_card",
    "run_cli",
    "run_logged",
    "train",
]

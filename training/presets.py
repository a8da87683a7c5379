"""Each stage's defaults in one table: the CS224N assignment's values (`reference`) and the named recipes
(`--preset`) that change some of them on purpose, resolved in one place (`resolve`).

A run takes, for every field, the first of: the flag you gave (or the key of your argument file); the preset's
value for this stage; the reference value for this stage; the dataclass default (stage-independent reference
values such as weight decay 0.1 live there, in `training/arguments.py`). So `--preset cpu-fast --learning_rate
1e-3` keeps the rest of cpu-fast and your learning rate. What each preset reaches: docs/results.md; the commands that
measured it: docs/reproduce.md. `EVALUATION` holds how a preset's models answer (evaluate_birthplace.py --preset)
and `NEEDS` what a preset cannot choose for you (the questions `best` recites).
"""

from __future__ import annotations

from typing import Any

from transformers.utils import logging

from .errors import UsageError

logger = logging.get_logger(__name__)

REFERENCE = "reference"
STAGE_NAMES = {"pretrain": "pretraining", "finetune": "finetuning"}

DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "pretrain": {
        REFERENCE: {"num_train_epochs": 650, "per_device_train_batch_size": 128, "learning_rate": 6e-3},
        # More learning per CPU-minute: dropout off (it costs 1.6-2x per step and did not help here), small batches
        # at a lower peak rate (more steps per epoch), bf16 where the hardware runs it fast, fp32 elsewhere.
        "cpu-fast": {"dropout": 0.0, "per_device_train_batch_size": 32, "learning_rate": 2e-3,
                     "num_train_epochs": 220, "mixed_precision": "fast"},
        # The most dev accuracy measured (docs/results.md, the reference size): the documents uncorrupted, each training
        # question a recitation row (its name, the line up to the place, the place), no dropout, small batches, 50
        # epochs, fp32. Needs the questions: --mixed_qa_corpus_path (NEEDS).
        "best": {"objective": "language_modeling", "mixed_qa_format": "recite", "dropout": 0.0,
                 "per_device_train_batch_size": 32, "learning_rate": 2e-3, "num_train_epochs": 50},
    },
    "finetune": {  # from a pretrained model (--model_name_or_path); from scratch, FROM_SCRATCH changes the epochs
        REFERENCE: {"num_train_epochs": 10, "per_device_train_batch_size": 256, "learning_rate": 6e-4},
        # A pretrained model keeps more of its facts with a gentler rate (chosen on held-out training questions by
        # experiments/select_finetune_lr.py); the batch size and epochs stay the reference's, the dropout the model's.
        "cpu-fast": {"mixed_precision": "fast", "learning_rate": 7.5e-5},
        # Recite the line, then answer, at the rate held-out training questions chose for two of the three seeds of
        # that pretraining (and the best held-out mean of the three rates tried, by a hair over 1.5e-4).
        "best": {"recite": True, "learning_rate": 7.5e-5},
    },
}
# evaluate_birthplace.py --preset: how the preset's models answer (the others answer as the assignment does).
EVALUATION: dict[str, dict[str, Any]] = {"best": {"answer_from_recitation": True, "continue_recitation": True}}
# What a preset cannot choose for you: (stage, preset) -> {field: why the run needs it}.
NEEDS: dict[tuple[str, str], dict[str, str]] = {
    ("pretrain", "best"): {"mixed_qa_corpus_path": "the training questions it recites, birth_places_train.tsv or, "
                                                   "to hold some out, the train.tsv of "
                                                   "experiments/select_finetune_lr.py "
                                                   "--split_only"}}
# The assignment trains a model without pretraining for 75 epochs instead of 10; nothing else changes.
FROM_SCRATCH: dict[str, Any] = {"num_train_epochs": 75}
PRESETS: tuple[str, ...] = tuple(DEFAULTS["pretrain"])

PURPOSE = {
    REFERENCE: "the assignment's hyperparameters",
    "cpu-fast": "more learning per CPU-minute",
    "best": "the most dev accuracy measured at the reference model size: pretraining on uncorrupted documents and "
            "recitation rows of the training questions, then finetuning to recite and answer",
}


def resolve(stage: str, given: dict[str, Any]) -> dict[str, Any]:
    """Every value a run of `stage` ('pretrain', 'finetune' or 'evaluate') uses: the table's layers under what was
    `given`.

    `given` holds only what the user set (flags or an argument file); the result is ready for
    `HfArgumentParser.parse_dict`. Finetuning without a `model_name_or_path` takes `FROM_SCRATCH` over its reference.
    """
    preset = given.get("preset", REFERENCE)
    if preset not in PRESETS:
        raise UsageError(f"--preset {preset!r}: unknown; choose one of {', '.join(PRESETS)}")
    for name, why in NEEDS.get((stage, preset), {}).items():
        if given.get(name) is None:
            raise UsageError(f"--preset {preset} needs --{name}: {why}")
    if stage == "evaluate":
        reference, overlay = {}, EVALUATION.get(preset, {})
    else:
        table = DEFAULTS[stage]
        from_scratch = stage == "finetune" and given.get("model_name_or_path") is None
        reference = {**table[REFERENCE], **(FROM_SCRATCH if from_scratch else {})}
        overlay = table[preset] if preset != REFERENCE else {}
    chosen = {name: value for name, value in overlay.items() if name not in given}
    if chosen:
        logger.info("--preset %s sets %s", preset, chosen)
    return {**reference, **overlay, **given}


def _values(values: dict[str, Any]) -> str:
    return ", ".join(f"{name} {value}" for name, value in values.items()) or "as the reference"


def describe(preset: str) -> str:
    """One line for `--help`: what `preset` is for and what it sets in each stage (read from the table)."""
    if preset == REFERENCE:
        stages = [f"{STAGE_NAMES[s]} {_values(DEFAULTS[s][REFERENCE])}" for s in DEFAULTS]
        stages.append(f"finetuning from scratch {_values(FROM_SCRATCH)}")
    else:
        stages = [f"{STAGE_NAMES[s]} {_values(DEFAULTS[s][preset])}" for s in DEFAULTS]
        if preset in EVALUATION:
            stages.append(f"evaluation {_values(EVALUATION[preset])}")
    return f"'{preset}' ({PURPOSE[preset]}: {'; '.join(stages)})"


def reference_value(name: str) -> str:
    """A field's reference value in each stage, for its `--help` (e.g. 'pretraining 650, finetuning 10 (75 from
    scratch)')."""
    parts = [f"{STAGE_NAMES[s]} {DEFAULTS[s][REFERENCE][name]}" for s in DEFAULTS]
    if name in FROM_SCRATCH:
        parts[-1] += f" ({FROM_SCRATCH[name]} from scratch)"
    return ", ".join(parts)

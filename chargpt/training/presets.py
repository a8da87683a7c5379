"""Each stage's defaults: the CS224N assignment's values (`chargpt/recipes/reference.yaml`) and the named recipes
(`--preset`, one file each in `chargpt/recipes/`) that change some of them on purpose, resolved in one place
(`resolve`).

A run takes, for every field, the first of: the flag you gave (or the key of your argument file); the preset's
value for this stage (for pretraining, its values for the run's position encoding over the rest: `best` pretrains
learned positions longer); the reference value for this stage; the dataclass default (stage-independent reference
values such as weight decay 0.1 live there, in `chargpt/training/arguments.py`). So `--preset cpu-fast --learning_rate
1e-3` keeps the rest of cpu-fast and your learning rate. What each preset reaches: docs/results.md; the commands that
measured it: docs/reproduce.md. `EVALUATION` holds how a preset's models answer (evaluate_birthplace.py --preset)
and `NEEDS` what a preset cannot choose for you (the questions `best` recites).
"""

from __future__ import annotations

from typing import Any

from transformers.utils import logging

from chargpt import recipes

from .errors import UsageError

logger = logging.get_logger(__name__)

REFERENCE = "reference"
STAGE_NAMES = {"pretrain": "pretraining", "finetune": "finetuning"}
STAGES = tuple(STAGE_NAMES)
PRESETS: tuple[str, ...] = recipes.names()
# Each stage's values per preset, read from its file in chargpt/recipes/ (the one home of these values)
DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    stage: {name: recipes.load(name)[stage] for name in PRESETS} for stage in STAGES}
# Pretraining values per preset and position encoding, over the preset's `pretrain` values.
BY_POSITION: dict[str, dict[str, dict[str, Any]]] = {
    name: recipes.load(name)["pretrain_by_position"] for name in PRESETS}
# evaluate_birthplace.py --preset: how the preset's models answer (the others answer as the assignment does).
EVALUATION: dict[str, dict[str, Any]] = {name: recipes.load(name)["evaluate"] for name in PRESETS
                                         if recipes.load(name)["evaluate"]}
# What a preset cannot choose for you: (stage, preset) -> {field: why the run needs it}.
NEEDS: dict[tuple[str, str], dict[str, str]] = {
    (stage, name): why for name in PRESETS for stage, why in recipes.load(name)["needs"].items()}
# Finetuning a model without pretraining: the reference's changes (75 epochs instead of 10), then the preset's.
FROM_SCRATCH: dict[str, Any] = recipes.load(REFERENCE)["finetune_from_scratch"]
PURPOSE = {name: recipes.load(name)["purpose"] for name in PRESETS}


def resolve(stage: str, given: dict[str, Any], position: str | None = None) -> dict[str, Any]:
    """Every value a run of `stage` ('pretrain', 'finetune' or 'evaluate') uses: the table's layers under what was
    `given`. `position` is the encoding a pretraining makes when `given` names none (the script's default, which its
    parser knows; read there, not imported here, so that reading the recipes loads no torch).

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
        scratch = recipes.load(preset)["finetune_from_scratch"] if from_scratch else {}
        overlay = {**table[preset], **scratch} if preset != REFERENCE else {}
        if stage == "pretrain":  # a loaded model's encoding is its own; only a pretraining names the one it makes
            overlay.update(BY_POSITION[preset].get(given.get("position_embedding_type", position), {}))
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
        stages += [f"{STAGE_NAMES['pretrain']} of {position} positions {_values(values)}"
                   for position, values in BY_POSITION[preset].items()]
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

"""The named recipes, one YAML file each: what `--preset NAME` sets in every stage and, for the recipes that choose
their finetuning rate on held-out training questions, how (`chargpt/recipes/recite.py --recipe NAME`).

A file holds `purpose` (one line for `--help`), the sections `pretrain`, `finetune` and `evaluate` (flag values of
train_pretrain.py, train_finetune.py and evaluate_birthplace.py), and where it needs them `finetune_from_scratch`
(over `finetune` for a model without pretraining), `pretrain_by_position` (position encoding -> values over
`pretrain` for a model of that encoding), `needs` (stage -> flag -> why the run must give it), `selection`
(`holdout` questions, the `learning_rates` to choose from, 0 for none, and `plain_finetuning: false` to skip the
reference finetuning kept for comparison) and `confidence` (flags of
`chargpt.evaluation.calibrate`: the confidence the final model shows and its "I don't know" threshold).
`reference.yaml` is the assignment; every other recipe is read over it. A file is plain data: `yaml.safe_load`,
nothing executed.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
SECTIONS = ("purpose", "pretrain", "pretrain_by_position", "finetune", "finetune_from_scratch", "evaluate", "needs",
            "selection", "confidence")


def names() -> tuple[str, ...]:
    """Every recipe, the reference first."""
    found = sorted(path.stem for path in HERE.glob("*.yaml"))
    return ("reference", *(name for name in found if name != "reference"))


@cache
def load(name: str) -> dict[str, Any]:
    """Recipe `name` with every section present (empty where the file has none); an unknown section is refused, so a
    typo in a file fails at import, not as a silently ignored value."""
    path = HERE / f"{name}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ValueError(f"{path}: unknown section {unknown[0]!r}; a recipe has {', '.join(SECTIONS)}")
    return {section: data.get(section) or ({} if section != "purpose" else "") for section in SECTIONS}

"""What the three scripts share around their `main`: argument files and one-line errors."""

from __future__ import annotations

import json
import logging as std_logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml
from transformers import HfArgumentParser
from transformers.utils import logging

from .presets import apply_preset, explicit_flags

logger = logging.get_logger(__name__)


class UsageError(ValueError):
    """A bad flag combination or incompatible input, reported as one line without a traceback."""


def parse_args(parser: HfArgumentParser, argv: Sequence[str] | None = None, stage: str | None = None) -> tuple:
    """Flags, or a single JSON/YAML file holding them (`script.py args.yaml`); then `--preset` for `stage`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 1 and argv[0].endswith(".json"):
        parsed = parser.parse_json_file(argv[0])
        explicit = set(json.loads(Path(argv[0]).read_text()))
    elif len(argv) == 1 and argv[0].endswith((".yaml", ".yml")):
        parsed = parser.parse_yaml_file(argv[0])
        explicit = set(yaml.safe_load(Path(argv[0]).read_text()) or {})
    else:
        parsed = parser.parse_args_into_dataclasses(args=argv)
        explicit = explicit_flags(argv)
    if stage is not None:
        preset = next(obj.preset for obj in parsed if hasattr(obj, "preset"))
        applied = apply_preset(preset, stage, parsed, explicit)
        if applied:
            logger.info("--preset %s sets %s", preset, applied)
    return tuple(parsed)


def check_flags(parser: HfArgumentParser, argv: Sequence[str], stage: str | None, what: str) -> None:
    """Parse a stage's flags without running it, so a driver fails on a bad `--extra` at once, not an hour in."""

    def fail(message: str) -> None:
        raise UsageError(message)

    parser.error = fail  # argparse reports bad values and missing flags here; raise instead of printing and exiting
    try:
        parse_args(parser, argv, stage)
    except ValueError as err:  # UsageError, or HfArgumentParser's "arguments are not used" for unknown flags
        raise UsageError(f"{what}: {err}") from None


def expected_errors() -> tuple[type[BaseException], ...]:
    """Errors that are the user's input, not our bug: they get one line, not a traceback."""
    from data_scripts import DataFileError
    from modeling_chargpt import UnknownCharacterError

    from .loop import TrainingDivergedError

    return (DataFileError, UnknownCharacterError, UsageError, TrainingDivergedError, FileNotFoundError)


def run_cli(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None = None) -> int:
    std_logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=std_logging.INFO)
    logging.set_verbosity_info()
    try:
        return int(main(argv) or 0)
    except expected_errors() as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

"""What the scripts share around their `main`: reading flags or an argument file, stage defaults, one-line errors."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging as std_logging
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import yaml
from tqdm.std import tqdm
from transformers import HfArgumentParser
from transformers.utils import logging

from data_scripts.textfiles import DataFileError

from .errors import TrainingDivergedError, UsageError
from .outputs import check_not_input
from .presets import resolve

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"

# Errors that are the user's input, not our bug: they get one line, not a traceback (and chargpt's
# `UnknownCharacterError`: `expected_error`).
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (DataFileError, UsageError, TrainingDivergedError, FileNotFoundError)


def expected_error(err: BaseException) -> bool:
    """Whether `err` is the user's input: one of `EXPECTED_ERRORS`, or a character the tokenizer does not know. The
    tokenizer's error is looked up where it lives only once the model package is loaded (nothing else raises it), so
    a tool that never loads a model starts without torch and transformers' models."""
    if isinstance(err, EXPECTED_ERRORS):
        return True
    chargpt = sys.modules.get("modeling_chargpt")
    return chargpt is not None and isinstance(err, chargpt.UnknownCharacterError)


def given_args(parser: HfArgumentParser, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The values the user set, and only those: from flags, or from a single JSON/YAML file (`script.py args.yaml`).

    argparse leaves an attribute that is already in its namespace alone unless the flag is given, so a namespace
    pre-filled with a marker tells the given flags apart from the defaults, whatever their spelling (`--name value`,
    `--name=value`, an abbreviation, `--no_name`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 1 and argv[0].endswith((".json", ".yaml", ".yml")):
        return _checked_file_values(parser, Path(argv[0]), _read_args_file(Path(argv[0])))
    unset = object()
    names = [f.name for dtype in parser.dataclass_types for f in dataclasses.fields(dtype) if f.init]
    namespace, remaining = parser.parse_known_args(argv, namespace=argparse.Namespace(**dict.fromkeys(names, unset)))
    if remaining:
        raise ValueError(f"Some specified arguments are not used by the HfArgumentParser: {remaining}")
    return {name: value for name, value in vars(namespace).items() if value is not unset}


def _read_args_file(path: Path) -> dict[str, Any]:
    """The flags an argument file holds, as a mapping; a file that is not one is a one-line error naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataFileError(path, None, "file not found") from None
    except IsADirectoryError:
        raise DataFileError(path, None, "is a directory, expected a JSON or YAML file of flags") from None
    except UnicodeDecodeError as err:
        raise DataFileError(path, None, f"not UTF-8 text ({err.reason})") from None
    try:
        values = json.loads(text) if path.suffix == ".json" else (yaml.safe_load(text) or {})
    except json.JSONDecodeError as err:
        raise DataFileError(path, err.lineno, f"not valid JSON ({err.msg}, column {err.colno})") from None
    except yaml.YAMLError as err:  # the problem and its line, without yaml's multi-line excerpt
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or type(err).__name__
        raise DataFileError(path, mark.line + 1 if mark else None, f"not valid YAML ({problem})") from None
    if not isinstance(values, dict):
        raise DataFileError(path, None, "expected a mapping of flag names to values")
    return values


def _checked_file_values(parser: HfArgumentParser, path: Path, values: dict[str, Any]) -> dict[str, Any]:
    """An argument file's flags checked as argparse checks them on a command line (`parse_dict` checks nothing):
    each a flag of the script, of its type and among its choices, every required one given. Values come back
    converted ("3" -> 3); a bad one is a one-line error naming the file and the flag."""
    actions = {action.dest: action for action in parser._actions if action.dest != "help"}
    checked = {}
    for name, value in values.items():
        action = actions.get(name)
        if action is None:
            raise DataFileError(path, None, f"unknown flag {name!r} (see --help)")
        if value is not None and action.type is not None:
            try:
                value = action.type(value if isinstance(value, str | bool) else str(value))
            except (TypeError, ValueError, argparse.ArgumentTypeError):
                type_name = getattr(action.type, "__name__", "value")
                raise DataFileError(path, None, f"{name}: {value!r} is not a valid {type_name}") from None
        if action.choices is not None and value not in action.choices:
            raise DataFileError(path, None, f"{name}: {value!r} is not one of {list(action.choices)}")
        checked[name] = value
    missing = [name for name, action in actions.items() if action.required and name not in checked]
    if missing:
        raise DataFileError(path, None, f"no value for the required flag(s) {', '.join(missing)}")
    return checked


def parse_args(parser: HfArgumentParser, argv: Sequence[str] | None = None, stage: str | None = None) -> tuple:
    """The parser's dataclasses from what the user gave; with a `stage`, what they left unset comes from that stage's
    defaults and `--preset` (`chargpt.training.presets.resolve`). A script's flag checks travel with its parser
    (`parser.check`, called with the dataclasses), so a driver checking a stage's flags runs them too."""
    given = given_args(parser, argv)
    parsed = parser.parse_dict(given if stage is None else
                               resolve(stage, given, parser.get_default("position_embedding_type")))
    _outputs_apart(parsed)
    check = getattr(parser, "check", None)
    if check is not None:
        check(*parsed)
    return parsed


def _outputs_apart(parsed: Sequence[Any]) -> None:
    """Refuse an --output_dir that is, or is inside, one of the run's inputs (a corpus, the model it reads)."""
    values = {f"--{name}": value for obj in parsed for name, value in vars(obj).items()}
    inputs = {flag: value for flag, value in values.items() if isinstance(value, str) and (
        flag.endswith("_corpus_path") or flag == "--model_name_or_path")}
    check_not_input({"--output_dir": values.get("--output_dir")}, inputs)


def check_flags(parser: HfArgumentParser, argv: Sequence[str], stage: str | None, what: str) -> None:
    """Parse a stage's flags without running it, so a driver fails on a bad `--extra` at once, not an hour in."""

    def fail(message: str) -> None:
        raise UsageError(message)

    parser.error = fail  # argparse reports bad values and missing flags here; raise instead of printing and exiting
    try:
        parse_args(parser, argv, stage)
    except ValueError as err:  # UsageError, or "arguments are not used" for unknown flags
        raise UsageError(f"{what}: {err}") from None


def run_cli(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None = None) -> int:
    """Run a script's `main` with logging set up; the user's errors end as one `error:` line and exit status 1."""
    std_logging.basicConfig(format=LOG_FORMAT, level=std_logging.INFO)
    logging.set_verbosity_info()
    try:
        return _exit_status(main, argv)
    except KeyboardInterrupt:
        _say_last("interrupted")
        return 130


def _exit_status(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None) -> int:
    try:
        return int(main(argv) or 0)
    except Exception as err:
        if not expected_error(err):
            raise
        _say_last(f"error: {err}")
        return 1


def _say_last(line: str) -> None:
    """Print `line` to stderr as the last thing the user sees: progress bars still open where the error left them
    (closed later, they would redraw below it) are closed and the output and log streams flushed first."""
    for bar in list(tqdm._instances):  # the base class's: every bar, tqdm.auto's too
        bar.close()
    for handler in std_logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    print(line, file=sys.stderr, flush=True)


def command_line(script: str, argv: Sequence[str] | None = None) -> str:
    """`python SCRIPT ARGS`, the command a results file records: this process's flags, or `argv` where a driver ran
    the script's `main` in its own process. `script` may be ``-m MODULE``."""
    return shlex.join(["python", *script.split(), *(sys.argv[1:] if argv is None else argv)])


def run_to_end(cmd: Sequence[str], **popen: Any) -> tuple[int, bool]:
    """Run a stage's process to its end, even through Ctrl-C: its exit status, and whether Ctrl-C came. The stage shares
    the terminal's process group, so it has the Ctrl-C too: a training script finishes its step, saves a checkpoint
    and exits 130. (`subprocess.run` kills it 0.25 s after a Ctrl-C, mid-save: the steps since the last checkpoint
    were lost.) A second Ctrl-C stops the training at once, as it does without a driver."""
    with subprocess.Popen(cmd, **popen) as proc:
        try:
            return proc.wait(), False
        except KeyboardInterrupt:
            return proc.wait(), True


def run_logged(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str], log_path: str | Path) -> int:
    """`run_cli` in this process, with everything the script writes (prints, warnings, progress bars, log records) in
    `log_path` instead of on the console, as if it had run as its own process: a driver's short stages skip the
    seconds a new interpreter spends importing torch and transformers. The exit status is `run_cli`'s (Ctrl-C stops
    the driver too)."""
    with open(log_path, "w", encoding="utf-8") as log, redirect_stdout(log), redirect_stderr(log), _logging_kept():
        handler = std_logging.StreamHandler(log)
        handler.setFormatter(std_logging.Formatter(LOG_FORMAT))
        std_logging.getLogger().addHandler(handler)
        std_logging.getLogger().setLevel(std_logging.INFO)
        logging.disable_default_handler()  # transformers' own records: its handler holds the console's stderr
        logging.add_handler(handler)
        logging.set_verbosity_info()
        try:
            return _exit_status(main, argv)
        finally:
            logging.remove_handler(handler)
            logging.enable_default_handler()


def run_in_process(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str]) -> int:
    """`run_cli` in this process, on the console, as its own process would run it: a driver's step
    (chargpt.recipes.recite's) skips a new interpreter's imports, and the logging `run_cli` sets up (INFO records,
    transformers' verbosity) ends with the step, so the driver's next lines are as they were."""
    with _logging_kept():
        return run_cli(main, argv)


@contextmanager
def _logging_kept() -> Iterator[None]:
    """The root logger's handlers and level, and transformers' verbosity, as they were before the block."""
    root, library = std_logging.getLogger(), logging.get_verbosity()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)
        logging.set_verbosity(library)

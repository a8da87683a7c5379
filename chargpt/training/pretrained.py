"""Load a saved chargpt folder for the scripts, with one-line errors that name the file at fault.

`from_pretrained` alone answers a wrong `--model_name_or_path` with a traceback about Hub repo ids, a truncated
`model.safetensors` with a safetensors traceback, another model type with a warning and random weights. Here each
of these is a `DataFileError` (``<path>[:<line>]: <problem>``), which `run_cli` prints as one line.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import snapshot_download
from safetensors import SafetensorError, safe_open
from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, logging

from data_scripts import DataFileError
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, CharTokenizer

logger = logging.get_logger(__name__)

__all__ = ["check_chargpt_folder", "load_chargpt"]

CONFIG_NAME = "config.json"
VOCAB_NAME = CharTokenizer.vocab_files_names["vocab_file"]
SAVED_BY = "a chargpt model folder saved by train_pretrain.py or train_finetune.py"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataFileError(path, err.lineno, f"not valid JSON ({err.msg}, column {err.colno})") from None
    except UnicodeDecodeError as err:
        raise DataFileError(path, None, f"not valid JSON (invalid UTF-8: {err.reason})") from None
    except OSError as err:
        raise DataFileError(path, None, f"cannot read file ({err.strerror or err})") from None


def _check_folder(folder: Path) -> Path:
    """The folder's weights file, after checking the folder holds a chargpt config, weights and a vocabulary."""
    if not folder.exists():
        raise DataFileError(folder, None, f"no such folder; expected {SAVED_BY}")
    if not folder.is_dir():
        raise DataFileError(folder, None, f"is a file; expected {SAVED_BY}")
    config_file = folder / CONFIG_NAME
    if not config_file.is_file():
        raise DataFileError(folder, None, f"no {CONFIG_NAME}, so not {SAVED_BY}")
    config = _read_json(config_file)
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type != CharGPTConfig.model_type:
        raise DataFileError(
            config_file, None, f"model_type is {model_type!r}, not {CharGPTConfig.model_type!r}: not a chargpt model"
        )
    weights = folder / SAFE_WEIGHTS_NAME
    if not weights.is_file() and not (folder / SAFE_WEIGHTS_INDEX_NAME).is_file():
        raise DataFileError(folder, None, f"no {SAFE_WEIGHTS_NAME} (the weights); was saving interrupted?")
    if not (folder / VOCAB_NAME).is_file():
        raise DataFileError(folder, None, f"no {VOCAB_NAME} (the tokenizer's vocabulary); was saving interrupted?")
    return weights


def _check_weights(weights: Path, config: CharGPTConfig) -> None:
    """Every tensor the config needs, with its shape, from an undamaged file, before `from_pretrained` sees it.

    safetensors checks the header against the file size, so a truncated or overwritten file fails to open;
    the shapes come from a model built on the meta device (no memory, no compute).
    """
    try:
        with safe_open(str(weights), framework="pt") as f:
            stored = {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}
    except (SafetensorError, OSError) as err:
        raise DataFileError(weights, None, f"damaged or truncated weights file ({err})") from None
    with torch.device("meta"):
        model = CharGPTForCausalLM(config)
    expected = {key: tuple(value.shape) for key, value in model.state_dict().items()}
    tied = set(model._tied_weights_keys or {}) if config.tie_word_embeddings else set()
    problems = []
    missing = sorted(set(expected) - set(stored) - tied)
    if missing:
        problems.append(f"missing {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}")
    unexpected = sorted(set(stored) - set(expected))
    if unexpected:
        problems.append(f"unexpected {', '.join(unexpected[:3])}{' ...' if len(unexpected) > 3 else ''}")
    shapes = [k for k in sorted(set(stored) & set(expected)) if stored[k] != expected[k]]
    if shapes:
        problems.append(f"{shapes[0]} is {list(stored[shapes[0]])}, config.json needs {list(expected[shapes[0]])}"
                        + (f" (and {len(shapes) - 1} more)" if len(shapes) > 1 else ""))
    if problems:
        raise DataFileError(weights, None, f"does not fit {CONFIG_NAME}: {'; '.join(problems)}")


def _check_contents(
    folder: Path, weights: Path, config_overrides: dict[str, Any]
) -> tuple[CharGPTConfig, CharTokenizer]:
    """Config, vocabulary and weights agree, checked without transformers' loading logs (an error stays one line)."""
    config_file, vocab_file = folder / CONFIG_NAME, folder / VOCAB_NAME
    try:
        config = CharGPTConfig(**{**_read_json(config_file), **config_overrides})
    except (ValueError, TypeError) as err:  # the config's own validation, e.g. n_embd not divisible by n_head
        raise DataFileError(config_file, None, str(err)) from None
    try:
        tokenizer = CharTokenizer(vocab_file=str(vocab_file))
    except json.JSONDecodeError as err:
        raise DataFileError(vocab_file, err.lineno, f"not valid JSON ({err.msg}, column {err.colno})") from None
    except (ValueError, TypeError, AttributeError) as err:  # ids with gaps, PAD/MASK elsewhere, not a mapping
        raise DataFileError(vocab_file, None, f"not a chargpt vocabulary ({err})") from None
    if tokenizer.vocab_size != config.vocab_size:
        raise DataFileError(
            vocab_file, None,
            f"has {tokenizer.vocab_size} characters but {CONFIG_NAME} says vocab_size={config.vocab_size}",
        )
    if weights.is_file():  # a sharded folder (model.safetensors.index.json) is left to from_pretrained
        _check_weights(weights, config)
    return config, tokenizer


def check_chargpt_folder(
    path: str | os.PathLike, **config_overrides: Any
) -> tuple[CharGPTConfig, CharTokenizer]:
    """The config and tokenizer of the chargpt folder `path`, once its files are checked; loads no weights.

    Raises `DataFileError` naming the folder or the file at fault when `path` is not a complete, undamaged chargpt
    folder: missing, not a folder, no or invalid `config.json`, another `model_type`, no or damaged weights, weights
    that do not fit the config, no or invalid `vocab.json`, a vocabulary of another size than the config's. Prints
    nothing, so a script can check its other inputs against the model before loading it, and an error stays the
    only line.
    """
    folder = Path(path)
    weights = _check_folder(folder)
    verbosity = logging.get_verbosity()
    logging.set_verbosity_warning()  # the throwaway meta model would log its generation config
    try:
        return _check_contents(folder, weights, config_overrides)
    finally:
        logging.set_verbosity(verbosity)


def load_chargpt(
    path: str | os.PathLike, **config_overrides: Any
) -> tuple[CharGPTForCausalLM, CharTokenizer]:
    """The model and tokenizer saved in `path`; `config_overrides` (e.g. dropout rates) replace config values.

    `check_chargpt_folder` runs first, so a bad folder is one `DataFileError` line, not a `from_pretrained` traceback.
    """
    folder = Path(path)
    config, _ = check_chargpt_folder(folder, **config_overrides)  # made whole, the overrides given to its __init__
    model = CharGPTForCausalLM.from_pretrained(folder, config=config)
    tokenizer = CharTokenizer.from_pretrained(folder)
    if config_overrides:
        logger.info("config of %s overridden with %s", folder, config_overrides)
    return model, tokenizer


_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # owner/name, as the Hub spells a model repository


def resolve_model_path(name: str | os.PathLike | None) -> str | None:
    """Where a model given by `name` lies on this machine: a local path as it is; an ``owner/name`` that is no local
    path, the snapshot of that Hub repository, as transformers finds it (the local cache first; with
    HF_HUB_OFFLINE=1 the cache only). One line where it cannot be had."""
    if name is None or Path(name).exists() or not _REPO_ID.fullmatch(str(name)):
        return None if name is None else str(name)
    try:
        return snapshot_download(repo_id=str(name), repo_type="model")
    except Exception as err:  # offline and not cached, no such repository, no access: one line
        first = str(err).splitlines()[0] if str(err) else ""
        raise DataFileError(name, None, f"no such folder, and not a Hub model that can be had here "
                                        f"({type(err).__name__}: {first})") from None

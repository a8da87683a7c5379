"""Answer `Where was X born?` questions the reference's way, but batched and with the KV cache."""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.resources import as_file, files

import evaluate
import torch
from tqdm.auto import tqdm

from data_scripts import DataFileError
from modeling_chargpt import (
    MASK_CHAR,
    PAD_CHAR,
    CharGPTConfig,
    CharGPTForCausalLM,
    CharTokenizer,
    UnknownCharacterError,
)

METRIC_SCRIPT = "birthplace_accuracy.py"  # an `evaluate` metric script shipped inside this package


def load_metric() -> evaluate.EvaluationModule:
    """The exact-match metric, loaded offline from this package's own files (a checkout or an installed wheel).

    Hub metrics cannot load offline; `evaluate` copies a local script into its modules cache, so the file only has
    to exist while it loads (`as_file` extracts it if the package is zipped)."""
    with as_file(files(__package__) / METRIC_SCRIPT) as script:
        return evaluate.load(str(script))


def check_questions(
    path: str | os.PathLike,
    questions: Sequence[str],
    tokenizer: CharTokenizer,
    config: CharGPTConfig,
    max_new_tokens: int,
) -> None:
    """Refuse, naming `path` and the line, a question the model cannot answer, before any decoding starts.

    `questions[i]` is line i + 1 of `path` (`load_qa_tsv` allows no blank lines). A question must use only the
    vocabulary's characters (the reference looks each one up and fails on the first unknown one), must not
    contain PAD or MASK (MASK ends the question), and, for learned positions or synthesizer attention, question
    + MASK + `max_new_tokens` generated characters must fit in `block_size`.
    """
    bounded = config.position_embedding_type == "learned" or config.attention_type == "synthesizer"
    for line, question in enumerate(questions, start=1):
        for special, name in ((PAD_CHAR, "PAD"), (MASK_CHAR, "MASK")):
            if special in question:
                raise DataFileError(path, line, f"the question contains the reserved {name} character {special!r}")
        try:
            tokenizer.encode_text(question)
        except UnknownCharacterError as err:
            raise DataFileError(path, line, str(err)) from None
        need = len(question) + max_new_tokens  # question + MASK + answer, the last character never fed back
        if bounded and need > config.block_size:
            raise DataFileError(
                path, line,
                f"question + MASK is {len(question) + 1} characters; with max_new_tokens={max_new_tokens} decoding "
                f"needs {need} positions, more than this model's block_size={config.block_size} "
                f"({config.position_embedding_type} positions, {config.attention_type} attention)",
            )


@torch.no_grad()
def predict_birthplaces(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    questions: Sequence[str],
    batch_size: int = 128,
    max_new_tokens: int = 32,
    show_progress: bool = True,
    cache_implementation: str = "static",
) -> list[str]:
    """Greedy-decode up to `max_new_tokens` characters after `question + MASK`; the answer ends at the next MASK.

    That is the reference's `completion.split(MASK)[1]`. Prompts are sorted by length so each left-padded
    batch wastes little; correct position ids make every row equal to its prompt decoded alone. The static
    (preallocated) KV cache writes each new key in place instead of growing the cache by concatenation.
    """
    model.eval()
    device = model.device
    mask_id = tokenizer.mask_token_id
    prompts = [q + MASK_CHAR for q in questions]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    predictions: list[str] = [""] * len(prompts)
    for start in tqdm(range(0, len(order), batch_size), desc="generating", disable=not show_progress):
        idx = order[start : start + batch_size]
        enc = tokenizer([prompts[i] for i in idx], padding=True, return_tensors="pt").to(device)
        out = model.generate(
            **enc,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=mask_id,
            cache_implementation=cache_implementation,
        )
        for i, row in zip(idx, out[:, enc["input_ids"].shape[1] :].tolist(), strict=True):
            end = row.index(mask_id) if mask_id in row else len(row)
            predictions[i] = "".join(tokenizer.itos[t] for t in row[:end])
    return predictions

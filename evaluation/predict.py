"""Answer `Where was X born?` questions the reference's way, but batched and with the KV cache."""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.resources import as_file, files

import evaluate
import torch
from tqdm.auto import tqdm

from data_scripts import DataFileError, asked_person, recitation_limit
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
    A model finetuned with `--recite True` (`config.answer_format`) needs ``Where was NAME born?`` questions, and
    answers after a recitation of at most `recitation_limit` characters instead of after the question.

    `questions[i]` is line i + 1 of `path` (`load_qa_tsv` allows no blank lines). A question must use only the
    vocabulary's characters (the reference looks each one up and fails on the first unknown one), must not
    contain PAD or MASK (MASK ends the question), and, for learned positions or synthesizer attention, question
    + MASK + `max_new_tokens` generated characters must fit in `block_size`.
    """
    bounded = config.position_embedding_type == "learned" or config.attention_type == "synthesizer"
    recites = config.answer_format == "recite"
    for line, question in enumerate(questions, start=1):
        if recites and asked_person(question) is None:
            raise DataFileError(path, line, f"{question!r} is not 'Where was NAME born?': this model was finetuned "
                                "to recite what it read about NAME before it answers (answer_format='recite')")
        for special, name in ((PAD_CHAR, "PAD"), (MASK_CHAR, "MASK")):
            if special in question:
                raise DataFileError(path, line, f"the question contains the reserved {name} character {special!r}")
        try:
            tokenizer.encode_text(asked_person(question) if recites else question)  # the text the model is given
        except UnknownCharacterError as err:
            raise DataFileError(path, line, str(err)) from None
        context = recitation_limit(config.block_size) if recites else len(question)
        need = context + max_new_tokens  # context + MASK + answer, the last character never fed back
        if bounded and need > config.block_size:
            raise DataFileError(
                path, line,
                f"{'the recitation' if recites else 'question'} + MASK is {context + 1} characters; with "
                f"max_new_tokens={max_new_tokens} decoding "
                f"needs {need} positions, more than this model's block_size={config.block_size} "
                f"({config.position_embedding_type} positions, {config.attention_type} attention)",
            )


@torch.no_grad()
def greedy_until_mask(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    prompts: Sequence[str],
    batch_size: int = 128,
    max_new_tokens: int = 32,
    show_progress: bool = True,
    cache_implementation: str = "static",
    desc: str = "generating",
    forbid_mask: bool = False,
) -> list[str]:
    """Greedy-decode up to `max_new_tokens` characters after each prompt; each text ends at the next MASK (with
    `forbid_mask`, MASK is never chosen and every text runs to `max_new_tokens`).

    Prompts are sorted by length so each left-padded batch wastes little; correct position ids make every row equal
    to its prompt decoded alone. The static (preallocated) KV cache writes each new key in place instead of growing
    the cache by concatenation.
    """
    model.eval()
    device = model.device
    mask_id = tokenizer.mask_token_id
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    texts: list[str] = [""] * len(prompts)
    for start in tqdm(range(0, len(order), batch_size), desc=desc, disable=not show_progress):
        idx = order[start : start + batch_size]
        enc = tokenizer([prompts[i] for i in idx], padding=True, return_tensors="pt").to(device)
        out = model.generate(
            **enc,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=mask_id,
            cache_implementation=cache_implementation,
            suppress_tokens=[mask_id] if forbid_mask else None,
            # on a GPU, generate() compiles the forward for a static cache in every process (12 s before the first
            # batch on an H200, then CUDA graphs per batch shape): more than a whole eager evaluation of this model
            disable_compile=True,
        )
        for i, row in zip(idx, out[:, enc["input_ids"].shape[1] :].tolist(), strict=True):
            end = row.index(mask_id) if mask_id in row else len(row)
            texts[i] = "".join(tokenizer.itos[t] for t in row[:end])
    return texts


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

    That is the reference's `completion.split(MASK)[1]`, batched and with the KV cache (`greedy_until_mask`).
    """
    return greedy_until_mask(model, tokenizer, [q + MASK_CHAR for q in questions], batch_size, max_new_tokens,
                             show_progress, cache_implementation)


def recite(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    names: Sequence[str],
    batch_size: int = 128,
    show_progress: bool = True,
) -> list[str]:
    """Each name followed by what the model recites about the person, up to its MASK and at most
    `recitation_limit(block_size)` characters in all: the context a `--recite True` model answers from
    (`predict_birthplaces(model, tokenizer, recite(...))`)."""
    limit = recitation_limit(model.config.block_size)
    recited = [""] * len(names)
    by_length: dict[int, list[int]] = {}
    for i, name in enumerate(names):  # names of one length decode together: no row runs past the limit
        by_length.setdefault(len(name), []).append(i)
    for length, idx in tqdm(sorted(by_length.items()), desc="reciting", disable=not show_progress):
        if length >= limit:
            continue
        texts = greedy_until_mask(model, tokenizer, [names[i] for i in idx], batch_size, limit - length,
                                  show_progress=False)
        for i, text in zip(idx, texts, strict=True):
            recited[i] = text
    return [name[:limit] + text for name, text in zip(names, recited, strict=True)]

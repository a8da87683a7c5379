"""Answer with a span of the recitation (`evaluate_birthplace.py --answer_from_recitation True`; not in the
reference): a `--recite True` model often recites the person's wiki.txt line correctly, place included, then keeps
reciting past the place and answers with a garbled copy. Its finetuning rows end the recitation right after the
answer (`data_scripts.recitation`), so the model itself can say where to stop: every word span of 1 to `max_words`
words of its own recitation is a candidate, scored as the whole output ``recitation[:end of span] MASK span MASK``
(the probability of stopping the recitation there and answering that span), and the most probable one is the
answer. The candidates come from the model's recitation alone (nothing is read from wiki.txt); the score is the
model's. docs/results.md has what it changes and how it was chosen on held-out training questions.

A recitation cut at `recitation_limit` (three quarters of the block) may stop before the place ("... diplomat born
in Ma"). The finetuning rows of such long lines are ``document[:limit] MASK answer MASK``, so with
`--continue_recitation True` the model continues the cut recitation (MASK forbidden) to the block's end, and the
spans that reach into the continuation compete as well, each scored in that trained form: ``recitation MASK span
MASK``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from data_scripts import recitation_limit
from modeling_chargpt import MASK_CHAR, CharGPTForCausalLM, CharTokenizer, UnknownCharacterError

from .predict import greedy_until_mask
from .records import score_rows

WORD = re.compile(r"\w[\w'.-]*\w|\w")  # "St.-Louis", "O'Hara", "Mumbai": punctuation at a word's edge is left out
JOINERS = (" ", "-")  # what may stand between the words of one span ("New York City", "Aix-en-Provence")


def recitation_spans(name: str, recitation: str, max_words: int = 3) -> list[tuple[str, int]]:
    """(span, end) for every run of 1..max_words words of `recitation` after `name`, joined by a space or hyphen;
    `end` is where the span ends in `recitation`."""
    words = [(m.start(), m.end()) for m in WORD.finditer(recitation, len(name))]
    spans = []
    for first in range(len(words)):
        for last in range(first, min(first + max_words, len(words))):
            if last > first and recitation[words[last - 1][1]:words[last][0]] not in JOINERS:
                break
            spans.append((recitation[words[first][0]:words[last][1]], words[last][1]))
    return spans


def continue_recitations(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    recitations: Sequence[str],
    batch_size: int = 128,
    show_progress: bool = True,
) -> list[str]:
    """For each recitation cut at `recitation_limit`, what the model recites next with MASK forbidden (greedy), as
    far as a span of it still fits ``recitation MASK span MASK`` in the block; "" for a recitation that stopped."""
    limit = recitation_limit(model.config.block_size)
    room = model.config.block_size - limit - 2
    cut = [i for i, recitation in enumerate(recitations) if len(recitation) >= limit]
    texts = greedy_until_mask(model, tokenizer, [recitations[i] for i in cut], batch_size, room, show_progress,
                              desc="continuing", forbid_mask=True) if cut and room > 0 else []
    continued = [""] * len(recitations)
    for i, text in zip(cut, texts, strict=True):
        continued[i] = text
    return continued


def answer_from_recitation(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    names: Sequence[str],
    recitations: Sequence[str],
    max_words: int = 3,
    max_chars: int = 32,
    batch_size: int = 128,
    show_progress: bool = True,
    continuations: Sequence[str] | None = None,
) -> tuple[list[str], list[str | None]]:
    """(recitation cut after the chosen span, span) per question: the span of the model's own recitation whose whole
    output ``recitation[:end] MASK span MASK`` it finds most probable, spans shorter than `max_chars` (the longest
    answer greedy decoding gives, `--max_new_tokens`) only. With `continuations` (`continue_recitations`), spans of
    ``recitation + continuation`` that end past the recitation are scored as ``recitation MASK span MASK`` and keep
    the recitation whole. Where no span fits the block (or the recitation holds no word after the name), the
    recitation stays whole and the span is None: the caller answers those the usual way."""
    rows, owners = [], []
    continuations = continuations or [""] * len(recitations)
    for i, (name, recitation, more) in enumerate(zip(names, recitations, continuations, strict=True)):
        for span, end in recitation_spans(name, recitation + more, max_words):
            if len(span) >= max_chars:
                continue
            end = min(end, len(recitation))  # a span reaching into the continuation answers after the whole cut
            try:
                ids = tokenizer.encode_text(recitation[:end] + MASK_CHAR + span + MASK_CHAR)
            except UnknownCharacterError:
                continue
            if len(ids) <= model.config.block_size:
                rows.append((ids, len(name)))  # targets: everything after the name
                owners.append((i, span, end))
    best: dict[int, tuple[float, str, int]] = {}
    scores = score_rows(model, tokenizer, rows, batch_size, show_progress)
    for (i, span, end), score in zip(owners, scores, strict=True):
        if i not in best or score.logprob > best[i][0]:
            best[i] = (score.logprob, span, end)
    cut = [recitations[i][:best[i][2]] if i in best else recitations[i] for i in range(len(recitations))]
    return cut, [best[i][1] if i in best else None for i in range(len(recitations))]

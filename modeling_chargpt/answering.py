"""How a chargpt model answers a birthplace question: the one owner of the question format, from the rows it is
finetuned on (`name_prompt_text`, `recitation_text`) to the prompts it is asked and the parsing of its answers.

It lives with the model code so that a model folder carries it: the `birthplace-qa` pipeline (pipeline_chargpt.py),
saved beside a finetuned model, imports it relatively and answers where this package is not installed, exactly as
`evaluate_birthplace.py` does here (both call `answer_questions`). `AnsweringSettings` says which way:

- the reference (``answer_format="direct"``): ``question MASK`` and greedy decoding up to the next MASK;
- reciting (``"recite"``, `train_finetune.py --recite True`): the NAME of ``Where was NAME born?``, the model's
  recitation of what it read about the person (at most `recitation_limit` characters), MASK, the answer;
- span answers (``answer_from_recitation``, not in the reference): a reciting model often recites the person's line
  correctly, place included, then keeps reciting past the place and answers with a garbled copy. Its finetuning rows
  end the recitation right after the answer (`data_scripts.recitation`), so the model itself can say where to stop:
  every word span of 1 to `max_words` words of its own recitation is a candidate, scored as the whole output
  ``recitation[:end of span] MASK span MASK``, and the most probable one is the answer. The candidates come from
  the model's recitation alone (nothing is read from wiki.txt); the score is the model's;
- with ``continue_recitation``, a recitation cut at `recitation_limit` ("... diplomat born in Ma") is continued
  (MASK forbidden) to the block's end, and the spans reaching into the continuation compete too, each scored in its
  trained form ``recitation MASK span MASK`` (the finetuning rows of long lines are ``document[:limit] MASK answer
  MASK``);
- with ``skip_name_words``, a span made only of words of the asked name is no candidate (a place is almost never a
  word of its person's name), and a recitation that then has none, because it stopped at a mention of the name
  ("John Thorne. John Thorne"), is recited on (`recite_on`) and answered from that;
- with ``first_of_pair``, a chosen span that is the second of a pair of capitalized words joined by a comma gives way
  to the first ("Perth, Scotland": Perth), as the training answers nearly always do (`pair_first`);
- with ``birth_before_death``, a chosen span after a death date ("Kiev - 25 April 1931 Paris") gives way to the most
  probable span before it, as the training answers nearly always are (`death_mark`);
- with ``after_born``, the most probable span starting right after a birth mark ("(born 1975 in Thessaloniki) is a
  Greek": Thessaloniki) is the answer wherever the model would stop, as the training answers nearly always are
  (`birth_place_at`).
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, make_dataclass, replace

import torch
from tqdm.auto import tqdm

from .calibration import Calibration, signals
from .modeling_chargpt import CharGPTForCausalLM
from .tokenization_chargpt import MASK_CHAR, PAD_CHAR, CharTokenizer, UnknownCharacterError

__all__ = [
    "AnswerScore",
    "AnsweringSettings",
    "Answers",
    "DECODING_CHOICES",
    "QuestionError",
    "answer_budget",
    "answer_from_recitation",
    "answer_questions",
    "asked_person",
    "continue_recitations",
    "death_mark",
    "decoding_arguments",
    "greedy_until_mask",
    "name_casings",
    "name_prompt_text",
    "predict_birthplaces",
    "question_problem",
    "model_recitation_limit",
    "pair_first",
    "recitation_limit",
    "recitation_spans",
    "recitation_text",
    "recite",
    "recite_on",
    "score_answers",
    "score_names",
    "score_recitations",
    "score_rows",
    "typed_question",
]

_QUESTION = re.compile(r"Where was (.+) born\?")


def asked_person(question: str) -> str | None:
    """The NAME of a ``Where was NAME born?`` question (the form of every birthplace TSV), or None for another form."""
    match = _QUESTION.fullmatch(question)
    return match.group(1) if match else None


# What a person types: any case and spacing, the question mark optional ("where was ann lee born")
_TYPED = re.compile(r"\s*where\s+was\s+(?P<name>.+?)\s+born\s*\??\s*", re.IGNORECASE)
_WH = re.compile(r"\s*(?:who|whom|whose|what|when|where|which|why|how)\b", re.IGNORECASE)
_YES_NO = re.compile(r"\s*(?:is|are|was|were|did|does|do|can|could|has|have)\b.*\?\s*", re.IGNORECASE)


def typed_question(text: str) -> str:
    """``Where was NAME born?`` for what a person typed: that question in any case or spacing, with or without its
    question mark, or a bare name, its spaces collapsed to one (`name_casings` lists what its case may have meant).
    Another kind of question ("What is the capital of X?", "Who was X?") is a `QuestionError` naming the one
    question this model answers: its words are no name. A question already in the exact form is returned as it is,
    so the evaluation files are read as the reference reads them."""
    if not isinstance(text, str) or not text.strip():
        raise QuestionError("an empty question: ask 'Where was NAME born?' or give a name")
    if asked_person(text) is not None:
        return text
    typed = _TYPED.fullmatch(text)
    if typed is None and (_WH.match(text) or _YES_NO.fullmatch(text)):
        raise QuestionError(f"{text.strip()!r} is another kind of question: this model answers only 'Where was NAME "
                            "born?' (or a bare name)")
    name = " ".join((typed["name"] if typed else text.strip().rstrip("?")).split())
    if not name:
        raise QuestionError(f"{text.strip()!r} names nobody: ask 'Where was NAME born?' or give a name")
    return f"Where was {name} born?"


_PARTICLES = {"al", "bin", "da", "de", "del", "della", "der", "di", "du", "la", "le", "of", "van", "von", "y"}


def name_casings(name: str) -> list[str]:
    """The ways a typed name may have been meant, case aside: as typed, every word capitalized, and every word but
    the particles ("de", "van", "bin") capitalized; `typed_question`'s caller keeps the one the model finds most
    familiar (`score_names`)."""
    def capital(word: str) -> str:
        return "-".join(part[:1].upper() + part[1:].lower() for part in word.split("-"))

    words = name.split(" ")
    casings = [name, " ".join(capital(w) for w in words),
               " ".join(w.lower() if 0 < k < len(words) - 1 and w.lower() in _PARTICLES else capital(w)
                        for k, w in enumerate(words))]
    return list(dict.fromkeys(casings))


def recitation_limit(block_size: int, chars: int | None = None) -> int:
    """The most characters a recitation (name included) may take: `chars` where a model was finetuned with
    `--recitation_chars` (config.recitation_chars), else three quarters of the block, so the MASK and an answer of
    the evaluation's reference length (32) still fit in a 128 block."""
    return chars if chars else block_size * 3 // 4


def model_recitation_limit(config) -> int:
    """`recitation_limit` of a model: what its recitation rows were cut at, so it recites as far as it was taught."""
    return recitation_limit(config.block_size, getattr(config, "recitation_chars", None))


def answer_budget(config, max_new_tokens: int, recites: bool) -> int:
    """How many characters decoding may generate after the context: `max_new_tokens`, except for a reciting model
    that cannot run past `block_size` (`config.bounded_context`), which gets what its recitation leaves of the block:
    its finetuning rows of long lines (``document[:limit] MASK answer MASK``) never had more."""
    if recites and config.bounded_context:
        return min(max_new_tokens, config.block_size - model_recitation_limit(config))
    return max_new_tokens


def question_problem(question: str, tokenizer: CharTokenizer, config, max_new_tokens: int,
                     answer_format: str | None = None) -> str | None:
    """Why the model cannot answer `question`, in one line, or None. A model finetuned with `--recite True`
    (`config.answer_format`) needs ``Where was NAME born?`` questions, and answers after a recitation of at most
    `recitation_limit` characters instead of after the question. A question must use only the vocabulary's characters
    (the reference looks each one up and fails on the first unknown one), must not contain PAD or MASK (MASK ends the
    question), and, where the model cannot run past `block_size` (`config.bounded_context`: learned positions or
    synthesizer attention), question + MASK + `max_new_tokens` generated characters must fit in it (a reciting model
    generates no more than its recitation leaves: `answer_budget`). `answer_format` overrides the config's."""
    recites = (answer_format or config.answer_format) == "recite"
    if recites and asked_person(question) is None:
        return (f"{question!r} is not 'Where was NAME born?': this model was finetuned to recite what it read about "
                "NAME before it answers (answer_format='recite')")
    for special, name in ((PAD_CHAR, "PAD"), (MASK_CHAR, "MASK")):
        if special in question:
            return f"the question contains the reserved {name} character {special!r}"
    try:
        tokenizer.encode_text(asked_person(question) if recites else question)  # the text the model is given
    except UnknownCharacterError as err:
        return str(err)
    context = model_recitation_limit(config) if recites else len(question)
    need = context + answer_budget(config, max_new_tokens, recites)  # context + MASK + answer, the last not fed back
    if config.bounded_context and need > config.block_size:
        return (f"{'the recitation' if recites else 'question'} + MASK is {context + 1} characters; with "
                f"max_new_tokens={max_new_tokens} decoding needs {need} positions, more than this model's "
                f"block_size={config.block_size} ({config.position_embedding_type} positions, "
                f"{config.attention_type} attention)")
    return None


# ---------------------------------------------------------------------------------------------------------------
# the training rows of each format (data_scripts pads, encodes and labels them)
# ---------------------------------------------------------------------------------------------------------------


def name_prompt_text(question: str, answer: str, block_size: int) -> str:
    """The reference row ``question + MASK + answer + MASK``, padded with PAD to `block_size`; the reference drops
    every non-ASCII character of the TSV first (`data_scripts.ascii_only`)."""
    x = question + MASK_CHAR + answer + MASK_CHAR
    if len(x) > block_size:
        raise ValueError(f"name prompt {x!r} is {len(x)} characters, more than block_size={block_size}")
    return x + PAD_CHAR * (block_size - len(x))


def recitation_text(name: str, document: str, answer: str, block_size: int, limit: int | None = None) -> str:
    """The reciting row ``document[:cut] + MASK + answer + MASK`` padded with PAD to `block_size`: `cut` ends the
    person's document right after the answer's first occurrence outside a mention of the name (the whole document if
    there is none), never beyond `recitation_limit` (`limit` characters, if given) or where the answer would not
    fit."""
    cut = len(document)
    names = [i for i in range(len(document)) if document.startswith(name, i)] if name else []
    found = document.find(answer) if answer else -1
    while found >= 0:
        if not any(at <= found < at + len(name) for at in names):
            cut = found + len(answer)
            break
        found = document.find(answer, found + 1)
    cut = min(cut, recitation_limit(block_size, limit), block_size - 2 - len(answer))
    if cut < len(name):
        raise ValueError(f"answer {answer!r} leaves no room for the name {name!r} in block_size={block_size}")
    text = document[:cut] + MASK_CHAR + answer + MASK_CHAR
    return text + PAD_CHAR * (block_size - len(text))


# ---------------------------------------------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------------------------------------------


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
    num_beams: int = 1,
) -> list[str]:
    """Greedy-decode up to `max_new_tokens` characters after each prompt; each text ends at the next MASK (with
    `forbid_mask`, MASK is never chosen and every text runs to `max_new_tokens`). With `num_beams` > 1, beam search
    instead: the most probable text of the beams (`generate`'s length-normalised beam score), in a growing cache.

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
            num_beams=num_beams,
            cache_implementation=cache_implementation if num_beams == 1 else None,
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
    num_beams: int = 1,
) -> list[str]:
    """Each name followed by what the model recites about the person, up to its MASK and at most
    `recitation_limit(block_size)` characters in all: the context a `--recite True` model answers from
    (`predict_birthplaces(model, tokenizer, recite(...))`). Greedy, or the best of `num_beams` beams."""
    limit = model_recitation_limit(model.config)
    recited = _decode_to_limit(model, tokenizer, names, batch_size, show_progress, "reciting", num_beams=num_beams)
    return [name[:limit] + text for name, text in zip(names, recited, strict=True)]


def _decode_to_limit(model: CharGPTForCausalLM, tokenizer: CharTokenizer, prompts: Sequence[str], batch_size: int,
                     show_progress: bool, desc: str, **decoding: typing.Any) -> list[str]:
    """What the model decodes after each prompt (`greedy_until_mask` with `decoding`), up to
    `recitation_limit` characters in all; "" after a prompt at the limit. Prompts of one length decode together, so
    no row runs past the limit."""
    limit = model_recitation_limit(model.config)
    texts = [""] * len(prompts)
    by_length: dict[int, list[int]] = {}
    for i, prompt in enumerate(prompts):
        by_length.setdefault(len(prompt), []).append(i)
    for length, idx in tqdm(sorted(by_length.items()), desc=desc, disable=not show_progress):
        if length >= limit:
            continue
        decoded = greedy_until_mask(model, tokenizer, [prompts[i] for i in idx], batch_size, limit - length,
                                    show_progress=False, **decoding)
        for i, text in zip(idx, decoded, strict=True):
            texts[i] = text
    return texts


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


def recite_on(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    recitations: Sequence[str],
    batch_size: int = 128,
    show_progress: bool = True,
) -> list[str]:
    """Each recitation that stopped before `recitation_limit`, recited on from where it stopped, greedy and MASK
    forbidden, to the limit (as `recite` would have gone on had the model not said MASK); the others as they are."""
    more = _decode_to_limit(model, tokenizer, recitations, batch_size, show_progress, "reciting on", forbid_mask=True)
    return [recitation + text for recitation, text in zip(recitations, more, strict=True)]


def continue_recitations(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    recitations: Sequence[str],
    batch_size: int = 128,
    show_progress: bool = True,
) -> list[str]:
    """For each recitation cut at `recitation_limit`, what the model recites next with MASK forbidden (greedy), as
    far as a span of it still fits ``recitation MASK span MASK`` in the block; "" for a recitation that stopped."""
    limit = model_recitation_limit(model.config)
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
    skip_name_words: bool = False,
    first_of_pair: bool = False,
    birth_before_death: bool = False,
    after_born: bool = False,
) -> tuple[list[str], list[str | None]]:
    """(recitation cut after the chosen span, span) per question: the span of the model's own recitation whose whole
    output ``recitation[:end] MASK span MASK`` it finds most probable, spans shorter than `max_chars` (the longest
    answer greedy decoding gives, `--max_new_tokens`) only. With `continuations` (`continue_recitations`), spans of
    ``recitation + continuation`` that end past the recitation are scored as ``recitation MASK span MASK`` and keep
    the recitation whole. Where no span fits the block (or the recitation holds no word after the name), the
    recitation stays whole and the span is None: the caller answers those the usual way. With `skip_name_words`, a
    span whose words are all words of the name is no candidate; with `first_of_pair`, the chosen span gives way to
    the first word of its pair (`pair_first`); with `birth_before_death`, a chosen span after a death date
    (`death_mark`) gives way to the most probable span before it, where there is one; with `after_born`, the most
    probable span that starts right after a birth mark (`birth_place_at`: "born 1975 in Thessaloniki") is the answer
    wherever there is one, before `first_of_pair` applies."""
    rows, owners = [], []
    continuations = continuations or [""] * len(recitations)
    texts = [recitation + more for recitation, more in zip(recitations, continuations, strict=True)]
    name_words = [set(WORD.findall(name)) if skip_name_words else set() for name in names]
    for i, (name, recitation) in enumerate(zip(names, recitations, strict=True)):
        for span, end in recitation_spans(name, texts[i], max_words):
            if len(span) >= max_chars or (name_words[i] and set(WORD.findall(span)) <= name_words[i]):
                continue
            try:  # a span reaching into the continuation answers after the whole cut
                ids = tokenizer.encode_text(recitation[:end] + MASK_CHAR + span + MASK_CHAR)
            except UnknownCharacterError:
                continue
            if len(ids) <= model.config.block_size:
                rows.append((ids, len(name)))  # targets: everything after the name
                owners.append((i, span, end))
    candidates: dict[int, list[tuple[float, str, int]]] = {}
    scores = score_rows(model, tokenizer, rows, batch_size, show_progress)
    for (i, span, end), score in zip(owners, scores, strict=True):
        candidates.setdefault(i, []).append((score.logprob, span, end))
    best = {i: max(scored, key=lambda c: c[0]) for i, scored in candidates.items()}  # the first of equal scores
    if birth_before_death:
        for i, (_, span, end) in best.items():
            mark = death_mark(texts[i], len(names[i]), set(WORD.findall(names[i])))
            before = [c for c in candidates[i] if c[2] <= mark] if mark is not None and end - len(span) >= mark else []
            if before:
                best[i] = max(before, key=lambda c: c[0])
    if after_born:
        for i in best:
            at = birth_place_at(texts[i], len(names[i]), set(WORD.findall(names[i])))
            there = [c for c in candidates[i] if c[2] - len(c[1]) == at]
            if there:
                best[i] = max(there, key=lambda c: c[0])
    if first_of_pair:
        for i, (logprob, span, end) in best.items():
            best[i] = (logprob, *pair_first(texts[i], span, end, len(names[i]), name_words[i]))
    cut = [recitations[i][:best[i][2]] if i in best else recitations[i] for i in range(len(recitations))]
    return cut, [best[i][1] if i in best else None for i in range(len(recitations))]


_PAIR_FIRST = re.compile(r"\b([A-Z][\w'.-]*\w|[A-Z]), $")  # a capitalized word, then ", " where a span starts


def pair_first(text: str, span: str, end: int, start: int = 0, not_words: set[str] | frozenset = frozenset()
               ) -> tuple[str, int]:
    """(span, end) moved to the first word of a pair of capitalized words joined by a comma ("Perth, Scotland" ->
    Perth; "Cambridge, Massachusetts, USA" -> Cambridge), found in `text[start:]`; the same (span, end) where it is
    not the second of such a pair or the first is one of `not_words`. The training answers in such pairs are nearly
    always the first (experiments/pair_positions.py), but a model that read ", Scotland" after "Perth" finds it hard
    to stop there."""
    while span[:1].isupper():
        pair = _PAIR_FIRST.search(text, start, end - len(span))
        if pair is None or pair[1] in not_words:
            break
        span, end = pair[1], pair.end(1)
    return span, end


_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
# a capitalized word, then a dash, "died" or "d" and a date: "Kiev - 25 April", "Sheffield; died 1 December",
# "France -- died June", "Lyon, d May"
_DEATH = re.compile(r"\b([A-Z][\w'.-]*\w|[A-Z])\)?[,;]?\s+(?:--?|\u2013|\u2014|died|d\.?)\s+(?:(?:died|d\.?)\s+)?"
                    rf"(?:\d|{_MONTH}\b)")
_NOT_PLACES = re.compile(rf"{_MONTH}|Born")


_DATE_WORD = rf"(?:c\.|circa|{_MONTH}|\d[\d./-]*(?:st|nd|rd|th)?)"  # "c.", "May", "22", "3-11-1920", "1st"
_DATE = rf"(?:(?:on|,|;|{_DATE_WORD})\s*)*"
# "born", "Born" or "b.", then a date ended by "in" or "at", or a date alone; the place starts where the match ends:
# "born in Raleigh", "born May 22, 1985 in Saint-Denis", "(born 1965 Vietnam)", "(b. 8 August 1898, Algiers"
_BORN = re.compile(rf"\b(?:[Bb]orn|b\.)\s+(?:{_DATE}(?:in|at)\s+(?:the\s+)?|{_DATE_WORD}[\s,;]+{_DATE})(?=\w)")


def birth_place_at(text: str, start: int = 0, not_words: set[str] | frozenset = frozenset()) -> int | None:
    """Where the word after the first birth mark of `text[start:]` starts ("born in Raleigh", "(born 1975 in
    Thessaloniki", "(b. 8 August 1898, Algiers": there), when it is capitalized and not a month, "Born" or one of
    `not_words`; None elsewhere, and where the mark is followed by no date and no "in" or "at" ("born Walter
    Stocker", "born to a Slovene family"). In the training lines such a word is nearly always the answer
    (experiments/pair_positions.py), but a model that recites on past it ("... in Thessaloniki) is a Greek") may
    find a later stop more probable."""
    mark = _BORN.search(text, start)
    if mark is None:
        return None
    word = WORD.match(text, mark.end())
    if word is None or not word[0][0].isupper() or word[0] in not_words or _NOT_PLACES.fullmatch(word[0]):
        return None
    return mark.end()


def death_mark(text: str, start: int = 0, not_words: set[str] | frozenset = frozenset()) -> int | None:
    """Where the first death date of `text[start:]` follows a capitalized word that may be a place (not a month,
    "Born" or one of `not_words`): the end of that word ("(4 April 1898 Kiev - 25 April 1931 Paris": after Kiev);
    None where there is none. A place in such a line is nearly always the one before its death date
    (experiments/pair_positions.py), but a model that read on to the place of death may stop there."""
    for mark in _DEATH.finditer(text, start):
        if mark[1] not in not_words and not _NOT_PLACES.fullmatch(mark[1]):
            return mark.end(1)
    return None


@dataclass(frozen=True)
class AnswerScore:
    """`logprob`: sum of log p over the answer's characters and its closing MASK; `min_char_prob`: the smallest p."""

    logprob: float
    min_char_prob: float

    @property
    def confidence(self) -> float:
        return math.exp(self.logprob)

    def after(self, recitation: AnswerScore | None) -> AnswerScore:
        """The score of the model's whole output: the `recitation` (when it recited), then this answer."""
        if recitation is None:
            return self
        return AnswerScore(self.logprob + recitation.logprob, min(self.min_char_prob, recitation.min_char_prob))


def score_answers(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    questions: Sequence[str],
    answers: Sequence[str],
    max_new_tokens: int = 32,
    batch_size: int = 128,
    show_progress: bool = True,
) -> list[AnswerScore]:
    """One teacher-forced pass over ``question MASK answer MASK``: the probability the model gave each answer.

    The closing MASK is scored too (the answer stops there), except after an answer of `max_new_tokens` characters,
    where decoding was cut off without one.
    """
    rows = []
    for question, answer in zip(questions, answers, strict=True):
        ids = tokenizer.encode_text(question + MASK_CHAR + answer)
        if len(answer) < max_new_tokens:
            ids.append(tokenizer.mask_token_id)
        rows.append((ids, len(question) + 1))  # targets from the answer's first character on
    return score_rows(model, tokenizer, rows, batch_size, show_progress)


def score_recitations(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    names: Sequence[str],
    recitations: Sequence[str],
    batch_size: int = 128,
    show_progress: bool = True,
) -> list[AnswerScore]:
    """The probability a `--recite True` model gave its own recitation: the characters after the name and the MASK
    that ended it (none where it ran to `recitation_limit`, as `recite` stops it there).

    A made-up recitation is the unlikely part of a made-up answer: the answer copies a place out of whatever was
    recited, confidently either way, so only both scores together say how sure the model was (docs/confidence.md).
    """
    limit = model_recitation_limit(model.config)
    rows = []
    for name, recitation in zip(names, recitations, strict=True):
        ids = tokenizer.encode_text(recitation)
        if len(recitation) < limit:
            ids.append(tokenizer.mask_token_id)
        rows.append((ids, len(name)))
    return score_rows(model, tokenizer, rows, batch_size, show_progress)


@torch.no_grad()
def score_rows(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    rows: Sequence[tuple[list[int], int]],
    batch_size: int,
    show_progress: bool,
) -> list[AnswerScore]:
    """Sum and min of log p over each row's ids from index `first` on, in batches. Rows are right-padded, which causal
    attention never looks at, so each row's scores are those of the row alone."""
    model.eval()
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
    scores: list[AnswerScore | None] = [None] * len(rows)
    for start in tqdm(range(0, len(order), batch_size), desc="scoring", disable=not show_progress):
        idx = order[start : start + batch_size]
        width = max(len(rows[i][0]) for i in idx)
        ids = torch.full((len(idx), width), tokenizer.pad_token_id, dtype=torch.long)
        for r, i in enumerate(idx):
            ids[r, : len(rows[i][0])] = torch.tensor(rows[i][0])
        ids = ids.to(model.device)
        logprobs = model(input_ids=ids[:, :-1], use_cache=False).logits.float().log_softmax(-1)
        picked = logprobs.gather(-1, ids[:, 1:, None]).squeeze(-1).cpu()
        for r, i in enumerate(idx):
            seq, first = rows[i]
            chars = picked[r, first - 1 : len(seq) - 1]
            scores[i] = AnswerScore(float(chars.sum()), float(chars.min().exp()) if len(chars) else 1.0)
    return scores  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------------------------
# one call for every format: what evaluate_birthplace.py and the birthplace-qa pipeline both answer with
# ---------------------------------------------------------------------------------------------------------------


class QuestionError(ValueError):
    """A question the model cannot answer in its format; the message is one line naming the question."""


def _decoding(default: bool, help: str):
    """A decoding choice: saved with a finetuned model, and an option of train_finetune.py, evaluate_birthplace.py
    and the pipeline (`decoding_arguments`, `DECODING_CHOICES`) with no code of theirs."""
    return field(default=default, metadata={"help": help, "decoding": True})


# the choices that only change span answers (--answer_from_recitation True)
SPAN_ONLY = ("continue_recitation", "skip_name_words", "first_of_pair", "birth_before_death", "after_born")


@dataclass(frozen=True)
class AnsweringSettings:
    """How a model answers, saved in its config (`config.answering`) so that whoever loads it answers as it was
    measured. `answer_format` is the config's own field (how it was finetuned); the others are the evaluation's
    choices: the decoding choices (fields made with `_decoding`: a new way to decode is such a field and its branch in
    `answer_questions`), `max_new_tokens` and `abstain_below` (`evaluate_birthplace.py`), kept with the threshold's
    provenance (`abstention`: what it was chosen for on held-out training questions). With `calibration`
    (`calibration.Calibration`, fitted by `chargpt.evaluation.calibrate`) the confidence is the probability that the
    answer is right, and `abstain_below` applies to it; without, to the raw probability of the model's output."""

    answer_format: str = "direct"
    answer_from_recitation: bool = _decoding(False, (
        "A reciting model (--recite True) answers with the span (1-3 words) of its own recitation it finds most "
        "probable as the place where the recitation stops (modeling_chargpt/answering.py), not by free decoding."))
    continue_recitation: bool = _decoding(False, (
        "With --answer_from_recitation: a recitation cut at its limit (3/4 of the block) is continued, MASK "
        "forbidden, and the spans reaching into the continuation compete too, each scored as 'recitation MASK span "
        "MASK' (the finetuning rows of long lines)."))
    recitation_beams: int = _decoding(1, (
        "A reciting model (--recite True) recites by beam search with this many beams and answers after the most "
        "probable recitation, not the greedy one (1: greedy, as measured in the reference recipes)."))
    first_of_pair: bool = _decoding(False, (
        "With --answer_from_recitation: where the chosen span is the second of a pair of capitalized words joined "
        "by a comma ('Perth, Scotland'), the first is the answer, as it nearly always is in the training answers."))
    skip_name_words: bool = _decoding(False, (
        "With --answer_from_recitation: a span made only of words of the asked name is never the answer; a "
        "recitation left without another span (it stopped at a mention of the name) is recited on, greedy and MASK "
        "forbidden, to its limit, and the spans of that text compete."))
    birth_before_death: bool = _decoding(False, (
        "With --answer_from_recitation: where the chosen span comes after a death date ('1898 Kiev - 25 April 1931 "
        "Paris', 'Sheffield; died 1 December 1864 at Nottingham'), the most probable span before that date is the "
        "answer, as it nearly always is in the training answers."))
    after_born: bool = _decoding(False, (
        "With --answer_from_recitation: where the recitation has a birth mark ('born in Raleigh', 'born 1975 in "
        "Thessaloniki', 'b. 8 August 1898, Algiers'), the most probable span starting right after it is the answer, "
        "as it nearly always is in the training answers, wherever the model would stop."))
    max_new_tokens: int = 32
    abstain_below: float | None = None
    abstention: dict | None = None
    calibration: dict | None = None

    @classmethod
    def of(cls, config) -> AnsweringSettings:
        """The settings a model's config holds (`config.answering` and `config.answer_format`); a config saved
        without them answers the reference way (`saved` tells)."""
        saved = dict(getattr(config, "answering", None) or {})
        known = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in saved.items() if k in known},
                      "answer_format": getattr(config, "answer_format", "direct")})

    @staticmethod
    def saved(config) -> bool:
        return bool(getattr(config, "answering", None))

    @classmethod
    def departures(cls, choices: dict[str, typing.Any]) -> dict[str, typing.Any]:
        """The `choices` that differ from the defaults (what changes how a model answers)."""
        default = cls()
        return {name: value for name, value in choices.items() if value != getattr(default, name)}

    def to_config(self) -> dict:
        """What `config.answering` holds (answer_format stays the config's own field)."""
        return {k: v for k, v in asdict(self).items() if k != "answer_format"}

    def choosing(self, **choices: typing.Any) -> AnsweringSettings:
        """These settings with the `choices` that are not None (a flag left out keeps what was saved). Turning span
        answers off turns off the saved choices that only change them, unless those are given too: a `--preset best`
        model asked for its plain answers needs one flag, not five."""
        chosen = {name: value for name, value in choices.items() if value is not None}
        if chosen.get("answer_from_recitation") is False:
            for name in SPAN_ONLY:
                chosen.setdefault(name, False)
        return replace(self, **chosen)

    def check(self) -> None:
        if self.answer_from_recitation and self.answer_format != "recite":
            raise QuestionError("answer_from_recitation needs a model finetuned to recite (answer_format='recite')")
        if self.recitation_beams != 1 and self.answer_format != "recite":
            raise QuestionError("recitation_beams needs a model finetuned to recite (answer_format='recite')")
        if self.recitation_beams < 1:
            raise QuestionError(f"recitation_beams {self.recitation_beams}: at least 1 (1 is greedy)")
        for name in SPAN_ONLY:
            if getattr(self, name) and not self.answer_from_recitation:
                raise QuestionError(f"--{name} True only changes --answer_from_recitation True; give both")
        if self.calibration is not None:
            try:
                Calibration.from_dict(self.calibration)
            except (TypeError, ValueError) as err:
                raise QuestionError(f"the saved calibration cannot be read: {err}") from None
        if self.abstain_below is not None and not 0 < self.abstain_below < 1:
            raise QuestionError(f"abstain_below {self.abstain_below}: must be a probability between 0 and 1 "
                                "(exclusive)")


DECODING_CHOICES: tuple[str, ...] = tuple(f.name for f in fields(AnsweringSettings) if f.metadata.get("decoding"))


def decoding_arguments() -> type:
    """The decoding choices as a dataclass of command-line options (for `HfArgumentParser`): each one None unless
    given, which means as the model folder saved it (or, for train_finetune.py, as the preset chooses)."""
    hints = typing.get_type_hints(AnsweringSettings)
    return make_dataclass("DecodingArguments", [
        (f.name, hints[f.name] | None, field(default=None, metadata={
            "help": f"{f.metadata['help']} Default: as the model folder saved it (config.answering), else "
                    f"{f.default}."}))
        for f in fields(AnsweringSettings) if f.name in DECODING_CHOICES])


@dataclass
class Answers:
    """Per question: the answer, what it followed (the question, or the model's recitation), and, when scored, the
    answer's probability (`scores`) and the recitation's (`recitation_scores`)."""

    answers: list[str]
    contexts: list[str]
    recitations: list[str] | None = None
    scores: list[AnswerScore] | None = None
    recitation_scores: list[AnswerScore] | None = None
    name_scores: list[float | None] | None = None

    def output_score(self, i: int) -> AnswerScore | None:
        """The score of the model's whole output for question i: its answer, after its recitation if any."""
        if self.scores is None:
            return None
        return self.scores[i].after(self.recitation_scores[i] if self.recitation_scores else None)

    def confidence(self, i: int) -> float | None:
        """The probability of the model's whole output for question i: its answer, after its recitation if any."""
        score = self.output_score(i)
        return None if score is None else score.confidence

    def right_probability(self, i: int, calibration: Calibration | None) -> float | None:
        """How likely answer i is right (`calibration.Calibration`), or None without a calibration or scores."""
        score = self.output_score(i)
        found = signals(self.name_scores[i] if self.name_scores else None, score.logprob if score else None)
        return None if calibration is None or found is None else calibration.probability(**found)


def answer_questions(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    questions: Sequence[str],
    settings: AnsweringSettings,
    batch_size: int = 128,
    score: bool = False,
    show_progress: bool = True,
) -> Answers:
    """Answer `questions` in the model's format (`settings`); with `score`, also the probability of each answer
    (and of each recitation). Greedy throughout, unless `settings.recitation_beams` > 1: then the same answers
    whatever the batch size, up to rounding, which may reorder two beams of equal score."""
    names = recitations = None
    contexts = list(questions)  # what each answer follows
    budget = answer_budget(model.config, settings.max_new_tokens, settings.answer_format == "recite")
    if settings.answer_format == "recite":
        names = [asked_person(q) for q in questions]
        if None in names:
            bad = questions[names.index(None)]
            raise QuestionError(f"{bad!r} is not 'Where was NAME born?' or a name: this model recites what it read "
                                "about NAME before it answers (answer_format='recite')")
        contexts = recitations = recite(model, tokenizer, names, batch_size, show_progress,
                                        num_beams=settings.recitation_beams)
    if settings.answer_from_recitation:
        def spans_of(names: list[str], recitations: list[str]) -> tuple[list[str], list[str | None]]:
            more = (continue_recitations(model, tokenizer, recitations, batch_size, show_progress)
                    if settings.continue_recitation else None)
            return answer_from_recitation(model, tokenizer, names, recitations, max_chars=settings.max_new_tokens,
                                          batch_size=batch_size, show_progress=show_progress, continuations=more,
                                          skip_name_words=settings.skip_name_words,
                                          first_of_pair=settings.first_of_pair,
                                          birth_before_death=settings.birth_before_death,
                                          after_born=settings.after_born)

        cut, spans = spans_of(names, recitations)
        if settings.skip_name_words:  # recitations stopped at the name: answered from what the model would go on with
            limit = model_recitation_limit(model.config)
            stuck = [i for i, span in enumerate(spans) if span is None and len(recitations[i]) < limit]
            if stuck:
                longer = recite_on(model, tokenizer, [recitations[i] for i in stuck], batch_size, show_progress)
                for i, kept, span in zip(stuck, *spans_of([names[i] for i in stuck], longer), strict=True):
                    cut[i], spans[i] = kept, span
        contexts = recitations = cut  # each cut right after its chosen span
        free = [i for i, span in enumerate(spans) if span is None]  # no span to choose: answered as usual
        decoded = iter(predict_birthplaces(model, tokenizer, [contexts[i] for i in free], batch_size, budget,
                                           show_progress=False) if free else [])
        answers = [span if span is not None else next(decoded) for span in spans]
    else:
        answers = predict_birthplaces(model, tokenizer, contexts, batch_size, budget, show_progress)
    result = Answers(answers, contexts, recitations)
    if score:
        result.scores = score_answers(model, tokenizer, contexts, answers, budget, batch_size,
                                      show_progress)
        if recitations is not None:
            result.recitation_scores = score_recitations(model, tokenizer, names, recitations, batch_size,
                                                         show_progress)
        result.name_scores = score_names(model, tokenizer, [asked_person(q) for q in questions], batch_size,
                                         show_progress)
    return result


def score_names(
    model: CharGPTForCausalLM,
    tokenizer: CharTokenizer,
    names: Sequence[str | None],
    batch_size: int = 128,
    show_progress: bool = True,
) -> list[float | None]:
    """How familiar each name is to the model: the mean log-probability per character of the name as the start of a
    document, every character after the first (`calibration`); None for a question without a name (another form)
    or a one-character name."""
    known = [i for i, name in enumerate(names) if name is not None and len(name) > 1]
    scores = score_rows(model, tokenizer, [(tokenizer.encode_text(names[i]), 1) for i in known], batch_size,
                        show_progress) if known else []
    found: list[float | None] = [None] * len(names)
    for i, score in zip(known, scores, strict=True):
        found[i] = score.logprob / (len(names[i]) - 1)
    return found

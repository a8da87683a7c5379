"""Span corruption: the reference's `CharCorruptionDataset.__getitem__`, as a `datasets` transform.

For a document and one random draw:

1. truncate it to ``L' = randint(4, int(block_size * 7 / 8))`` characters (so ``L = min(L', len(doc))``);
2. pick ``masked_len = randint(1, max(1, (L - 1) // 2))``: uniform, at least 1, mean exactly ``L / 4`` for
   even ``L`` and ``(L + 1) / 4`` for odd ``L`` (the handout's "averaging 1/4 of the truncated length", with
   spread both ways). An empty document masks nothing (``masked_len = 0``). The masked span starts at
   ``randint(0, L - masked_len)``;
3. ``masked_string = prefix + MASK + suffix + MASK + masked_content``, padded with PAD to ``block_size + 1``
   characters (the 2024 handout's spec; the 2021 code padded to ``block_size``: ``spec="2021"``).

The reference trains on ``x = masked_string[:-1]``, ``y = masked_string[1:]`` with PAD targets ignored
(``ignore_index=0``): ``block_size`` characters each in 2024, ``block_size - 1`` in 2021 (`reference_pair`). In the
transformers convention the model shifts, so ``input_ids`` is ``masked_string[:block_size]`` and ``labels`` the same
ids with -100 at every PAD: logits ``[:-1]`` against labels ``[1:]`` are exactly the reference's x -> y terms. The
2024 string's last character is always PAD (``L + 2 <= int(7/8 block) + 2 <= block_size``), an ignored target, so
the rows, and every loss term, are the same for both years: what differs is what the reference's learning-rate
schedule counts, ``len(y)`` tokens per example (`SCHEDULE_TOKENS`).

Determinism: the draw for a document is a pure function of ``(seed, epoch, document idx)``, so a DataLoader
resumed mid-epoch (``skip_first_batches``), sharded over processes, or prefetching, sees exactly the draws of
one uninterrupted process, and ``set_epoch`` gives every epoch fresh corruptions. The transform runs on every
access (`Dataset.with_transform`), never through a cached `.map`. `set_epoch` mutates this object: with
DataLoader workers, do not use ``persistent_workers=True`` (workers would keep a stale epoch).

Plain documents (``objective="language_modeling"``, not in the reference): each document's first ``block_size``
characters, uncorrupted, every one a target. Reciting a person's line from the name (`train_finetune.py --recite`)
is exactly this prediction; under span corruption a character is predicted from the uncorrupted text before it only
when it falls in the prefix, so a fact in the middle of a line is trained that way in a small share of its epochs.
"""

from __future__ import annotations

import random

import torch

from modeling_chargpt import IGNORE_INDEX, MASK_CHAR, PAD_CHAR

__all__ = ["CORRUPTION_SPECS", "SCHEDULE_TOKENS", "PlainDocuments", "SpanCorruption", "corrupt_documents",
           "draw_corruptions", "draw_lengths", "plain_rows", "truncation_range"]

# The handout whose CharCorruptionDataset is followed, first the default: the newest. Its x and y hold this many
# characters for a block size, which is what the reference schedule counts per example (all of y, PAD included).
SCHEDULE_TOKENS = {"2024": lambda block_size: block_size, "2021": lambda block_size: block_size - 1}
CORRUPTION_SPECS = tuple(SCHEDULE_TOKENS)


def truncation_range(block_size: int) -> tuple[int, int]:
    """The inclusive range ``(4, int(block_size * 7 / 8))`` of the truncation draw ``L'``, for a valid block size.

    The one home of these bounds: the on-device draw (`device_batches`) uses them too.
    """
    if not isinstance(block_size, int) or block_size < 9:
        raise ValueError(
            f"span corruption needs an integer block_size >= 9 (a truncated document of up to "
            f"int(block_size*7/8) >= 4 characters plus two MASKs must fit), got {block_size!r}"
        )
    return 4, int(block_size * 7 / 8)


def draw_lengths(doc_len: int, block_size: int, rng: random.Random) -> tuple[int, int, int]:
    """The three random draws of one corruption: ``(L, masked_len, start)``, in the reference's order."""
    trunc_len = rng.randint(*truncation_range(block_size))
    L = min(trunc_len, doc_len)
    if L == 0:
        return 0, 0, 0
    masked_len = rng.randint(1, max(1, (L - 1) // 2))
    start = rng.randint(0, L - masked_len)
    return L, masked_len, start


class SpanCorruption:
    """Callable for `Dataset.with_transform` over documents (columns ``text``, ``idx``).

    Returns ``{"input_ids": [[...]], "labels": [[...]]}``, each row ``block_size`` long.
    """

    def __init__(self, tokenizer, block_size: int, seed: int = 0, spec: str = CORRUPTION_SPECS[0]) -> None:
        truncation_range(block_size)  # validates it
        if spec not in CORRUPTION_SPECS:
            raise ValueError(f"spec {spec!r}: choose one of {', '.join(CORRUPTION_SPECS)}")
        self.spec = spec
        self.tokenizer = tokenizer
        self.block_size = block_size
        self.seed = seed
        self.epoch = 0
        self.pad_token_id = tokenizer.pad_token_id

    def set_epoch(self, epoch: int) -> None:
        """Select the draws of ``epoch``; call it at the start of every epoch."""
        self.epoch = int(epoch)

    def rng_for(self, idx: int, epoch: int | None = None) -> random.Random:
        """The generator of document ``idx`` in ``epoch`` (default: the current one). String seeds are hashed with
        SHA-512 by `random.seed`, so this does not depend on PYTHONHASHSEED."""
        return random.Random(f"{self.seed}:{self.epoch if epoch is None else epoch}:{int(idx)}")

    def corrupt(self, text: str, rng: random.Random) -> str:
        """The padded ``masked_string`` for one draw from ``rng``: ``len(y) + 1`` characters (`SCHEDULE_TOKENS`)."""
        L, masked_len, start = draw_lengths(len(text), self.block_size, rng)
        doc = text[:L]
        prefix, masked, suffix = doc[:start], doc[start : start + masked_len], doc[start + masked_len :]
        masked_string = prefix + MASK_CHAR + suffix + MASK_CHAR + masked
        return masked_string + PAD_CHAR * (SCHEDULE_TOKENS[self.spec](self.block_size) + 1 - len(masked_string))

    def reference_pair(self, text: str, idx: int) -> tuple[str, str]:
        """The reference's ``(x, y)`` for document ``idx`` in this epoch: ``masked_string[:-1]``, ``[1:]``."""
        masked_string = self.corrupt(text, self.rng_for(idx))
        return masked_string[:-1], masked_string[1:]

    def example(self, text: str, idx: int) -> dict[str, list[int]]:
        ids = self.tokenizer.encode_text(self.corrupt(text, self.rng_for(idx))[: self.block_size])
        pad = self.pad_token_id
        return {"input_ids": ids, "labels": [IGNORE_INDEX if t == pad else t for t in ids]}

    def __call__(self, batch: dict) -> dict:
        if "text" not in batch or "idx" not in batch:
            raise KeyError(f"SpanCorruption expects columns 'text' and 'idx', got {sorted(batch)}")
        input_ids, labels = [], []
        for text, idx in zip(batch["text"], batch["idx"], strict=True):
            ex = self.example(text, idx)
            input_ids.append(ex["input_ids"])
            labels.append(ex["labels"])
        return {"input_ids": input_ids, "labels": labels}


class PlainDocuments(SpanCorruption):
    """`SpanCorruption`'s interface without the corruption: each row is the document's first ``block_size``
    characters, PAD after them, every character a target (`span_corruption_dataset`
    leaves out documents too short to have one)."""

    def corrupt(self, text: str, rng: random.Random) -> str:
        doc = text[: self.block_size]
        return doc + PAD_CHAR * (self.block_size - len(doc))


# The same rows built with tensor operations on the training device (data_scripts/device_batches.py).
_BITS = 1 << 62  # uniform integers below n are drawn as (62 random bits) % n: bias below n / 2**62


def draw_corruptions(
    doc_lengths: torch.Tensor, block_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(L, masked_len, start)`` for documents of ``doc_lengths`` (1-D long), drawn as `draw_lengths` draws them."""
    low, high = truncation_range(block_size)
    n, device = doc_lengths.shape[0], doc_lengths.device
    trunc = torch.randint(low, high + 1, (n,), generator=generator, device=device)
    bits = torch.randint(0, _BITS, (2, n), generator=generator, device=device)
    L = torch.minimum(trunc, doc_lengths)
    masked = torch.where(L > 0, 1 + bits[0] % ((L - 1) // 2).clamp(min=1), 0)
    start = bits[1] % (L - masked + 1)
    return L, masked, start


def corrupt_documents(
    ids: torch.Tensor,
    offsets: torch.Tensor,
    L: torch.Tensor,
    masked: torch.Tensor,
    start: torch.Tensor,
    block_size: int,
    pad_token_id: int,
    mask_token_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``prefix MASK suffix MASK masked PAD...`` (``input_ids``, ``labels`` (n, block_size)) of the documents
    starting at ``offsets`` in the concatenated ``ids``, for given draws: `SpanCorruption.corrupt`, vectorised."""
    j = torch.arange(block_size, device=ids.device)[None, :]
    L, masked, start = L[:, None], masked[:, None], start[:, None]
    suffix_end = L - masked + 1  # column of the second MASK: prefix, MASK, then the suffix's L - start - masked
    source = torch.where(j < start, j, torch.where(j < suffix_end, j + masked - 1, j - suffix_end - 1 + start))
    flat = (offsets[:, None] + source.clamp(min=0)).clamp(max=ids.shape[0] - 1)
    tokens = ids[flat]
    is_mask = (j == start) | (j == suffix_end)
    is_pad = j >= L + 2
    out = torch.where(is_mask, mask_token_id, tokens)
    out = torch.where(is_pad, pad_token_id, out)
    return out, torch.where(is_pad, IGNORE_INDEX, out)


def plain_rows(
    ids: torch.Tensor, offsets: torch.Tensor, doc_lengths: torch.Tensor, block_size: int, pad_token_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`PlainDocuments`' rows (``input_ids``, ``labels`` (n, block_size)) and lengths of the documents starting at
    ``offsets`` in the concatenated ``ids``, gathered on their device: the first ``block_size`` characters, PAD
    after them, every character a target."""
    lengths = doc_lengths.clamp(max=block_size)
    j = torch.arange(block_size, device=ids.device)[None, :]
    flat = (offsets[:, None] + j).clamp(max=ids.shape[0] - 1)
    inside = j < lengths[:, None]
    rows = torch.where(inside, ids[flat], pad_token_id)
    return rows, torch.where(inside, rows, IGNORE_INDEX), lengths

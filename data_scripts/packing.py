"""Collators: the reference's padded batches, and opt-in packing of several examples per row.

`PackedCollator` takes the SAME examples a padded batch would hold (so the number of examples per optimizer
step is unchanged), strips each one's trailing PAD, and packs them first-fit-decreasing into rows of at most
``block_size`` tokens. ``position_ids`` restart at 0 for every example, and ``attention_mask`` is the
block-diagonal causal mask `packed_causal_mask` derives from them, so no token sees another example. The first
label of every example is -100, so nothing is predicted across a boundary (unpacked, that label is never a
target either: the model's shift drops it). Each example then has exactly its unpacked targets and logits,
and the batch's mean loss is the same; only the PAD compute disappears.

The reference attends causally over PAD (it never masks it) and ignores PAD targets; trailing PAD cannot
influence any earlier logit, so stripping it changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from modeling_chargpt import IGNORE_INDEX, packed_causal_mask

__all__ = ["PackedCollator", "pad_collate", "pad_fraction"]


def _as_list(x) -> list[int]:
    return x.tolist() if isinstance(x, torch.Tensor) else list(x)


def pad_collate(examples: Sequence[dict], pad_token_id: int = 0) -> dict[str, torch.Tensor]:
    """Stack examples into ``input_ids`` and ``labels`` LongTensors (B, T): the reference's batches.

    Examples are normally already ``block_size`` long; shorter ones are right-padded (PAD / -100) to the
    longest. No attention mask: like the reference, the model attends causally over PAD.
    """
    if not examples:
        raise ValueError("pad_collate got an empty list of examples")
    ids = [_as_list(e["input_ids"]) for e in examples]
    labels = [_as_list(e["labels"]) for e in examples]
    width = max(len(x) for x in ids)
    for i, (x, y) in enumerate(zip(ids, labels, strict=True)):
        if len(x) != len(y):
            raise ValueError(f"example {i}: input_ids has {len(x)} tokens but labels has {len(y)}")
    input_ids = torch.full((len(ids), width), pad_token_id, dtype=torch.long)
    label_t = torch.full((len(ids), width), IGNORE_INDEX, dtype=torch.long)
    for i, (x, y) in enumerate(zip(ids, labels, strict=True)):
        input_ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
        label_t[i, : len(y)] = torch.tensor(y, dtype=torch.long)
    return {"input_ids": input_ids, "labels": label_t}


def pad_fraction(batch: dict[str, torch.Tensor], pad_token_id: int = 0) -> float:
    """Fraction of the batch's input positions that hold PAD (compute spent on nothing)."""
    ids = batch["input_ids"]
    return float((ids == pad_token_id).sum()) / ids.numel()


class PackedCollator:
    """Pack a batch of padded examples into pad-free rows (see the module docstring).

    Returns ``input_ids``, ``labels``, ``position_ids`` (R, W) and ``attention_mask`` (R, 1, W, W) bool, where
    ``R <= len(examples)`` and ``W <= block_size`` is the longest packed row. The tail of a row that is not
    full holds PAD with labels -100 and positions 0, 1, ... (its own segment, attending only to itself).
    With ``return_example_ids=True`` the batch also has ``example_ids`` (R, W): the index in ``examples`` of
    each token's example, -1 on the tail (for analysis; do not pass it to the model).
    """

    def __init__(self, block_size: int, pad_token_id: int = 0, return_example_ids: bool = False) -> None:
        if not isinstance(block_size, int) or block_size <= 0:
            raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
        self.block_size = block_size
        self.pad_token_id = pad_token_id
        self.return_example_ids = return_example_ids

    def strip(self, input_ids: list[int]) -> int:
        """Length of an example without its trailing PAD."""
        n = len(input_ids)
        while n > 0 and input_ids[n - 1] == self.pad_token_id:
            n -= 1
        return n

    def plan(self, lengths: Sequence[int]) -> list[list[int]]:
        """First-fit decreasing: rows as lists of example indices, in packing order (deterministic)."""
        order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
        rows: list[list[int]] = []
        free: list[int] = []
        for i in order:
            n = lengths[i]
            if n > self.block_size:
                raise ValueError(f"example {i} has {n} tokens, more than block_size={self.block_size}")
            for r, room in enumerate(free):
                if n <= room:
                    rows[r].append(i)
                    free[r] -= n
                    break
            else:
                rows.append([i])
                free.append(self.block_size - n)
        return rows

    def __call__(self, examples: Sequence[dict]) -> dict[str, torch.Tensor]:
        if not examples:
            raise ValueError("PackedCollator got an empty list of examples")
        ids = [_as_list(e["input_ids"]) for e in examples]
        labels = [_as_list(e["labels"]) for e in examples]
        lengths = []
        for i, (x, y) in enumerate(zip(ids, labels, strict=True)):
            if len(x) != len(y):
                raise ValueError(f"example {i}: input_ids has {len(x)} tokens but labels has {len(y)}")
            # keep every position up to the last real token or target; an all-PAD example still takes one slot
            last_target = max((j + 1 for j, t in enumerate(y) if t != IGNORE_INDEX), default=0)
            lengths.append(max(1, self.strip(x), last_target))
        rows = self.plan(lengths)
        width = max(sum(lengths[i] for i in row) for row in rows)
        R = len(rows)
        input_ids = torch.full((R, width), self.pad_token_id, dtype=torch.long)
        label_t = torch.full((R, width), IGNORE_INDEX, dtype=torch.long)
        position_ids = torch.zeros((R, width), dtype=torch.long)
        example_ids = torch.full((R, width), -1, dtype=torch.long)
        for r, row in enumerate(rows):
            pos = 0
            for i in row:
                n = lengths[i]
                input_ids[r, pos : pos + n] = torch.tensor(ids[i][:n], dtype=torch.long)
                label_t[r, pos : pos + n] = torch.tensor(labels[i][:n], dtype=torch.long)
                label_t[r, pos] = IGNORE_INDEX
                position_ids[r, pos : pos + n] = torch.arange(n)
                example_ids[r, pos : pos + n] = i
                pos += n
            position_ids[r, pos:] = torch.arange(width - pos)
        batch = {
            "input_ids": input_ids,
            "labels": label_t,
            "position_ids": position_ids,
            "attention_mask": packed_causal_mask(position_ids),
        }
        if self.return_example_ids:
            batch["example_ids"] = example_ids
        return batch

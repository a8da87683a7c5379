"""The fast data path: whole training batches built with tensor operations on the training device.

The `datasets` transforms (`corruption.py`, `name_prompts.py`, `packing.py`) stay the readable reference; this
module computes the same examples from a corpus encoded once (`EncodedExamples`: the documents' ids
concatenated with their offsets, and the name prompts as ready rows), so a step needs no Python per example, no
host-to-device copy and no host synchronisation:

* span corruption: the draws of `draw_lengths` with the same distribution (``L' ~ U{4..int(7/8 block)}``,
  ``L = min(L', len(doc))``, ``masked_len ~ U{1..max(1, (L-1)//2)}`` or 0 for an empty document,
  ``start ~ U{0..L-masked_len}``), from a `torch.Generator` on the device, and the same
  ``prefix MASK suffix MASK masked PAD...`` rows with labels -100 exactly at PAD (the model shifts, as in the
  reference path);
* plain documents (``objective="language_modeling"``): `PlainDocuments`' rows, each document's first
  ``block_size`` characters, gathered (no draws);
* name prompts: the rows of `name_prompt_dataset` (or any ready rows, e.g. `recitation_dataset`'s), gathered;
* the epoch: the DataLoader's (``ceil(examples / batch_size)`` steps, the last one partial, the reference order
  or a fresh permutation per epoch; mixed datasets in `even_interleaving` order);
* packing: the examples of a step in a FIXED number of rows of ``block_size`` (static shapes, so a step can be
  captured with CUDA graphs or `torch.compile`), with `PackedCollator`'s layout (positions restart per example,
  the first label of each example is -100, the tail of a row is its own segment).

A batch is a pure function of ``(seed, step)``: resuming needs no saved generator state, and the same seed gives
the same batches on the same device. The draws are not the `datasets` path's draws (those come from
`random.Random`), only their distribution is (tests/test_device_batches.py compares the two).

Packing without a host synchronisation cannot look at the lengths first, so the rows per step are fixed up front
(`DeviceBatches.estimate_rows`: the most the first 128 batches need, plus 15% and 2). It packs "anchor plus
smallest": the longest remaining example opens a row and the shortest ones fill it, computed as a prefix scan over
rows (no Python loop over examples). On wiki.txt at batch 128 that needs 63.8 rows on average (first-fit
decreasing, `PackedCollator`: 61.1) and at most 79 in 20,000 batches, against 86-88 rows estimated; at batch 32,
at most 27 in 40,000 batches against 27-28. An example that finds no room all the same is left out of that step's
loss and counted (`DeviceBatches.dropped`), never silently. On a CPU, where shapes need not be static, the training
loop drops each batch's trailing empty rows (``trim=True``, `trim_rows`): the same loss on about a quarter fewer rows.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import torch

from modeling_chargpt import IGNORE_INDEX, MASK_CHAR, packed_causal_mask

from .corruption import corrupt_documents, draw_corruptions
from .mixing import check_order, even_interleaving
from .objectives import objective_named

if TYPE_CHECKING:
    import datasets

    from modeling_chargpt import CharTokenizer

__all__ = ["DeviceBatches", "EncodedExamples", "compiled_packing", "corrupt_documents", "draw_corruptions",
           "pack_examples", "trim_rows"]

logger = logging.getLogger(__name__)

class _Plan(NamedTuple):
    order: torch.Tensor  # example of each sorted slot, longest first
    size: torch.Tensor  # its length
    row: torch.Tensor  # its row
    offset: torch.Tensor  # its first column
    placed: torch.Tensor  # whether it found room
    rows_used: torch.Tensor  # rows that hold an example (0-dim)


def _plan(lengths: torch.Tensor, rows: int, width: int) -> _Plan:
    """Anchor plus smallest: sorted by length, row r holds the r-th longest example followed by as many of the
    shortest not yet placed as fit. How many of the shortest a row takes depends only on how many the rows before
    it took, so the rows are a prefix composition of R lookup tables (log2(R) gathers), not a loop."""
    n, device = lengths.shape[0], lengths.device
    order = torch.sort(lengths, descending=True, stable=True).indices
    size = lengths[order]
    taken = torch.cat([size.new_zeros(1), size.flip(0).cumsum(0)])  # tokens of the k shortest, k = 0..n
    r = torch.arange(rows, device=device)[:, None]
    k = torch.arange(n + 1, device=device)[None, :]
    fits = torch.searchsorted(taken, taken[k] + (width - size[:rows, None]), right=True) - 1
    # row r opens (its anchor is example r) unless example r is already among the k shortest taken
    step = torch.where(r < n - k, torch.minimum(fits, n - 1 - r), k)
    d = 1
    while d < rows:  # Hillis-Steele scan: step[r] becomes step[r] o step[r-1] o ... o step[0]
        step = torch.cat([step[:d], torch.gather(step[d:], 1, step[:-d])])
        d *= 2
    consumed = torch.cat([size.new_zeros(1), step[:, 0]])  # shortest examples taken before row r, r = 0..R
    p = torch.arange(n, device=device)
    rank = n - 1 - p  # rank among the shortest
    anchor = (p < rows) & (p < n - consumed[p.clamp(max=rows)])
    row = torch.where(anchor, p, torch.searchsorted(consumed, rank, right=True) - 1).clamp(max=rows - 1)
    offset = torch.where(anchor, 0, size[row] + taken[rank] - taken[consumed[row]])
    return _Plan(order, size, row, offset, anchor | (rank < consumed[rows]), anchor.sum())


def pack_examples(
    input_ids: torch.Tensor, labels: torch.Tensor, lengths: torch.Tensor, rows: int
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Pack examples (rows of ``input_ids``/``labels`` whose first ``lengths`` tokens count; 0 = an empty slot)
    into ``rows`` rows of the same width, in `PackedCollator`'s layout; also returns how many examples found no
    room (a 0-dim tensor, so nothing waits for the device)."""
    n, width = input_ids.shape
    if not 1 <= rows <= n:
        raise ValueError(f"rows must be between 1 and the number of examples ({n}), got {rows}")
    plan = _plan(lengths, rows, width)
    j = torch.arange(width, device=input_ids.device)[None, :]
    # every example's tokens to their place; tokens past its length, and examples without room, to a spare slot
    keep = (j < plan.size[:, None]) & plan.placed[:, None]
    dest = torch.where(keep, plan.row[:, None] * width + plan.offset[:, None] + j, rows * width).flatten()
    src_labels = labels[plan.order].clone()
    src_labels[:, 0] = IGNORE_INDEX  # nothing is predicted across an example boundary
    fill = torch.zeros(rows + 1, dtype=torch.long, device=input_ids.device).index_add_(
        0, torch.where(plan.placed, plan.row, rows), torch.where(plan.placed, plan.size, 0)
    )[:rows]
    packed_ids = input_ids.new_zeros(rows * width + 1).scatter_(0, dest, input_ids[plan.order].flatten())
    packed_labels = labels.new_full((rows * width + 1,), IGNORE_INDEX).scatter_(0, dest, src_labels.flatten())
    tail = (j - fill[:, None]).clamp(min=0).flatten()  # the tail of a row is its own segment, from position 0
    positions = torch.cat([tail, tail.new_zeros(1)]).scatter_(0, dest, j.expand(n, width).flatten())
    position_ids = positions[:-1].view(rows, width)
    batch = {
        "input_ids": packed_ids[:-1].view(rows, width),
        "labels": packed_labels[:-1].view(rows, width),
        "position_ids": position_ids,
        "attention_mask": packed_causal_mask(position_ids),
    }
    return batch, ((plan.size > 0) & ~plan.placed).sum()


def trim_rows(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A packed batch without its trailing rows that hold no target (at least one row kept).

    Such rows change no loss and no gradient (each row attends only to itself), yet a CPU computes them: a batch of
    128 examples fills about 64 of its ~88 fixed rows on wiki.txt. Reads the row count back, which costs a CPU
    nothing and a GPU a synchronisation, and changes the shapes, which a captured or compiled step must not see."""
    has_target = (batch["labels"] != IGNORE_INDEX).any(1)
    row = torch.arange(1, has_target.shape[0] + 1, device=has_target.device)
    used = int(torch.where(has_target, row, 1).max())
    return {name: value[:used] for name, value in batch.items()}


@functools.cache
def compiled_packing(backend: str) -> Callable[..., tuple[dict[str, torch.Tensor], torch.Tensor]]:
    """`pack_examples` through torch.compile as one graph (static shapes, no graph break allowed): on a GPU a step's
    ~100 small packing kernels become a few fused ones. Cached per backend, so members of `--seeds` share it (each
    distinct row count compiles once); no default, so one backend is one cache entry."""
    return torch.compile(pack_examples, dynamic=False, fullgraph=True, backend=backend)


def _tail_length(ids: torch.Tensor, labels: torch.Tensor, pad_token_id: int) -> torch.Tensor:
    """`PackedCollator`'s example length: up to the last non-PAD token or target, at least 1."""
    j = torch.arange(1, ids.shape[1] + 1)
    last_token = torch.where(ids != pad_token_id, j, 0).amax(1)
    last_target = torch.where(labels != IGNORE_INDEX, j, 0).amax(1)
    return torch.maximum(torch.maximum(last_token, last_target), torch.ones_like(last_token))


class EncodedExamples:
    """The examples of one run, encoded once and kept on a device: documents to span-corrupt (``docs["text"]`` of
    `load_pretrain_corpus`), or with ``objective="language_modeling"`` to train on uncorrupted, and/or ready rows
    (a `name_prompt_dataset`, or its ``input_ids`` and ``labels`` as (M, block_size) tensors), in epoch order.

    With both, the epoch is `InterleavedDataset`'s `even_interleaving` of the two, documents first, or ``order``:
    ``(0, document)`` and ``(1, prompt)`` pairs, as `mixed_order` gives them.
    """

    def __init__(
        self,
        tokenizer: CharTokenizer,
        block_size: int,
        *,
        documents: Sequence[str] | None = None,
        prompts: datasets.Dataset | Mapping[str, torch.Tensor] | None = None,
        order: Sequence[tuple[int, int]] | None = None,
        device: torch.device | str = "cpu",
        objective: str = "span_corruption",
    ) -> None:
        if documents is None and prompts is None:
            raise ValueError("EncodedExamples needs documents, prompts, or both")
        self.objective = objective_named(objective)
        self.block_size = block_size
        self.device = torch.device(device)
        self.pad_token_id = tokenizer.pad_token_id
        self.mask_token_id = tokenizer.convert_tokens_to_ids(MASK_CHAR)
        documents = list(documents or [])
        if documents:
            self.objective.check_block(block_size)
        lengths = torch.tensor([len(doc) for doc in documents], dtype=torch.long)
        # one spare PAD at the end, so that gathers stay in range even when every document is empty
        ids = torch.tensor(tokenizer.encode_text("".join(documents)) + [self.pad_token_id], dtype=torch.long)
        self.doc_ids = ids.to(self.device)
        self.doc_offsets = (lengths.cumsum(0) - lengths).to(self.device)
        self.doc_lengths = lengths.to(self.device)
        if prompts is not None and len(prompts):
            rows = prompts.with_format("torch")[:] if hasattr(prompts, "with_format") else prompts
            prompt_ids, prompt_labels = rows["input_ids"], rows["labels"]
            if prompt_ids.shape[1] != block_size:
                raise ValueError(f"prompts are {prompt_ids.shape[1]} tokens long, expected block_size={block_size}")
            prompt_lengths = _tail_length(prompt_ids, prompt_labels, self.pad_token_id)
        else:
            prompt_ids = prompt_labels = torch.zeros((0, block_size), dtype=torch.long)
            prompt_lengths = torch.zeros(0, dtype=torch.long)
        self.prompt_ids = prompt_ids.to(self.device)
        self.prompt_labels = prompt_labels.to(self.device)
        self.prompt_lengths = prompt_lengths.to(self.device)
        self.num_documents, self.num_prompts = len(documents), int(prompt_ids.shape[0])
        # keys: k < num_documents is document k, otherwise prompt k - num_documents
        if order is not None:
            order = check_order(order, range(self.num_documents), range(self.num_prompts))
            keys = [k + (self.num_documents if s else 0) for s, k in order]
        elif self.num_documents and self.num_prompts:
            keys = [k + (self.num_documents if s else 0) for s, k in even_interleaving(self.num_documents,
                                                                                       self.num_prompts)]
        else:
            keys = list(range(self.num_documents + self.num_prompts))
        self.order = torch.tensor(keys, dtype=torch.long, device=self.device)

    def __len__(self) -> int:
        return self.order.shape[0]

    def build(
        self, keys: torch.Tensor, valid: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``input_ids``, ``labels`` (n, block_size) and lengths (n,) of the examples ``keys``; slots that are not
        ``valid`` become empty rows (PAD, -100, length 0). Documents become their objective's rows (fresh draws of
        span corruption, or the plain text: objectives.py)."""
        n, block = keys.shape[0], self.block_size
        ids = torch.full((n, block), self.pad_token_id, dtype=torch.long, device=self.device)
        labels = torch.full_like(ids, IGNORE_INDEX)
        lengths = torch.zeros(n, dtype=torch.long, device=self.device)
        is_doc = keys < self.num_documents
        if self.num_documents:
            doc = keys.clamp(max=self.num_documents - 1)
            ids, labels, lengths = self.objective.device_rows(self, doc, generator)
        if self.num_prompts:
            prompt = (keys - self.num_documents).clamp(0, self.num_prompts - 1)
            ids = torch.where(is_doc[:, None], ids, self.prompt_ids[prompt])
            labels = torch.where(is_doc[:, None], labels, self.prompt_labels[prompt])
            lengths = torch.where(is_doc, lengths, self.prompt_lengths[prompt])
        ids = torch.where(valid[:, None], ids, self.pad_token_id)
        labels = torch.where(valid[:, None], labels, IGNORE_INDEX)
        return ids, labels, torch.where(valid, lengths, 0)


def _seed(*parts: object) -> int:
    """A 63-bit generator seed from ``parts`` (SHA-256: no accidental collisions between (seed, step) pairs)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class DeviceBatches:
    """The training batches of a run, as a pure function of the step: ``batches(step)``.

    Epochs are the DataLoader's: `steps_per_epoch` = ``ceil(len(examples) / batch_size)`` batches, the last one
    holding the remainder (its missing examples are empty slots, so shapes stay fixed). ``num_examples(step)``
    is known on the host, for the token schedule, without looking at the batch.

    A batch holds the model's inputs plus ``num_examples`` and ``num_positions`` (ints, like the loop's
    `CountingCollate`; the positions are its shape, known on the host):
    packed, ``input_ids``, ``labels``, ``position_ids`` (rows, block_size) and ``attention_mask``
    (rows, 1, block_size, block_size); not packed, the reference's ``input_ids`` and ``labels`` (batch_size,
    block_size). ``rows=None`` estimates the packed rows from the corpus (`estimate_rows`).

    In a training loop, ``for batch in batches.epoch(epoch, skip)`` replaces ``for batch in loader`` (single
    process; the draws are seeded by ``seed`` and the step, so a resumed run sees the batches an uninterrupted one
    would), and ``batches.dropped()`` is read every N steps with the loss.
    """

    def __init__(
        self,
        examples: EncodedExamples,
        batch_size: int,
        *,
        seed: int = 0,
        shuffle: bool = False,
        packing: bool = True,
        rows: int | None = None,
        trim: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.examples = examples
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.packing = packing
        self.device = examples.device
        self.steps_per_epoch = math.ceil(len(examples) / batch_size)
        self.generator = torch.Generator(device=self.device)
        self._permutation: tuple[int, torch.Tensor] | None = None
        self._dropped = torch.zeros((), dtype=torch.long, device=self.device)
        self.pack = pack_examples  # or `compiled_packing`'s (`compile_packing`): the same batches
        self.trim = trim  # `trim_rows` every packed batch (a host read per step: for CPUs, never a captured step)
        if not packing:
            self.rows = batch_size
        elif rows is None:
            self.rows = self.estimate_rows()
        else:
            if not 1 <= rows <= batch_size:
                raise ValueError(f"rows must be between 1 and batch_size={batch_size}, got {rows}")
            self.rows = rows

    def __len__(self) -> int:
        """Batches per epoch, as `len(DataLoader)` gives them, so the loop counts both alike."""
        return self.steps_per_epoch
    def num_examples(self, step: int) -> int:
        """Examples in batch ``step``: ``batch_size``, or the remainder for an epoch's last batch."""
        k = step % self.steps_per_epoch
        return min(self.batch_size, len(self.examples) - k * self.batch_size)

    def _keys(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, k = divmod(step, self.steps_per_epoch)
        position = k * self.batch_size + torch.arange(self.batch_size, device=self.device)
        valid = position < len(self.examples)
        position = position.clamp(max=len(self.examples) - 1)
        if self.shuffle:
            if self._permutation is None or self._permutation[0] != epoch:
                self.generator.manual_seed(_seed(self.seed, "shuffle", epoch))
                self._permutation = (epoch, torch.randperm(len(self.examples), generator=self.generator,
                                                           device=self.device))
            position = self._permutation[1][position]
        return self.examples.order[position], valid

    def example_rows(self, step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The unpacked examples of batch ``step``: ``input_ids``, ``labels`` (batch_size, block_size), lengths."""
        keys, valid = self._keys(step)
        self.generator.manual_seed(_seed(self.seed, "draws", step))
        return self.examples.build(keys, valid, self.generator)

    def __call__(self, step: int) -> dict[str, torch.Tensor | int]:
        ids, labels, lengths = self.example_rows(step)
        if self.packing:
            batch, dropped = self.pack(ids, labels, lengths, self.rows)
            self._dropped += dropped
            if self.trim:
                batch = trim_rows(batch)
        else:
            batch = {"input_ids": ids, "labels": labels}
        return {**batch, "num_examples": self.num_examples(step), "num_positions": batch["input_ids"].numel()}

    def compile_packing(self, backend: str | None = None) -> None:
        """`--torch_compile_batches`: pack every later batch with `compiled_packing` (identical batches, fewer
        kernel launches; on a CPU it is slower)."""
        self.pack = compiled_packing(backend or "inductor")

    def epoch(self, epoch: int, skip: int = 0) -> Iterator[dict[str, torch.Tensor | int]]:
        """The batches of ``epoch`` from its batch ``skip`` on: the DataLoader loop's ``for batch in loader``
        (``skip`` as `Accelerator.skip_first_batches` after a resume)."""
        for k in range(skip, self.steps_per_epoch):
            yield self(epoch * self.steps_per_epoch + k)

    def dropped(self) -> int:
        """Examples that found no room in their packed rows, over every batch built so far (a host sync: read it
        every N steps, with the loss)."""
        return int(self._dropped)

    def estimate_rows(self, steps: int = 128, margin: float = 0.15) -> int:
        """Packed rows per step: the most that the first ``steps`` batches need, plus ``margin`` and two (the tail of
        the need is short but not empty), at most ``batch_size`` (which always fits)."""
        need = 0
        for step in range(steps):
            _, _, lengths = self.example_rows(step)
            need = max(need, int(_plan(lengths, self.batch_size, self.examples.block_size).rows_used))
        rows = min(self.batch_size, math.ceil(need * (1 + margin)) + 2)
        logger.info("packing %d examples per step into %d rows of %d (the sampled batches needed at most %d)",
                    self.batch_size, rows, self.examples.block_size, need)
        return rows

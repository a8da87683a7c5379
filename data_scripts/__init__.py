"""`datasets` pipelines for the chargpt training scripts: loading, span corruption, name prompts, packing,
mixing name prompts into pretraining, and the synthetic default corpus. Every piece is a plain function over
`datasets` rows; `device_batches` builds the same batches with tensor operations on the training device.

Names are imported lazily (PEP 562), so ``python -m data_scripts.synthetic`` runs without importing torch,
transformers or datasets, nor does reading a file with ``read_text_file``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_EXPORTS = {
    "corruption": ["CORRUPTION_SPECS", "SCHEDULE_TOKENS", "PlainDocuments", "SpanCorruption", "draw_lengths",
                   "truncation_range"],
    "objectives": ["OBJECTIVES", "Objective", "objective_named", "span_corruption_dataset"],
    "device_batches": ["DeviceBatches", "EncodedExamples"],
    "loading": ["ascii_only", "load_pretrain_corpus", "load_qa_tsv", "prompt_length"],
    "mixing": ["InterleavedDataset", "even_interleaving", "mixed_order"],
    "name_prompts": ["name_prompt_dataset", "name_prompt_example"],
    "packing": ["PackedCollator", "pad_collate", "pad_fraction"],
    "recitation": ["question_documents", "recitation_dataset", "recitation_example"],
    "synthetic": ["SyntheticWorld", "generate_synthetic_world", "write_synthetic_corpus"],
    "textfiles": ["DataFileError", "read_text_file"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
_MODULE_OF["IGNORE_INDEX"] = "modeling_chargpt"  # defined once, next to the loss that honours it
# the question format, owned by the model code's answering module (a model folder carries it)
_MODULE_OF.update(dict.fromkeys(["asked_person", "name_prompt_text", "recitation_limit"], "modeling_chargpt.answering"))

if TYPE_CHECKING:
    from modeling_chargpt import IGNORE_INDEX
    from modeling_chargpt.answering import asked_person, name_prompt_text, recitation_limit

    from .corruption import (
        CORRUPTION_SPECS,
        SCHEDULE_TOKENS,
        PlainDocuments,
        SpanCorruption,
        draw_lengths,
        truncation_range,
    )
    from .device_batches import DeviceBatches, EncodedExamples
    from .loading import ascii_only, load_pretrain_corpus, load_qa_tsv, prompt_length
    from .mixing import InterleavedDataset, even_interleaving, mixed_order
    from .name_prompts import name_prompt_dataset, name_prompt_example
    from .objectives import OBJECTIVES, Objective, objective_named, span_corruption_dataset
    from .packing import PackedCollator, pad_collate, pad_fraction
    from .recitation import question_documents, recitation_dataset, recitation_example
    from .synthetic import SyntheticWorld, generate_synthetic_world, write_synthetic_corpus
    from .textfiles import DataFileError, read_text_file


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module if module.startswith("modeling_chargpt") else f".{module}",
                                            __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))


__all__ = [
    "CORRUPTION_SPECS",
    "IGNORE_INDEX",
    "OBJECTIVES",
    "SCHEDULE_TOKENS",
    "DataFileError",
    "DeviceBatches",
    "EncodedExamples",
    "InterleavedDataset",
    "Objective",
    "PackedCollator",
    "PlainDocuments",
    "SpanCorruption",
    "SyntheticWorld",
    "ascii_only",
    "asked_person",
    "draw_lengths",
    "even_interleaving",
    "generate_synthetic_world",
    "load_pretrain_corpus",
    "load_qa_tsv",
    "mixed_order",
    "name_prompt_dataset",
    "name_prompt_example",
    "name_prompt_text",
    "objective_named",
    "pad_collate",
    "pad_fraction",
    "prompt_length",
    "question_documents",
    "read_text_file",
    "recitation_dataset",
    "recitation_example",
    "recitation_limit",
    "span_corruption_dataset",
    "truncation_range",
    "write_synthetic_corpus",
]

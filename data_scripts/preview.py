"""Print a few examples of a dataset, like the reference's ``python src/dataset.py {charcorruption,namedata}``.

    python -m data_scripts.preview charcorruption --data_dir ../shared/data
    python -m data_scripts.preview namedata --data_dir ../shared/data

Each example prints as the reference does: ``x:`` the model input the reference feeds and ``y:`` the target at each
of those positions, PAD and ignored targets shown as PAD (``\\u25a1``), so ``x[i]`` is trained to predict ``y[i]``.
Span corruption's x and y are ``block_size`` characters long (the 2024 handout; ``--corruption_spec 2021``: one
fewer), the name prompts' ``block_size - 1`` (``input_ids[:-1]`` and ``labels[1:]``), as in every handout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import datasets

from modeling_chargpt import IGNORE_INDEX, PAD_CHAR, CharTokenizer

from .corruption import CORRUPTION_SPECS
from .loading import load_pretrain_corpus, load_qa_tsv
from .name_prompts import name_prompt_dataset
from .objectives import span_corruption_dataset
from .textfiles import DataFileError


def format_example(example: dict, tokenizer) -> tuple[str, str]:
    """The reference's ``(x, y)`` lines for one example with aligned ``input_ids``/``labels``."""
    itos = tokenizer.itos
    ids, labels = list(example["input_ids"]), list(example["labels"])
    x = "".join(itos[int(t)] for t in ids[:-1])
    y = "".join(PAD_CHAR if int(t) == IGNORE_INDEX else itos[int(t)] for t in labels[1:])
    return x, y


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_scripts.preview", description=__doc__.split("\n")[0])
    parser.add_argument("dataset_type", choices=["charcorruption", "namedata"])
    parser.add_argument("--data_dir", required=True, help="directory with wiki.txt and birth_places_train.tsv")
    parser.add_argument("--block_size", type=int, default=128)
    parser.add_argument("--num_examples", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epoch", type=int, default=0, help="span corruption draws of this epoch")
    parser.add_argument("--corruption_spec", choices=CORRUPTION_SPECS, default=CORRUPTION_SPECS[0],
                        help="the handout whose CharCorruptionDataset sets the lengths of x and y")
    args = parser.parse_args(argv)
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    data_dir = Path(args.data_dir)
    try:
        text, docs = load_pretrain_corpus(data_dir / "wiki.txt")
        tokenizer = CharTokenizer.from_corpus(text)
        if args.dataset_type == "charcorruption":
            ds, corruption = span_corruption_dataset(docs, tokenizer, args.block_size, args.seed,
                                                     spec=args.corruption_spec)
            corruption.set_epoch(args.epoch)
            pairs = [corruption.reference_pair(docs[i]["text"], docs[i]["idx"])
                     for i in range(min(args.num_examples, len(docs)))]
        else:
            tsv = data_dir / "birth_places_train.tsv"
            ds = name_prompt_dataset(load_qa_tsv(tsv, block_size=args.block_size), tokenizer, args.block_size, tsv)
            pairs = [format_example(ds[i], tokenizer) for i in range(min(args.num_examples, len(ds)))]
    except (DataFileError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for x, y in pairs:
        print("x:", x)
        print("y:", y)
    return 0


if __name__ == "__main__":
    sys.exit(main())

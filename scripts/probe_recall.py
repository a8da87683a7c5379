"""Has a pretrained model memorised the dev birthplaces? Asks it to continue its own wiki.txt line.

    python scripts/probe_recall.py MODEL_DIR [--data_dir ../shared/data]

For each dev question whose place occurs in the person's wiki.txt line (before character 120), the line up to
the place is the prompt and greedy decoding must continue with the place. High recall with low finetuned
accuracy means the finetuning, not the pretraining, loses the facts (docs/results.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from data_scripts import DataFileError, asked_person, load_qa_tsv, read_text_file
from modeling_chargpt import CharGPTForCausalLM, CharTokenizer


def probe(model_dir: str, data_dir: str) -> tuple[int, int, int]:
    """(dev questions, those whose place is in their wiki.txt line, places the model continues the line with)."""
    if not (Path(model_dir) / "config.json").is_file():
        raise DataFileError(Path(model_dir), None, "not a saved chargpt model (no config.json)")
    tok = CharTokenizer.from_pretrained(model_dir)
    model = CharGPTForCausalLM.from_pretrained(model_dir).eval()
    lines = read_text_file(Path(data_dir) / "wiki.txt").splitlines()
    line_of = {line.split(". ", 1)[0]: line for line in lines}  # the real layout: "Name. sentence"

    def person_line(name: str) -> str:
        """The person's wiki.txt line: "Name. ..." (real data), else the first line that starts with the name."""
        if name in line_of:
            return line_of[name]
        return next((line for line in lines if line.startswith(name) and not line[len(name):][:1].isalnum()), "")

    questions = load_qa_tsv(Path(data_dir) / "birth_dev.tsv", model.config.block_size)
    found = recalled = 0
    for question, place in zip(questions["question"], questions["answer"], strict=True):
        line = person_line(asked_person(question) or "")
        idx = line.find(place) if place else -1
        if idx < 0 or idx >= model.config.block_size - 8:
            continue
        found += 1
        ids = torch.tensor([tok.encode_text(line[:idx])])
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=min(len(place), model.config.block_size - 1 - idx),
                                 do_sample=False)
        got = tok.decode(out[0, ids.shape[1]:].tolist())
        recalled += bool(got) and place.startswith(got)
    return len(questions["question"]), found, recalled


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("--data_dir", default="../shared/data")
    return parser


def main() -> None:
    opts = build_parser().parse_args()
    try:
        total, found, recalled = probe(opts.model_dir, opts.data_dir)
    except (DataFileError, OSError) as err:
        sys.exit(f"probe_recall.py: {err}")
    print(f"{opts.model_dir}: {total} dev questions, {found} with the place in their line, recalled {recalled} "
          f"({100 * recalled / max(found, 1):.1f}% of those)")


if __name__ == "__main__":
    main()

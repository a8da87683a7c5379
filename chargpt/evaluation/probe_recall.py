"""Has a pretrained model memorised the dev birthplaces? Asks it to continue its own wiki.txt line.

    python -m chargpt.evaluation.probe_recall MODEL_DIR [--data_dir ../shared/data] [--predictions DEV_PREDICTIONS ...]

For each dev question whose place occurs in the person's wiki.txt line (before character 120), the line up to
the place is the prompt and greedy decoding must continue with the place. High recall with low finetuned
accuracy means the finetuning, not the pretraining, loses the facts (docs/results.md). `--predictions` takes dev
predictions files of models finetuned from MODEL_DIR and splits each one's right answers by what the probe found:
how many of the stored places a finetuning reaches, and how many right answers it has without them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from chargpt.evaluation.record_files import read_predictions
from data_scripts import DataFileError, asked_person, load_qa_tsv, read_text_file
from modeling_chargpt import CharGPTForCausalLM, CharTokenizer

RECALLED, FORGOTTEN, NOT_IN_LINE = "recalled", "not recalled", "place not in the line"


def probe(model_dir: str, data_dir: str) -> tuple[int, int, int]:
    """(dev questions, those whose place is in their wiki.txt line, places the model continues the line with)."""
    return tally(probe_each(model_dir, data_dir)[1])


def tally(found: list[str]) -> tuple[int, int, int]:
    """(questions, places in their line, places recalled) from probe_each's states."""
    return len(found), sum(state != NOT_IN_LINE for state in found), found.count(RECALLED)


def probe_each(model_dir: str, data_dir: str) -> tuple[list[str], list[str]]:
    """Per dev question, in the file's order: its gold place, and what the probe found (RECALLED, FORGOTTEN or
    NOT_IN_LINE)."""
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
    found = []
    for question, place in zip(questions["question"], questions["answer"], strict=True):
        line = person_line(asked_person(question) or "")
        idx = line.find(place) if place else -1
        if idx < 0 or idx >= model.config.block_size - 8:
            found.append(NOT_IN_LINE)
            continue
        ids = torch.tensor([tok.encode_text(line[:idx])])
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=min(len(place), model.config.block_size - 1 - idx),
                                 do_sample=False)
        got = tok.decode(out[0, ids.shape[1]:].tolist())
        found.append(RECALLED if got and place.startswith(got) else FORGOTTEN)
    return list(questions["answer"]), found


def reached(golds: list[str], found: list[str], predictions: list[str],
            predictions_path: str) -> dict[str, tuple[int, int]]:
    """(right, questions) of a dev predictions file per probe state: a finetuning reaches what pretraining stored
    when it is right on the RECALLED questions; right answers elsewhere did not come from a recalled line."""
    if len(predictions) != len(golds):
        raise DataFileError(predictions_path, None, f"{len(predictions)} predictions but birth_dev.tsv has "
                                                    f"{len(golds)} questions: not a dev predictions file?")
    counts = {state: [0, 0] for state in (RECALLED, FORGOTTEN, NOT_IN_LINE)}
    for gold, state, prediction in zip(golds, found, predictions, strict=True):
        counts[state][0] += prediction == gold
        counts[state][1] += 1
    return {state: (right, total) for state, (right, total) in counts.items()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("--data_dir", default="../shared/data")
    parser.add_argument("--predictions", nargs="+", default=[], metavar="DEV_PREDICTIONS",
                        help="dev predictions of models finetuned from MODEL_DIR: their right answers split by what "
                             "the probe found")
    return parser


def main() -> None:
    opts = build_parser().parse_args()
    try:
        predictions = [read_predictions(path) for path in opts.predictions]  # a bad path fails before the probe
        golds, found = probe_each(opts.model_dir, opts.data_dir)
        splits = [reached(golds, found, lines, path) for lines, path in zip(predictions, opts.predictions, strict=True)]
    except (DataFileError, OSError) as err:
        sys.exit(f"chargpt.evaluation.probe_recall: {err}")
    total, in_line, recalled = tally(found)
    print(f"{opts.model_dir}: {total} dev questions, {in_line} with the place in their line, recalled "
          f"{recalled} ({100 * recalled / max(in_line, 1):.1f}% of those)")
    for path, split in zip(opts.predictions, splits, strict=True):
        right = sum(r for r, _ in split.values())
        print(f"  {path}: right {right}/{len(found)}; " + "; ".join(
            f"{state} {r}/{n}" + (f" ({100 * r / n:.1f}%)" if n else "") for state, (r, n) in split.items()))


if __name__ == "__main__":
    main()

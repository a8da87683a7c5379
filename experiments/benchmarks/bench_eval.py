"""Evaluation speed: the reference loop (one question at a time, 32 full forward passes, no cache) vs chargpt's
batched `generate()` with the KV cache (dynamic, then static), and the birthplace-qa pipeline that
evaluate_birthplace.py answers through (static cache; with (c), `--repeats` alternated runs, medians), on all dev
questions, in one process. Predictions must be identical.

    python experiments/benchmarks/bench_eval.py --data_dir ../shared/data \
        [--model_name_or_path out/rope-finetune] [--json f]

Without a model folder a freshly initialised reference-size model is used (its answers are gibberish, but the
two decoders must still agree character for character, and the compute is the same).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import torch

from chargpt.training import load_chargpt
from chargpt.training.files import atomic_write_text
from data_scripts import load_pretrain_corpus, load_qa_tsv
from evaluate_birthplace import ask_pipeline
from modeling_chargpt import MASK_CHAR, CharGPTConfig, CharGPTForCausalLM, CharTokenizer
from modeling_chargpt.answering import AnsweringSettings, predict_birthplaces

WHAT = "evaluation speed on dev: the reference loop against batched generate() and the birthplace-qa pipeline"


@torch.no_grad()
def reference_predict(model: CharGPTForCausalLM, tok: CharTokenizer, questions: list[str], steps: int) -> list[str]:
    """The reference `utils.sample` + `split(MASK)[1]`: full recompute for every new character, context cropped."""
    model.eval()
    block = model.config.block_size
    preds = []
    for q in questions:
        x = torch.tensor([tok.encode_text(q + MASK_CHAR)], device=model.device)
        for _ in range(steps):
            cond = x if x.size(1) <= block else x[:, -block:]
            logits = model(input_ids=cond, use_cache=False).logits[:, -1, :]
            x = torch.cat((x, logits.argmax(-1, keepdim=True)), dim=1)
        completion = "".join(tok.itos[int(i)] for i in x[0])
        preds.append(completion.split(MASK_CHAR)[1])
    return preds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    parser.add_argument("--model_name_or_path", default=None)
    parser.add_argument("--position_embedding_type", default="learned", help="for the fresh model")
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=3, help="timings of (c) and (d), alternated")
    parser.add_argument("--json", default=None)
    return parser


def main() -> None:
    opts = build_parser().parse_args()
    torch.set_num_threads(opts.threads)
    torch.manual_seed(0)

    text, _ = load_pretrain_corpus(os.path.join(opts.data_dir, "wiki.txt"))
    if opts.model_name_or_path:
        model, tok = load_chargpt(opts.model_name_or_path)
    else:
        tok = CharTokenizer.from_corpus(text)
        model = CharGPTForCausalLM(CharGPTConfig(vocab_size=tok.vocab_size,
                                                 position_embedding_type=opts.position_embedding_type))
    model = model.to(opts.device).eval()
    questions = load_qa_tsv(os.path.join(opts.data_dir, "birth_dev.tsv"))["question"]

    start = time.perf_counter()
    ref = reference_predict(model, tok, questions, steps=32)
    t_ref = time.perf_counter() - start
    timings, agree = {}, {}
    for cache in ("dynamic", "static"):
        start = time.perf_counter()
        ours = predict_birthplaces(model, tok, questions, batch_size=opts.batch_size, max_new_tokens=32,
                                   show_progress=False, cache_implementation=cache)
        timings[cache] = time.perf_counter() - start
        agree[cache] = sum(a == b for a, b in zip(ref, ours, strict=True))
    # evaluate_birthplace.py's path, the birthplace-qa pipeline (no scores), against (c): alternated, the medians
    pairs = []
    for _ in range(opts.repeats):
        start = time.perf_counter()
        predict_birthplaces(model, tok, questions, batch_size=opts.batch_size, show_progress=False)
        middle = time.perf_counter()
        piped = ask_pipeline(model, tok, questions, AnsweringSettings(), opts.batch_size, score=False,
                             show_progress=False)[0]
        pairs.append((middle - start, time.perf_counter() - middle))
    timings["static"] = statistics.median([c for c, _ in pairs] + [timings["static"]])
    timings["pipeline"] = statistics.median([p for _, p in pairs])
    agree["pipeline"] = sum(a == b for a, b in zip(ref, piped, strict=True))
    same = min(agree.values())
    print(f"{len(questions)} dev questions on {opts.device} ({opts.threads} threads)")
    print(f"(a) reference loop, no cache             {t_ref:8.2f} s")
    for label, cache in (("(b)", "dynamic"), ("(c)", "static")):
        print(f"{label} batched generate, {cache:<7} KV cache {timings[cache]:8.2f} s   "
              f"speed-up x{t_ref / timings[cache]:.1f}   identical {agree[cache]}/{len(questions)}")
    print(f"(d) the birthplace-qa pipeline (static)   {timings['pipeline']:8.2f} s   "
          f"x{timings['pipeline'] / timings['static']:.3f} the time of (c)   identical {agree['pipeline']}/"
          f"{len(questions)}")
    if opts.json:
        model = opts.model_name_or_path or f"fresh {opts.position_embedding_type}"
        record = {  # experiments/records.py's shape, so docs_tables.py renders it as it is
            "name": model, "recipe": model, "flags": "", "variant": opts.position_embedding_type, "seeds": [0],
            "hardware": f"{opts.device}, {opts.threads} threads, torch {torch.__version__}", "scores": {},
            "seconds": {"reference": round(t_ref, 2), "batched_dynamic_cache": round(timings["dynamic"], 2),
                        "batched_static_cache": round(timings["static"], 2),
                        "pipeline": round(timings["pipeline"], 2)},
            "command": shlex.join(["python", *sys.argv]), "date": date.today().isoformat(),
            "facts": {"questions": len(questions), "identical": same,
                      "speedup_dynamic": round(t_ref / timings["dynamic"], 1),
                      "speedup_static": round(t_ref / timings["static"], 1),
                      "pipeline_vs_static": round(timings["pipeline"] / timings["static"], 3)}}
        atomic_write_text(Path(opts.json), json.dumps({"what": WHAT, "records": [record]}, indent=2) + "\n")
    if same != len(questions):
        sys.exit("predictions differ")


if __name__ == "__main__":
    from chargpt.training.cli import run_cli  # bad input (a missing data file) as one line

    sys.exit(run_cli(lambda _argv: main()))

"""Does `torch.compile` pay for chargpt training here? Packed span-corruption steps, eager vs compiled, one process.

    python experiments/benchmarks/bench_compile.py [--data_dir ../shared/data] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from data_scripts import PackedCollator, load_pretrain_corpus, span_corruption_dataset
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, CharTokenizer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", type=int, default=6)
    return parser


def main() -> None:
    opts = build_parser().parse_args()
    torch.set_num_threads(opts.threads)
    text, docs = load_pretrain_corpus(Path(opts.data_dir) / "wiki.txt")
    tok = CharTokenizer.from_corpus(text)
    ds, _ = span_corruption_dataset(docs, tok, 128, seed=0)
    collate = PackedCollator(128)
    batches = [collate([ds[i] for i in range(j * 128, (j + 1) * 128)]) for j in range(opts.batches)]
    for compiled in (False, True):
        torch.manual_seed(0)
        model = CharGPTForCausalLM(CharGPTConfig(vocab_size=tok.vocab_size)).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        forward = torch.compile(model) if compiled else model
        times = []
        for batch in batches + batches:
            start = time.perf_counter()
            loss = forward(**batch).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - start)
        print(f"compile={compiled}: first step {times[0]:.1f} s, median of the rest "
              f"{statistics.median(times[2:]):.3f} s/step", flush=True)


if __name__ == "__main__":
    from chargpt.training.cli import run_cli  # bad input (a missing data file) as one line

    sys.exit(run_cli(lambda _argv: main()))

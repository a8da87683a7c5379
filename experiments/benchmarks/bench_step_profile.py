"""Where a `--preset cpu-fast` pretraining step spends its time, and whether the AdamW implementation matters.

    python experiments/benchmarks/bench_step_profile.py --threads 2 [--position_embedding_type rope] [--steps 60]

The step is the preset's (dropout 0, 32 span-corruption documents packed into rows of 128, AdamW, gradient clip),
in fp32, built from the same pieces as `train_pretrain.py` but without Accelerate, so only the model and optimizer
are timed. Prints the median step for torch's default AdamW, `foreach=True` and `fused=True`, then a
`torch.profiler` table of one of them and the rate the matrix multiplications reached (FLOPs of every Linear,
forward and backward, over the profiler's `mm` + `addmm` time): if that is near the CPU's matmul peak
(`bench_bf16.py` times one matmul), the step is bound by matmul throughput and only fewer FLOPs can speed it up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from bench_train import make_step  # its sibling: a script's own folder is on sys.path when it runs

from data_scripts import PackedCollator, load_pretrain_corpus, span_corruption_dataset
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, CharTokenizer

OPTIMIZERS = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=60, help="timed steps per optimizer (after 3 warm-up steps)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--position_embedding_type", default="rope")
    parser.add_argument("--profile", default="default", choices=list(OPTIMIZERS), help="optimizer to profile")
    return parser


def main() -> None:
    opts = build_parser().parse_args()
    torch.set_num_threads(opts.threads)
    torch.set_flush_denormal(True)  # as the training scripts do on CPU

    text, docs = load_pretrain_corpus(os.path.join(opts.data_dir, "wiki.txt"))
    tok = CharTokenizer.from_corpus(text)
    block = 128
    dataset, _ = span_corruption_dataset(docs, tok, block, seed=0)
    n = opts.steps + 3
    collate = PackedCollator(block)
    batches = [collate([dataset[(i * opts.batch_size + j) % len(dataset)] for j in range(opts.batch_size)])
               for i in range(n)]
    rows = statistics.mean(b["input_ids"].shape[0] for b in batches)
    cfg = CharGPTConfig(vocab_size=tok.vocab_size, block_size=block, embd_pdrop=0.0, resid_pdrop=0.0,
                        attn_pdrop=0.0, position_embedding_type=opts.position_embedding_type)

    def fresh_step(name: str):
        torch.manual_seed(0)
        model = CharGPTForCausalLM(cfg).train()
        return model, make_step(model, lambda m, b: m(**b).loss, lr=2e-3, **OPTIMIZERS[name])

    print(f"{opts.threads} threads, torch {torch.__version__}, {opts.position_embedding_type}, batch "
          f"{opts.batch_size} documents = {rows:.1f} packed rows of {block}")
    for name in OPTIMIZERS:
        _, step = fresh_step(name)
        for batch in batches[:3]:
            step(batch)
        times = []
        for batch in batches[3:]:
            start = time.perf_counter()
            step(batch)
            times.append(time.perf_counter() - start)
        print(f"AdamW {name:<8} median {statistics.median(times):.4f} s/step, mean {statistics.mean(times):.4f}")

    from torch.profiler import ProfilerActivity, profile

    model, step = fresh_step(opts.profile)
    for batch in batches[:3]:
        step(batch)
    profiled = batches[3:13]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in profiled:
            step(batch)
    averages = prof.key_averages()
    print(averages.table(sort_by="self_cpu_time_total", row_limit=15))
    matmul_s = sum(e.self_cpu_time_total for e in averages if e.key in ("aten::mm", "aten::addmm")) / 1e6
    total_s = sum(e.self_cpu_time_total for e in averages) / 1e6
    macs_per_token = sum(m.in_features * m.out_features for m in model.modules() if isinstance(m, torch.nn.Linear))
    tokens = sum(b["input_ids"].numel() for b in profiled)
    flops = 6 * macs_per_token * tokens  # forward 2 FLOPs per MAC, backward twice that
    print(f"matmuls (mm + addmm): {matmul_s / total_s:.0%} of the profiled time, "
          f"{flops / matmul_s / 1e9:.0f} GFLOP/s on the Linear layers")


if __name__ == "__main__":
    from chargpt.training.cli import run_cli  # bad input (a missing data file) as one line

    sys.exit(run_cli(lambda _argv: main()))

"""Why `--mixed_precision fast` takes bf16 on an AMX CPU and on some CPUs without AMX, and why bf16 CPU training
avoids SDPA.

    python experiments/benchmarks/bench_bf16.py [--threads 2] [--steps 8]

Times (1) one 4096x256 by 256x1024 matmul in fp32 and bf16, (2) a training step of the reference-size model
(dropout 0, as cpu-fast pretrains) on 32 packed rows of 128 tokens: fp32, bf16 autocast with
attn_implementation="sdpa", and bf16 autocast with the default "chargpt" (batched matmuls in bf16 training).
Medians of --steps after warm-up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from chargpt.training.precision import cpu_has_amx, cpu_has_fast_bf16
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, packed_causal_mask


def median_seconds(fn, steps: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=8)
    return parser


def main() -> None:
    opts = build_parser().parse_args()
    torch.set_num_threads(opts.threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    print(f"AMX bf16: {cpu_has_amx()}, --mixed_precision fast takes {'bf16' if cpu_has_fast_bf16() else 'fp32'}; "
          f"{opts.threads} threads, torch {torch.__version__}")
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(4096, 256, dtype=dtype), torch.randn(256, 1024, dtype=dtype)
        print(f"matmul {str(dtype):<15} {median_seconds(lambda a=a, b=b: a @ b, 20) * 1e3:7.2f} ms")

    cfg = CharGPTConfig(vocab_size=256, embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0)
    model = CharGPTForCausalLM(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(2, 256, (32, 128))
    position_ids = torch.arange(128).repeat(32, 1) % 43  # three packed examples per row
    batch = {"input_ids": x, "labels": x, "position_ids": position_ids,
             "attention_mask": packed_causal_mask(position_ids)}

    def step(bf16: bool) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for name, bf16, attention in (("fp32 (SDPA)", False, "sdpa"), ("bf16, sdpa", True, "sdpa"),
                                  ("bf16, chargpt (batched matmuls)", True, "chargpt")):
        model.set_attn_implementation(attention)
        print(f"training step {name:<35} {median_seconds(lambda bf16=bf16: step(bf16), opts.steps):6.3f} s")


if __name__ == "__main__":
    from chargpt.training.cli import run_cli  # bad input (a missing data file) as one line

    sys.exit(run_cli(lambda _argv: main()))

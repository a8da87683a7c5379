"""How many tensor operations a fast-path training step dispatches, by phase: a device-free measure of the host work
that bounds a GPU step of this small model (each operation is a kernel launch or a view made from Python); and how
many floating-point operations its matrix products and attention do, the work no launch overhead hides (at
`--n_embd 256`, the faithful width: unlike the operation counts, the FLOPs grow with it).

    python experiments/benchmarks/bench_step_ops.py --data_dir ../shared/data \
        [--n_embd 256] [--extra '--optim adamw_torch_fused']
        [--json results/step_ops_cpu.json]

Runs `train_pretrain.main` (the product: `--device_data True`, the faithful depth, heads, block and batch) for
--steps steps on the CPU at a small width (the counts do not depend on the width), counting every aten operation
that reaches the dispatcher (a `TorchDispatchMode`) under the innermost function the loop called: the batch's
drawing, its packing, the forward, the backward, the gradient clipping, the optimizer step, the rest of the step.
The batches keep their fixed packed rows, as on a GPU (a CPU run drops the empty ones). On a CPU the default AdamW
runs per tensor; on a GPU the same flag runs a few multi-tensor operations. Eager only: under the counter nothing is
compiled, so `--torch_compile_batches` is not counted here. FLOPs are torch.utils.flop_counter's formulas (2 per
multiply-add of every mm, bmm, addmm and attention kernel, the CPU's flash attention included; elementwise work not
counted), over the fixed packed rows, padding included, as a GPU computes them.
"""

from __future__ import annotations

import argparse
import collections
import functools
import shlex
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from datetime import date
from pathlib import Path
from unittest import mock

import torch
from accelerate import Accelerator
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

import train_pretrain
from chargpt.training import atomic_write_json, loop, stacking
from chargpt.training.cli import command_line
from chargpt.training.hardware import cpu_name
from data_scripts import DeviceBatches
from data_scripts import device_batches as device_batches_module
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM

# (owner, attribute, phase): the functions a step calls, innermost phase wins
PHASES = [(DeviceBatches, "__call__", "batch drawing"), (device_batches_module, "pack_examples", "packing"),
          (CharGPTForCausalLM, "forward", "forward"), (Accelerator, "backward", "backward"),
          (Accelerator, "clip_grad_norm_", "clip"), (stacking, "clip_members_", "clip"),
          (torch.optim.AdamW, "step", "optimizer"),
          (torch.optim.Optimizer, "zero_grad", "zero_grad"), (loop, "_optimizer_step", "step, other")]


def _cpu_flash_forward(query, key, value, *args, out_val=None, **kwargs) -> int:
    return sdpa_flop_count(query.shape, key.shape, value.shape)


def _cpu_flash_backward(grad_out, query, key, value, *args, out_val=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out.shape, query.shape, key.shape, value.shape)


# flop_counter's formulas, and the same attention formulas for the CPU's flash kernels, which it does not list
FLOP_FORMULAS = {**flop_registry, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_forward,
                 torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward}


class OpCounter(TorchDispatchMode):
    """Counts the aten operations dispatched under each phase (none outside a step), and their FLOPs."""

    def __init__(self) -> None:
        super().__init__()
        self.phase: str | None = None
        self.counts: collections.Counter[str] = collections.Counter()
        self.flops: collections.Counter[str] = collections.Counter()
        self.rows: list[int] = []  # the packed rows of each forward's batch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.phase is not None:
            self.counts[self.phase] += 1
            formula = FLOP_FORMULAS.get(func._overloadpacket)
            if formula is not None:
                self.flops[self.phase] += formula(*args, **(kwargs or {}), out_val=out)
        return out

    def labelled(self, original: Callable, phase: str) -> Callable:
        @functools.wraps(original)  # Accelerate inspects zero_grad's signature
        def wrapped(*args, **kwargs):
            if phase == "forward" and kwargs.get("input_ids") is not None:
                self.rows.append(kwargs["input_ids"].shape[0])
            outer, self.phase = self.phase, phase
            try:
                return original(*args, **kwargs)
            finally:
                self.phase = outer
        return wrapped


def count_ops(argv: list[str], steps: int) -> tuple[dict[str, float], dict[str, float], float]:
    """Operations and FLOPs per step by phase for `train_pretrain.main(argv)` run for `steps` steps, and the rows a
    step computes (the fixed packed rows on the fast path; a mean where --extra makes them vary)."""
    counter = OpCounter()
    with ExitStack() as stack:
        for owner, name, phase in PHASES:
            stack.enter_context(mock.patch.object(owner, name, counter.labelled(getattr(owner, name), phase)))
        # the GPU step's batches: their fixed packed rows (a CPU run would trim the empty ones: `trim_rows`)
        stack.enter_context(mock.patch.object(device_batches_module, "trim_rows", lambda batch: batch))
        stack.enter_context(counter)
        train_pretrain.main([*argv, "--max_steps", str(steps)])
    return ({phase: round(n / steps, 1) for phase, n in counter.counts.most_common()},
            {phase: n / steps for phase, n in counter.flops.most_common()}, statistics.mean(counter.rows))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--n_embd", type=int, default=16, help="a small width: the operation counts do not depend on "
                        "it; the FLOPs do (256: the faithful width)")
    parser.add_argument("--extra", default="", help="more train_pretrain.py flags (quoted), e.g. '--optim "
                        "adamw_torch_fused'")
    parser.add_argument("--json", default=None, help="write the counts here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    extra = shlex.split(opts.extra)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as out:
        flags = ["--pretrain_corpus_path", f"{opts.data_dir}/wiki.txt", "--output_dir", out, "--n_embd",
                 str(opts.n_embd), "--device_data", "True", "--report_to", "none", "--checkpointing_steps", "0",
                 "--disable_tqdm", "True", "--logging_steps", "1000", "--sync_steps", "1000", *extra]
        counts, flops, rows = count_ops(flags, opts.steps)
    facts = {"steps": opts.steps, "n_embd": opts.n_embd, "aten_ops_per_step": counts,
             "total_per_step": round(sum(counts.values()), 1),
             "gflop_per_step": {phase: round(n / 1e9, 3) for phase, n in flops.items()},
             "total_gflop_per_step": round(sum(flops.values()) / 1e9, 3), "packed_rows": rows,
             # the operation counts do not depend on the width; the FLOPs are read at the faithful one
             "part": "flops" if opts.n_embd == CharGPTConfig().n_embd else "ops"}
    result = {  # experiments/records.py's shape: collecting runs into results/step_ops_cpu.json adds records
        "name": f"{shlex.join(extra) or 'the defaults'}, width {opts.n_embd}",
        "recipe": "experiments/benchmarks/bench_step_ops.py",
        "flags": shlex.join(extra), "variant": "", "seeds": [0], "hardware": f"{cpu_name()}, torch {torch.__version__}",
        "scores": {}, "seconds": {}, "date": date.today().isoformat(), "facts": facts,
        "command": command_line("experiments/benchmarks/bench_step_ops.py", argv)}
    print(f"{'phase':14s} {'operations':>10s} {'GFLOP':>9s}")
    for phase, n in counts.items():
        print(f"{phase:14s} {n:10.1f} {flops.get(phase, 0) / 1e9:9.3f}")
    print(f"{'total':14s} {facts['total_per_step']:10.1f} {facts['total_gflop_per_step']:9.3f}   ({rows} packed rows "
          f"of {opts.n_embd} wide)")
    if opts.json:
        atomic_write_json(opts.json, {"what": "aten operations and FLOPs of a fast-path pretraining step",
                                      "records": [result]})
    return 0


if __name__ == "__main__":
    sys.exit(main())

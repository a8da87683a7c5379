"""Training-step speed: a reference-style minGPT vs chargpt (padded) vs chargpt (packed), in one process and run.

    python experiments/benchmarks/bench_train.py --data_dir ../shared/data [--steps 6] [--threads 2] [--json out.json]

All of them train the reference configuration (4 layers, 8 heads, 256 dims, block 128, dropout 0.1, AdamW) on the
same real batches: 128 span-corruption examples from wiki.txt and 128 name prompts from the finetuning TSV (the
pretraining batch size, so the two rows compare). Reported: median step time and useful tokens per second,
where useful = target positions that are not PAD (what the loss is computed on), and the ratios to the yardstick.
Where bf16 is fast (a GPU that has it, a CPU with AMX), (d) = (c) under bf16 autocast, as `--mixed_precision fast`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from chargpt.training.files import atomic_write_text
from chargpt.training.precision import resolve_precision
from data_scripts import (
    PackedCollator,
    load_pretrain_corpus,
    load_qa_tsv,
    name_prompt_dataset,
    pad_collate,
    span_corruption_dataset,
)
from modeling_chargpt import IGNORE_INDEX, CharGPTConfig, CharGPTForCausalLM, CharTokenizer

WHAT = "training steps of the reference loop and its faster variants (experiments/benchmarks/bench_train.py)"


class ReferenceSelfAttention(nn.Module):
    """The minGPT attention of the assignment: separate key/query/value, explicit mask and softmax."""

    def __init__(self, d: int, n_head: int, block: int, p: float) -> None:
        super().__init__()
        self.key, self.query, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.attn_drop, self.resid_drop = nn.Dropout(p), nn.Dropout(p)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))
        self.n_head = n_head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        k = self.key(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = self.query(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, -1e10)
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))


class ReferenceBlock(nn.Module):
    def __init__(self, d: int, n_head: int, block: int, p: float) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = ReferenceSelfAttention(d, n_head, block, p)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(p))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ReferenceGPT(nn.Module):
    """minGPT as the assignment ships it: x/y pre-shifted, cross-entropy ignoring PAD (id 0)."""

    def __init__(self, vocab: int, block: int, n_layer: int = 4, n_head: int = 8, d: int = 256, p: float = 0.1):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d)
        self.pos_emb = nn.Parameter(torch.zeros(1, block, d))
        self.drop = nn.Dropout(p)
        self.blocks = nn.Sequential(*[ReferenceBlock(d, n_head, block, p) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.tok_emb(idx) + self.pos_emb[:, : idx.size(1), :])
        logits = self.head(self.ln_f(self.blocks(x)))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=0)


def time_steps(step, batches: list, n: int) -> list[float]:
    times = []
    for i in range(n + 1):  # the first step warms up allocators and is dropped
        start = time.perf_counter()
        step(batches[i % len(batches)])
        times.append(time.perf_counter() - start)
    return times[1:]


def make_step(model: nn.Module, loss_fn, bf16: bool = False, lr: float = 1e-4, **adamw_kwargs):
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, **adamw_kwargs)
    model.train()
    device_type = next(model.parameters()).device.type

    def step(batch):
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16):  # what Accelerate's bf16 does
            loss = loss_fn(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return step


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    parser.add_argument("--steps", type=int, default=6, help="timed steps per variant and batch kind")
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                        help="also time (d) packed under bf16 autocast (--mixed_precision fast); default: on a GPU "
                             "with bf16 or a CPU with AMX, where bf16 is fast")
    return parser


def main() -> None:
    opts = build_parser().parse_args()
    if opts.bf16 is None:
        opts.bf16 = resolve_precision("fast") == "bf16"
    torch.set_num_threads(opts.threads)
    torch.manual_seed(0)
    device = torch.device(opts.device)
    block = 128

    text, docs = load_pretrain_corpus(os.path.join(opts.data_dir, "wiki.txt"))
    tok = CharTokenizer.from_corpus(text)
    corrupt, corruption = span_corruption_dataset(docs, tok, block, seed=0)
    names = name_prompt_dataset(load_qa_tsv(os.path.join(opts.data_dir, "birth_places_train.tsv"), block), tok, block)
    n_batches = opts.steps + 1
    kinds = {}
    for kind, ds in (("span corruption (wiki.txt)", corrupt), ("name prompts (finetune TSV)", names)):
        examples = [ds[i % len(ds)] for i in range(n_batches * opts.batch_size)]
        chunks = [examples[i * opts.batch_size : (i + 1) * opts.batch_size] for i in range(n_batches)]
        padded = [pad_collate(c) for c in chunks]
        packed = [PackedCollator(block)(c) for c in chunks]
        useful = statistics.mean(int((b["labels"][:, 1:] != IGNORE_INDEX).sum()) for b in padded)
        pad_frac = statistics.mean(float((b["input_ids"] == 0).float().mean()) for b in padded)
        packed_rows = statistics.mean(b["input_ids"].shape[0] for b in packed)
        kinds[kind] = (padded, packed, useful, pad_frac, packed_rows)

    def to_dev(batch):
        return {k: v.to(device) for k, v in batch.items()}

    cfg = CharGPTConfig(vocab_size=tok.vocab_size, block_size=block)
    hardware = (f"{platform.processor() or platform.machine()} {str(device).upper()}, {opts.threads} threads, torch "
                f"{torch.__version__}" + (", bf16 autocast" if opts.bf16 else ""))
    records = []  # experiments/records.py's shape, so docs_tables.py renders them as they are
    for kind, (padded, packed, useful, pad_frac, packed_rows) in kinds.items():
        torch.manual_seed(0)
        ref = ReferenceGPT(tok.vocab_size, block).to(device)
        ref_step = make_step(ref, lambda m, b: m(b["input_ids"][:, :-1], b["input_ids"][:, 1:]))
        ours = CharGPTForCausalLM(cfg).to(device)
        our_step = make_step(ours, lambda m, b: m(**b).loss)
        variants = [
            ("(a) reference minGPT, padded", ref_step, [to_dev(b) for b in padded]),
            ("(b) chargpt, padded", our_step, [to_dev(b) for b in padded]),
            ("(c) chargpt, packed", our_step, [to_dev(b) for b in packed]),
        ]
        if opts.bf16:
            torch.manual_seed(0)
            ours_bf16 = CharGPTForCausalLM(cfg).to(device)
            variants.append(("(d) chargpt, packed, bf16", make_step(ours_bf16, lambda m, b: m(**b).loss, bf16=True),
                             [to_dev(b) for b in packed]))
        base = None
        for name, step, batches in variants:
            times = time_steps(step, batches, opts.steps)
            med = statistics.median(times)
            base = base or med
            facts = {"batches": kind, "median_step_s": round(med, 4), "useful_tokens_per_s": round(useful / med),
                     "speedup_vs_a": round(base / med, 2), "pad_fraction_padded": round(pad_frac, 3),
                     "packed_rows": round(packed_rows, 1), "batch_size": opts.batch_size}
            records.append({"name": f"{kind}: {name}", "recipe": "experiments/benchmarks/bench_train.py", "flags": "",
                            "variant": name, "seeds": [0], "hardware": hardware, "scores": {}, "seconds": {},
                            "command": shlex.join(["python", *sys.argv]), "date": date.today().isoformat(),
                            "facts": facts})
            print(f"{kind:<28} {name:<32} {med:7.3f} s/step  {useful / med:9.0f} useful tok/s  "
                  f"x{base / med:4.2f}", flush=True)
    print(f"\n{opts.device}, {opts.threads} threads, torch {torch.__version__}; PAD fraction of padded batches: "
          + ", ".join(f"{k} {v[3]:.1%}" for k, v in kinds.items()))
    if opts.json:
        atomic_write_text(Path(opts.json), json.dumps({"what": WHAT, "records": records}, indent=2) + "\n")


if __name__ == "__main__":
    from chargpt.training.cli import run_cli  # bad input (a missing data file) as one line

    sys.exit(run_cli(lambda _argv: main()))

"""Data speed: the `datasets` path (a DataLoader over the span-corruption transform, collated as the training loop
does) vs the on-device path (`data_scripts.device_batches`), padded and packed, in one process and run.

    python experiments/benchmarks/bench_data.py --data_dir ../shared/data [--seconds 5] [--threads 2] [--json out.json]

Both build the pretraining batches of wiki.txt (batch 128, block 128, the reference order) epoch after epoch for
about ``--seconds`` each; reported are batches/s, examples/s and the ratio of the on-device path to the
`datasets` path with the same layout. On a GPU (``--device cuda``) the on-device path's time includes a
synchronisation after the last batch, and the `datasets` path's the copy of each batch to the device.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from chargpt.training.cli import run_cli
from chargpt.training.files import atomic_write_json
from chargpt.training.loop import CountingCollate
from data_scripts import DeviceBatches, EncodedExamples, PackedCollator, load_pretrain_corpus, pad_collate
from data_scripts import span_corruption_dataset as corruption_dataset
from modeling_chargpt import CharTokenizer


def cpu_name(cpuinfo: str | None = None) -> str:
    """The CPU's model name with its family, model and matrix units (from /proc/cpuinfo where there is one): a
    name alone ("AMD EPYC") spans CPUs whose speeds differ twofold, and timings are only compared on one CPU."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if not key.strip():
            break  # the first processor is enough
        fields.setdefault(key.strip(), value.strip())
    if "model name" not in fields:
        return platform.processor() or platform.machine()
    flags = set(fields.get("flags", "").split())
    units = ("AMX" if "amx_tile" in flags else "AVX-512 with avx512_bf16, no AMX" if "avx512_bf16" in flags
             else "AVX-512, no AMX" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags else "no AVX2")
    where = f"family {fields['cpu family']} model {fields['model']}; " if "cpu family" in fields else ""
    return f"{fields['model name']} ({where}{units})"


def rate(batches: Iterator[dict], seconds: float, sync: Callable[[], None]) -> tuple[float, float, int]:
    """Batches/s and examples/s over at least ``seconds`` (and at least 3 batches), after one warm-up batch."""
    next(batches)
    sync()
    n_batches = n_examples = 0
    start = time.perf_counter()
    while n_batches < 3 or time.perf_counter() - start < seconds:
        n_examples += int(next(batches)["num_examples"])
        n_batches += 1
    sync()
    elapsed = time.perf_counter() - start
    return n_batches / elapsed, n_examples / elapsed, n_batches


def datasets_batches(docs, tok, block: int, batch_size: int, collate, device: torch.device) -> Iterator[dict]:
    """The training loop's data: the transform re-drawn every epoch, a DataLoader, each batch moved to the device."""
    dataset, corruption = corruption_dataset(docs, tok, block, seed=0)
    loader = DataLoader(dataset, batch_size=batch_size, collate_fn=CountingCollate(collate))
    epoch = 0
    while True:
        corruption.set_epoch(epoch)
        for batch in loader:
            yield {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        epoch += 1


def device_batches(batches: DeviceBatches) -> Iterator[dict]:
    step = 0
    while True:
        yield batches(step)
        step += 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per path and layout")
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--block_size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", default=None, help="write the results here (atomically)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    torch.set_num_threads(opts.threads)
    device = torch.device(opts.device)
    block, batch_size = opts.block_size, opts.batch_size

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    text, docs = load_pretrain_corpus(os.path.join(opts.data_dir, "wiki.txt"))
    tok = CharTokenizer.from_corpus(text)
    start = time.perf_counter()
    examples = EncodedExamples(tok, block, documents=docs["text"], device=device)
    packed = DeviceBatches(examples, batch_size, packing=True)
    setup_s = time.perf_counter() - start
    results = {"device": str(device), "cpu": cpu_name(), "threads": opts.threads, "torch": torch.__version__,
               "batch_size": batch_size, "block_size": block, "documents": len(docs), "packed_rows": packed.rows,
               "fast_setup_s": round(setup_s, 3), "rows": []}
    print(f"{cpu_name()}, {opts.threads} threads, {device}; on-device setup (encode + estimate {packed.rows} packed "
          f"rows) {setup_s:.2f} s", flush=True)
    layouts = [
        ("padded", pad_collate, DeviceBatches(examples, batch_size, packing=False)),
        ("packed", PackedCollator(block, pad_token_id=tok.pad_token_id), packed),
    ]
    for layout, collate, fast in layouts:
        slow_rate = rate(datasets_batches(docs, tok, block, batch_size, collate, device), opts.seconds, sync)
        fast_rate = rate(device_batches(fast), opts.seconds, sync)
        for path, (batches_s, examples_s, n) in (("datasets", slow_rate), ("on-device", fast_rate)):
            row = {"layout": layout, "path": path, "batches_per_s": round(batches_s, 2),
                   "examples_per_s": round(examples_s, 1), "batches_timed": n,
                   "speedup_vs_datasets": round(examples_s / slow_rate[1], 2)}
            results["rows"].append(row)
            print(f"{layout:<7} {path:<10} {batches_s:9.2f} batches/s {examples_s:11.1f} examples/s "
                  f"x{row['speedup_vs_datasets']:.2f}  ({n} batches)", flush=True)
    if opts.json:
        atomic_write_json(opts.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))

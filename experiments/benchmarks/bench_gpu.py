"""Training speed on one device: today's loop vs the fast path, in one process, through `train_pretrain.main`.

    python experiments/benchmarks/bench_gpu.py --data_dir ../shared/data --steps 300 --out results/bench_gpu_h100.json \
        [--variants today,fast,fast_compiled] [--variant 'NAME=FLAGS'] [--position_embedding_type rope]

Each variant is a real pretraining run (`train_pretrain.main` with an argv: the product, not a re-implementation)
of the faithful configuration (4 layers, 8 heads, 256 dims, batch 128, lr 6e-3, fp32, the 650-epoch schedule)
on wiki.txt, stopped after --steps optimizer steps; `--variants` picks named flag sets (below), `--variant
NAME=FLAGS` adds one of your own, `--extra` goes to every variant (e.g. a tiny shape for a test).

Timed: the steps between the first loss read-back at or after --warmup_steps and the read-back at the last step.
A read-back waits for the device, so that window holds whole steps however much work is queued (compilation and
CUDA-graph capture fall before it). Reported per variant: steps/s, useful (non-PAD target) tokens/s, GPU
utilisation (NVML, sampled in a thread every 0.1 s in the window; null on a CPU), peak GPU memory (null on a CPU),
the mean and spread of the loss over the last tenth of the steps (the paths draw different corruptions, so losses
agree within that noise, not exactly), and the projected time of the whole pretraining (650 epochs): the time
before the window plus the remaining steps at the measured rate. The useful tokens are counted on the device as
each batch enters the loop (one small reduction per step, in every variant alike). A variant with `--seeds` trains
several models per step: its useful tokens are all of theirs, its loss is the first member's, its projection covers
all of them, and `experiments/benchmarks/choose_fast_flags.py` reads the results to pick the flags a GPU session
trains with.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import math
import shlex
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import date
from pathlib import Path
from unittest import mock

import torch

import train_pretrain
from chargpt.training import loop
from chargpt.training.batching import WatchedBatches
from chargpt.training.cli import UsageError, check_flags, parse_args, run_cli
from chargpt.training.files import atomic_write_json
from chargpt.training.hardware import cpu_name
from chargpt.training.syncing import LossWindow
from data_scripts import load_pretrain_corpus
from modeling_chargpt import IGNORE_INDEX

logger = logging.getLogger("bench_gpu")

# Named variants: (what it is, flags for train_pretrain.py). A variant whose flags train_pretrain.py does not take
# yet is skipped with the reason, so new flags plug in by adding a line here.
COMPILED = ["--device_data", "True", "--torch_compile", "True", "--torch_compile_mode", "reduce-overhead"]
COMPILED_ALL = [*COMPILED, "--optim", "adamw_torch_fused", "--torch_compile_batches", "True"]  # fast_compiled_all's
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "today": ("today's loop: datasets path, a loss read back every step", ["--sync_steps", "1"]),
    "fast": ("fast path: batches built on the device, losses read back every --logging_steps on a GPU",
             ["--device_data", "True"]),
    "fast_compiled": ("fast path + torch.compile(mode='reduce-overhead')",
                      COMPILED),
    "fast_fused": ("fast path + fused AdamW", ["--device_data", "True", "--optim", "adamw_torch_fused"]),
    "fast_compiled_capturable": (
        "fast path + torch.compile(mode='reduce-overhead') + capturable AdamW",
        [*COMPILED, "--optim", "adamw_torch_capturable"]),
    "fast_compiled_fused": (
        "fast path + torch.compile(mode='reduce-overhead') + fused AdamW",
        [*COMPILED, "--optim", "adamw_torch_fused"]),
    "fast_compiled_all": (
        "fast path + torch.compile(mode='reduce-overhead') + fused AdamW + compiled packing",
        COMPILED_ALL),
    "fast_compiled_all_tf32": (
        "fast_compiled_all + TF32 matmuls (compiled, the GPU is busy: matmul speed may count; compare its loss)",
        [*COMPILED_ALL, "--tf32", "True"]),
    "fast_compiled_all_rows80": (
        "fast_compiled_all with 80 packed rows per step, not the estimated 86 (about 64 hold examples; 79 is the "
        "most seen in 20,000 batches): what the empty rows cost a compiled step",
        [*COMPILED_ALL, "--packed_rows", "80"]),
    "fast_compiled_all_seeds3": (
        "fast_compiled_all training seeds 0, 1, 2 in one process, one model after another (--seeds)",
        [*COMPILED_ALL, "--seeds", "0,1,2"]),
    "fast_compiled_all_stacked3": (
        "fast_compiled_all training seeds 0, 1, 2 as one stacked model (--seeds --stack_seeds True)",
        [*COMPILED_ALL, "--seeds", "0,1,2", "--stack_seeds", "True"]),
    "fast_tf32": ("fast path + TF32 matmuls (changes the numerics: compare its loss)",
                  ["--device_data", "True", "--tf32", "True"]),
}
# Process-wide float32 matmul settings (torch's current API) a variant such as --tf32 may change: put back after
# each variant, so it cannot leak into the next one.
_FP32_SETTINGS = ("backends", "backends.cuda.matmul", "backends.cudnn", "backends.cudnn.conv", "backends.cudnn.rnn")


def build_parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {name:<26} {what}: {shlex.join(flags)}" for name, (what, flags) in VARIANTS.items())
    parser = argparse.ArgumentParser(description=__doc__, epilog="variants:\n" + listing,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"),
                        help="folder with wiki.txt")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per variant")
    parser.add_argument("--warmup_steps", type=int, default=50,
                        help="steps before the timed window (allocator, compilation, CUDA-graph capture)")
    parser.add_argument("--variants", default="today,fast", help="comma-separated names (listed below), in order")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=FLAGS",
                        help="one more variant: a name and train_pretrain.py flags, e.g. "
                        "'workers=--dataloader_num_workers 2' (repeatable)")
    parser.add_argument("--position_embedding_type", default="rope", choices=["learned", "rope"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--extra", default="", help="flags for every variant (quoted), e.g. a smaller shape")
    parser.add_argument("--out", default=None, help="write the results JSON here (atomically, after each variant)")
    parser.add_argument("--work_dir", default=None,
                        help="keep each variant's model here (default: a temporary folder, removed at the end)")
    return parser


def chosen_variants(opts: argparse.Namespace) -> tuple[list[tuple[str, str, list[str]]], list[dict]]:
    """The variants to run as (name, description, flags), and the named ones skipped because train_pretrain.py does
    not take their flags yet. Unknown names, malformed or unparsable --variant flags and --extra are usage errors."""
    runs, skipped = [], []
    for name in [n.strip() for n in opts.variants.split(",") if n.strip()]:
        if name not in VARIANTS:
            raise UsageError(f"--variants: unknown variant {name!r}; known: {', '.join(VARIANTS)}")
        what, flags = VARIANTS[name]
        runs.append((name, what, flags))
    for spec in opts.variant:
        name, sep, flags = spec.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--variant {spec!r}: expected NAME=FLAGS")
        runs.append((name.strip(), "given on the command line", shlex.split(flags)))
    names = [name for name, _, _ in runs]
    if not runs or len(set(names)) != len(names):
        raise UsageError(f"--variants/--variant: give at least one variant, each name once (got {names})")
    check_flags(train_pretrain.build_parser(), [*_required("wiki.txt", "out"), *shlex.split(opts.extra)],
                "pretrain", "--extra")
    usable = []
    for name, what, flags in runs:
        try:
            check_flags(train_pretrain.build_parser(), [*_required("wiki.txt", "out"), *flags], "pretrain",
                        f"variant {name}")
        except UsageError as err:
            if name not in VARIANTS:  # the user's own flags: a typo is an error, not a silent skip
                raise
            skipped.append({"variant": name, "flags": flags, "reason": str(err)})
            continue
        usable.append((name, what, flags))
    return usable, skipped


def _required(wiki: str | Path, output_dir: str | Path) -> list[str]:
    return ["--pretrain_corpus_path", str(wiki), "--output_dir", str(output_dir)]


class StepClock:
    """What the loop does, recorded without changing it: the time of each loss read-back (a host sync, so every
    step before it has finished), each step's useful targets, counted on the device, and the rows it computes (a
    shape, known on the host: with the step's FLOPs per row, chargpt/training/flops.py, its arithmetic rate)."""

    def __init__(self) -> None:
        self.read_backs: list[tuple[int, float]] = []  # (step whose forward pass was just read back, time)
        self.useful: list[torch.Tensor] = []  # non-PAD targets of step i + 1, on the device
        self.rows: list[int] = []  # rows of step i + 1's batches, every member's

    @contextmanager
    def watching(self) -> Iterator[None]:
        read_back, prepare = LossWindow.read_back, loop._prepare

        def timed_read_back(window: LossWindow, next_update: int) -> None:
            read_back(window, next_update)
            self.read_backs.append((next_update, time.perf_counter()))

        def count(epoch: int, batch: dict) -> None:
            members = batch.get("batches", [batch])  # --seeds: every member's batch of this step
            self.useful.append(sum((b["labels"][:, 1:] != IGNORE_INDEX).sum() for b in members))  # shifted
            self.rows.append(sum(b["input_ids"].shape[0] for b in members))

        def counted_prepare(*args, **kwargs):
            model, optimizer, batches = prepare(*args, **kwargs)
            return model, optimizer, WatchedBatches(batches, count)

        with mock.patch.object(LossWindow, "read_back", timed_read_back), \
                mock.patch.object(loop, "_prepare", counted_prepare):
            yield


class UtilisationSampler:
    """GPU utilisation as NVML reports it (the share of the last sample period in which a kernel ran), sampled in a
    thread; nothing on a CPU or without NVML (pynvml, from nvidia-ml-py)."""

    def __init__(self, device: torch.device, interval: float = 0.1) -> None:
        self.device, self.interval = device, interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.unavailable = None if device.type == "cuda" else "not a CUDA device"
        if self.unavailable is None:
            try:
                torch.cuda.utilization(device)
            except Exception as err:  # pynvml missing, or NVML refused: measure the rest anyway
                self.unavailable = f"{type(err).__name__}: {err}"

    def __enter__(self) -> UtilisationSampler:
        if self.unavailable is None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.samples.append((time.perf_counter(), torch.cuda.utilization(self.device)))
            except Exception as err:  # NVML failing mid-run: keep what was sampled, say why it stopped
                self.unavailable = f"sampling stopped: {type(err).__name__}: {err}"
                return

    def mean(self, start: float, end: float) -> tuple[float | None, int]:
        """Mean utilisation (%) of the samples taken between `start` and `end`, and how many there were."""
        inside = [value for t, value in self.samples if start <= t <= end]
        return (round(statistics.mean(inside), 1) if inside else None), len(inside)


def _fp32_settings() -> dict[str, str]:
    out = {}
    for path in _FP32_SETTINGS:
        obj = torch
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if obj is not None and hasattr(obj, "fp32_precision"):
            out[path] = obj.fp32_precision
    return out


@contextmanager
def restoring_fp32_settings() -> Iterator[None]:
    """Put back the float32 matmul/conv precision settings a variant changed (e.g. --tf32 True)."""
    before = _fp32_settings()
    try:
        yield
    finally:
        for path, value in before.items():
            if _fp32_settings().get(path) != value:
                obj = torch
                for part in path.split("."):
                    obj = getattr(obj, part)
                obj.fp32_precision = value


def run_variant(name: str, what: str, flags: list[str], opts: argparse.Namespace, work_dir: Path,
                full_steps: int, device: torch.device) -> dict:
    """One pretraining run through `train_pretrain.main`, and what it measured."""
    output_dir = work_dir / name
    argv = [*_required(Path(opts.data_dir) / "wiki.txt", output_dir), "--max_steps", str(opts.steps),
            "--position_embedding_type", opts.position_embedding_type, "--seed", str(opts.seed),
            "--report_to", "none", "--checkpointing_steps", "0", "--disable_tqdm", "True",
            *shlex.split(opts.extra), *flags]
    torch._dynamo.reset()  # no compiled code or guards carried over from the variant before
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    clock = StepClock()
    print(f"\n== {name}: {what}\n   train_pretrain.py {shlex.join(argv)}", flush=True)
    with ExitStack() as stack:
        stack.enter_context(restoring_fp32_settings())
        stack.enter_context(clock.watching())
        sampler = stack.enter_context(UtilisationSampler(device))
        start = time.perf_counter()
        status = train_pretrain.main(argv)
        wall = time.perf_counter() - start
    if status:
        raise RuntimeError(f"variant {name}: train_pretrain.py ended with status {status}")
    found = [output_dir / "train_results.json"] if (output_dir / "train_results.json").exists() else sorted(
        output_dir.glob("seed-*/train_results.json"))  # --seeds: one folder per member
    members = [json.loads(path.read_text()) for path in found]
    points = [(step, t) for step, t in clock.read_backs if step <= opts.steps]
    first = next(((step, t) for step, t in points if step >= opts.warmup_steps), None)
    last = points[-1] if points else None
    if first is None or last is None or last[0] != opts.steps or first[0] >= last[0]:
        raise UsageError(f"variant {name}: no loss read-back between --warmup_steps {opts.warmup_steps} and "
                         f"--steps {opts.steps} (read back at {[s for s, _ in points][-5:]}); give more --steps")
    steps, seconds = last[0] - first[0], last[1] - first[1]
    useful = torch.stack(clock.useful).tolist() if clock.useful else []
    # Between the read-backs (each after a forward pass): steps first+1 .. last, i.e. batches first .. last-1.
    useful_timed = sum(useful[first[0]:last[0]])
    rows_timed = clock.rows[first[0]:last[0]]
    losses = [loss for _, loss in members[0]["losses"]]  # the first member's (--seed's, or the first of --seeds)
    tail = losses[-max(1, len(losses) // 10):]
    utilisation, samples = sampler.mean(first[1], last[1])
    rate = steps / seconds
    row = {
        "variant": name, "what": what, "flags": shlex.join(flags),
        "steps_timed": steps, "seconds_timed": round(seconds, 3), "read_backs_timed": sum(
            1 for step, _ in points if first[0] < step <= last[0]),
        "steps_per_s": round(rate, 2), "useful_tokens_timed": useful_timed,
        "useful_tokens_per_s": round(useful_timed / seconds),
        "rows_per_step_mean": round(statistics.mean(rows_timed), 2),
        "gpu_utilization_percent": utilisation, "gpu_utilization_samples": samples,
        "gpu_utilization_note": sampler.unavailable,
        "peak_memory_mib": round(torch.cuda.max_memory_allocated(device) / 2**20) if device.type == "cuda" else None,
        "members": len(members), "final_loss": members[0]["final_loss"],
        "loss_tail_mean": round(statistics.mean(tail), 4),
        "loss_tail_std": round(statistics.pstdev(tail), 4), "loss_tail_steps": len(tail),
        "wall_seconds": round(wall, 1), "seconds_before_window": round(first[1] - start, 1),
        "projected_full_pretraining_s": round(first[1] - start + (full_steps - first[0]) / rate, 1),
        "train_pretrain_argv": shlex.join(argv),
    }
    print(f"   {rate:.2f} steps/s, {row['useful_tokens_per_s']:,} useful tokens/s, loss {row['loss_tail_mean']:.4f}"
          f" ± {row['loss_tail_std']:.4f} (last {len(tail)} steps)", flush=True)
    return row


def table(rows: list[dict]) -> str:
    """The results as a Markdown table, the first variant as the yardstick. A `--seeds` variant trains several models
    per step: "vs first" compares model-steps per second, its projection is for all of them."""
    if not rows:
        return "(no variant finished)"
    lines = ["| variant | steps/s | useful tokens/s | vs first (per model) | GPU util. | peak memory | "
             "loss (last tenth) | full pretraining (projected) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    first = model_steps_per_s(rows[0])
    for row in rows:
        util = "-" if row["gpu_utilization_percent"] is None else f"{row['gpu_utilization_percent']:.0f}%"
        memory = "-" if row["peak_memory_mib"] is None else f"{row['peak_memory_mib']:,} MiB"
        models = row.get("members", 1)
        name = row["variant"] + (f" ({models} models)" if models > 1 else "")
        lines.append(f"| {name} | {row['steps_per_s']:.2f} | {row['useful_tokens_per_s']:,} | "
                     f"×{model_steps_per_s(row) / first:.2f} | {util} | {memory} | "
                     f"{row['loss_tail_mean']:.4f} ± {row['loss_tail_std']:.4f} | "
                     f"{row['projected_full_pretraining_s']:,.0f} s |")
    return "\n".join(lines)


def model_steps_per_s(row: dict) -> float:
    """Optimizer steps per second times the models each step trains (rows written before `members` trained one)."""
    return row["steps_per_s"] * row.get("members", 1)


WHAT = "experiments/benchmarks/bench_gpu.py: steps per second of pretraining variants on one device, one record each"


def study(call: dict, rows: list[dict], day: str) -> dict:
    """One device call as a study of run records (experiments/records.py's shape, built here: a benchmark cannot
    import experiments/ without a path edit): a record per variant named 'call 1: VARIANT', the call's settings and
    the row's measurements in its facts; the skipped and failed variants are the study's notes."""
    elsewhere = ("command", "position_embedding_type", "skipped", "failed")
    settings = {key: value for key, value in call.items() if key not in elsewhere}
    records = []
    for row in rows:
        facts = {key: value for key, value in row.items() if key not in ("variant", "flags", "seconds_timed")}
        records.append({
            "name": f"call 1: {row['variant']}", "recipe": "experiments/benchmarks/bench_gpu.py", "flags": row["flags"],
            "variant": call["position_embedding_type"], "seeds": [call["seed"]], "hardware": call["device"],
            "scores": {}, "seconds": {"timed": row["seconds_timed"]}, "command": call["command"], "date": day,
            "facts": {"call": 1, "bench_variant": row["variant"], **settings, **facts}})
    return {"what": WHAT, "skipped": call.get("skipped", []), "failed": call.get("failed", []), "records": records}


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    opts = build_parser().parse_args(argv)
    if opts.warmup_steps < 0 or opts.steps <= opts.warmup_steps:
        raise UsageError(f"--steps ({opts.steps}) must exceed --warmup_steps ({opts.warmup_steps})")
    wiki = Path(opts.data_dir) / "wiki.txt"
    variants, skipped = chosen_variants(opts)
    for skip in skipped:
        print(f"skipped {skip['variant']}: {skip['reason']}", flush=True)
    _, docs = load_pretrain_corpus(wiki)
    # The full run each variant projects to: the schedule the argv resolves to (the reference's 650 epochs).
    _, _, args = parse_args(train_pretrain.build_parser(), [*_required(wiki, "out"), *shlex.split(opts.extra)],
                            stage="pretrain")
    steps_per_epoch = math.ceil(len(docs) / args.per_device_train_batch_size)
    full_steps = args.num_train_epochs * steps_per_epoch
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    results = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name(),
        "device_type": device.type, "torch": torch.__version__, "cuda": torch.version.cuda,
        "transformers": _version("transformers"), "accelerate": _version("accelerate"),
        "command": shlex.join(["python", "experiments/benchmarks/bench_gpu.py", *argv]), "data": str(wiki),
        "documents": len(docs), "position_embedding_type": opts.position_embedding_type, "seed": opts.seed,
        "steps": opts.steps, "warmup_steps": opts.warmup_steps, "batch_size": args.per_device_train_batch_size,
        "epochs": args.num_train_epochs, "steps_per_epoch": steps_per_epoch, "full_pretraining_steps": full_steps,
    }
    rows: list[dict] = []
    failed: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench_gpu-") as tmp:
        work_dir = Path(opts.work_dir or tmp)
        for name, what, flags in variants:
            try:
                rows.append(run_variant(name, what, flags, opts, work_dir, full_steps, device))
            except Exception as err:  # one variant failing (say, compilation) leaves the others to measure
                logger.exception("variant %s failed", name)
                failed.append({"variant": name, "flags": shlex.join(flags), "error": f"{type(err).__name__}: {err}"})
            if opts.out:
                atomic_write_json(opts.out, study({**results, "skipped": skipped, "failed": failed}, rows,
                                                  date.today().isoformat()))
    print(f"\n{results['device']}, torch {results['torch']}; {opts.steps} steps per variant "
          f"({opts.position_embedding_type}), timed after step {opts.warmup_steps}; projected: {full_steps:,} steps "
          f"({args.num_train_epochs} epochs × {steps_per_epoch})\n\n{table(rows)}")
    for failure in failed:
        print(f"FAILED {failure['variant']}: {failure['error']}")
    if opts.out:
        print(f"\nresults in {opts.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))

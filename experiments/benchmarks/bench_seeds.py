"""`--seeds`: N seeds pretrained in one process against N separate runs, on whatever device this machine trains on.

    python experiments/benchmarks/bench_seeds.py --data_dir DIR --seeds 0,1,2 --steps 300  # the reference model
    python experiments/benchmarks/bench_seeds.py --data_dir DIR --seeds 0,1 --steps 100 \\
        --flags "--n_layer 2 --n_embd 128 --per_device_train_batch_size 32"              # tiny-ish, for a CPU

Each run is `train_pretrain.main` in this process with `--device_data True --max_steps STEPS`, no checkpoints, no
trackers: first the separate `--seed S` runs, then the `--seeds` run (`--repeats` alternates the pair again);
`--concurrent` then launches the separate runs at once, one `train_pretrain.py` process each (a small model leaves a
GPU idle between one process's launches, which the others can fill); each `--stacked FLAGS` then runs the seeds as
one stacked model (`--seeds ... --stack_seeds True` plus FLAGS, e.g. "" and "--torch_compile True"): the members are
their separate runs in distribution only (dropout masks drawn together), so their weight difference is reported, not
required to be 0.
Reports the wall time of each (what a user waits: data, model, training, saving) and its training seconds
(`train_results.json`), and how far each member's final weights are from its separate run's (0.0: bit for bit).
Bit for bit needs kernels that are: on a CPU with more than one thread the learned position embedding's gradient (an
index backward that accumulates) is not, even between two separate runs of one seed; on a GPU atomics make several
backward kernels vary. Use `--threads 1` on a CPU to check the members exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import torch
from bench_data import cpu_name  # its sibling: a script's own folder is on sys.path when it runs
from safetensors.torch import load_file

import train_pretrain
from chargpt.training import atomic_write_json, run_cli

WHAT = ("seeds trained three ways: separate runs in a row, one --seeds process (members in turn), stacked "
        "(--stack_seeds True); wall seconds, and how far each way's members are from the separate runs")

ROOT = Path(__file__).resolve().parents[2]


def pretrain_argv(wiki: Path, out: Path, steps: int, flags: list[str], seed_flags: list[str]) -> list[str]:
    return ["--pretrain_corpus_path", str(wiki), "--output_dir", str(out), "--device_data", "True", "--max_steps",
            str(steps), "--checkpointing_steps", "0", "--report_to", "none", "--disable_tqdm", "True", *flags,
            *seed_flags]


def train_seconds(out: Path) -> float:
    return json.loads(next(out.glob("**/train_results.json")).read_text())["train_seconds"]  # members: the run's


class RunFailed(Exception):
    """A pretraining that ended with an error (its message is on stderr above)."""


def pretrain(wiki: Path, out: Path, steps: int, flags: list[str], seed_flags: list[str]) -> dict:
    """One quiet pretraining; its wall and training seconds."""
    argv = pretrain_argv(wiki, out, steps, flags, seed_flags)
    start = time.perf_counter()
    if run_cli(train_pretrain.main, argv) != 0:
        raise RunFailed(f"train_pretrain.py {shlex.join(argv)} failed")
    return {"wall_seconds": round(time.perf_counter() - start, 2), "train_seconds": train_seconds(out)}


def pretrain_concurrently(wiki: Path, root: Path, steps: int, flags: list[str], seeds: list[int],
                          threads: int | None) -> dict:
    """The separate runs launched at once, one `train_pretrain.py` process per seed: where one host thread cannot
    keep the GPU busy, the processes' launches interleave. Their wall time together and each one's training time."""
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    start = time.perf_counter()
    runs = [(root / f"seed{s}", subprocess.Popen(
        [sys.executable, str(ROOT / "train_pretrain.py"), *pretrain_argv(wiki, root / f"seed{s}", steps, flags,
                                                                         ["--seed", str(s)])],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)) for s in seeds]
    for out, process in runs:
        _, err = process.communicate()
        if process.returncode != 0:
            sys.exit(f"error: the concurrent run into {out} failed: {(err.strip().splitlines() or ['no output'])[-1]}")
    return {"wall_seconds": round(time.perf_counter() - start, 2),
            "train_seconds": [train_seconds(out) for out, _ in runs]}


def weight_distance(a: Path, b: Path) -> float:
    """The largest absolute difference between two saved models' weights (0.0: bit for bit)."""
    x, y = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    if x.keys() != y.keys():
        sys.exit(f"error: {a} and {b} hold different tensors")
    return max(float((x[k].double() - y[k].double()).abs().max()) for k in x)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", required=True, help="Folder with wiki.txt.")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--flags", default="", help="More train_pretrain.py flags (quoted), e.g. a smaller shape.")
    parser.add_argument("--repeats", type=int, default=1, help="Times to run the separate runs and the --seeds run.")
    parser.add_argument("--threads", type=int, default=None, help="torch threads on a CPU (default: torch's).")
    parser.add_argument("--concurrent", action="store_true",
                        help="Also launch the separate runs at once, one process per seed, and time them together.")
    parser.add_argument("--stacked", action="append", default=[], metavar="FLAGS",
                        help="Also run the seeds stacked (--stack_seeds True) with these extra flags (quoted; '' for "
                        "none); repeat for several stacked runs. One that fails (say, to compile) is recorded with "
                        "its error and the others still run.")
    parser.add_argument("--json", default=None, help="Also write the figures to this JSON file.")
    return parser


def main() -> None:
    opts = build_parser().parse_args()
    wiki = Path(opts.data_dir) / "wiki.txt"
    if not wiki.is_file():
        sys.exit(f"error: {wiki}: file not found")
    if opts.threads:
        torch.set_num_threads(opts.threads)
    seeds, flags = [int(s) for s in opts.seeds.split(",")], shlex.split(opts.flags)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else cpu_name()
    rounds: list[dict] = []
    summary = {"command": shlex.join(["python", *sys.argv]), "device": device, "threads": torch.get_num_threads(),
               "cpu_count": os.cpu_count(), "torch": torch.__version__, "steps": opts.steps, "seeds": seeds,
               "flags": opts.flags, "rounds": rounds}

    def write() -> None:
        """After every measurement (atomically), so a run stopped by a time limit keeps what it measured."""
        if opts.json:
            atomic_write_json(opts.json, {"what": WHAT, "records": records_of(summary, date.today().isoformat())})

    try:
        measure(opts, wiki, seeds, flags, rounds, write)
    except RunFailed as err:
        sys.exit(f"error: {err}")


def records_of(summary: dict, day: str | None) -> list[dict]:
    """The rounds as run records (experiments/records.py's shape): each separate run, the --seeds run, the concurrent
    processes and each stacked run; facts say which way and round, and how far the members are from the separate
    runs."""
    hardware = f"{summary['device']}, torch {summary['torch']}, {summary['threads']} threads"
    records = []

    def add(name: str, way: str, seeds: list[int], run: dict, r: int, extra: str = "") -> None:
        facts = {"way": way, "round": r, "steps": summary["steps"],
                 **{k: v for k, v in run.items() if k not in ("wall_seconds", "train_seconds", "flags")}}
        if isinstance(run.get("train_seconds"), list):  # the concurrent processes' own training times
            facts["train_seconds"] = run["train_seconds"]
        seconds = {k.removesuffix("_seconds"): run[k] for k in ("wall_seconds", "train_seconds")
                   if isinstance(run.get(k), int | float)}
        records.append({"name": name, "recipe": "experiments/benchmarks/bench_seeds.py",
                        "flags": " ".join(filter(None, [summary["flags"], extra])), "variant": "", "seeds": seeds,
                        "hardware": hardware, "scores": {}, "seconds": seconds, "command": summary["command"],
                        "date": day, "facts": facts})

    for r, found in enumerate(summary["rounds"]):
        for seed, run in zip(summary["seeds"], found["separate"], strict=True):
            add(f"round {r}: seed {seed} alone", "separate", [seed], run, r)
        add(f"round {r}: --seeds", "together", summary["seeds"],
            {**found["together"], "max_weight_difference": found["max_weight_difference"]}, r)
        if "concurrent" in found:
            add(f"round {r}: concurrent processes", "concurrent", summary["seeds"], found["concurrent"], r)
        for run in found.get("stacked", []):
            add(f"round {r}: stacked {run['flags'] or '(no extra flags)'}", "stacked", summary["seeds"],
                {**{k: v for k, v in run.items() if k != "flags"}, "extra": run["flags"]}, r, run["flags"])
    return records


def measure(opts: argparse.Namespace, wiki: Path, seeds: list[int], flags: list[str], rounds: list[dict],
            write: Callable[[], None]) -> None:
    """Each round's runs, appended to `rounds` and written as they finish."""
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(opts.repeats):
            root = Path(tmp) / f"round{r}"
            separate = [pretrain(wiki, root / f"seed{s}", opts.steps, flags, ["--seed", str(s)]) for s in seeds]
            together = pretrain(wiki, root / "together", opts.steps, flags, ["--seeds", opts.seeds])
            distance = max(weight_distance(root / f"seed{s}", root / "together" / f"seed-{s}") for s in seeds)
            rounds.append({"separate": separate, "together": together, "max_weight_difference": distance})
            write()
            walls = sum(run["wall_seconds"] for run in separate)
            print(f"round {r}: {len(seeds)} separate runs {walls:.1f}s wall "
                  f"({sum(run['train_seconds'] for run in separate):.1f}s training); --seeds {opts.seeds} "
                  f"{together['wall_seconds']:.1f}s wall ({together['train_seconds']:.1f}s training): "
                  f"{walls / together['wall_seconds']:.2f}x; members' largest weight difference from their "
                  f"separate runs: {distance:.3g}",
                  flush=True)
            if opts.concurrent:
                at_once = pretrain_concurrently(wiki, root / "concurrent", opts.steps, flags, seeds, opts.threads)
                at_once["max_weight_difference"] = max(weight_distance(root / f"seed{s}", root / "concurrent" /
                                                                       f"seed{s}") for s in seeds)
                rounds[-1]["concurrent"] = at_once
                write()
                print(f"round {r}: {len(seeds)} concurrent processes {at_once['wall_seconds']:.1f}s wall: "
                      f"{walls / at_once['wall_seconds']:.2f}x the separate runs in a row", flush=True)
            for k, extra in enumerate(opts.stacked):
                out = root / f"stacked{k}"
                try:
                    stacked = pretrain(wiki, out, opts.steps, [*flags, *shlex.split(extra)],
                                       ["--seeds", opts.seeds, "--stack_seeds", "True"])
                except Exception as err:  # recorded: one variant's failure (e.g. to compile) ends no other
                    reason = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
                    rounds[-1].setdefault("stacked", []).append({"flags": extra, "error": reason})
                    write()
                    print(f"round {r}: stacked {extra or '(no extra flags)'} failed: {reason}", flush=True)
                    continue
                stacked["flags"] = extra
                stacked["max_weight_difference"] = max(weight_distance(root / f"seed{s}", out / f"seed-{s}")
                                                       for s in seeds)
                rounds[-1].setdefault("stacked", []).append(stacked)
                print(f"round {r}: stacked {extra or '(no extra flags)'} {stacked['wall_seconds']:.1f}s wall "
                      f"({stacked['train_seconds']:.1f}s training): {walls / stacked['wall_seconds']:.2f}x the "
                      f"separate runs in a row; largest weight difference {stacked['max_weight_difference']:.3g}",
                      flush=True)
                write()


if __name__ == "__main__":
    main()

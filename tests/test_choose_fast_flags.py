"""experiments/benchmarks/choose_fast_flags.py: which flags a GPU session trains with, from its benchmark's rows (made
up here), and experiments/gpu_session.py taking them."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_bench_gpu import session_commands
from test_readme_commands import load

from chargpt.training.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
COMPILED = "--device_data True --torch_compile True --torch_compile_mode reduce-overhead --optim adamw_torch_fused"


def row(variant: str, flags: str, projected: float, loss: float = 2.33, std: float = 0.025, members: int = 1,
        tail: int = 30) -> dict:
    return {"variant": variant, "flags": flags, "projected_full_pretraining_s": projected, "loss_tail_mean": loss,
            "loss_tail_std": std, "loss_tail_steps": tail, "members": members, "steps_per_s": 1.0,
            "seconds_timed": 10.0}


ROWS = [
    row("today", "--sync_steps 1", 330.0, loss=2.32),
    row("fast", "--device_data True", 200.0),
    row("fast_compiled_all", COMPILED, 120.0, loss=2.345),
    row("fast_compiled_all_tf32", f"{COMPILED} --tf32 True", 60.0),  # faster, but not fp32
    row("fast_compiled_all_rows80", f"{COMPILED} --packed_rows 80", 100.0),  # faster, but drops examples
    row("diverged", "--device_data True --optim adamw_torch_capturable", 90.0, loss=2.9),  # fastest, trains worse
    row("fast_compiled_all_seeds3", f"{COMPILED} --seeds 0,1,2", 360.0, members=3),
    row("fast_compiled_all_stacked3", f"{COMPILED} --seeds 0,1,2 --stack_seeds True", 250.0, loss=2.31, members=3),
    row("stacked_short", f"{COMPILED} --seeds 0,1,2 --stack_seeds True", 10.0, members=3, tail=3),  # too few losses
]


CALL = {"device": "NVIDIA H100", "command": "python experiments/benchmarks/bench_gpu.py", "seed": 0,
        "position_embedding_type": "rope", "steps": 300}


def bench_study(rows: list[dict], failed: list[dict] = ()) -> dict:
    """The rows as bench_gpu.py writes them: a study of run records."""
    return load("experiments/benchmarks/bench_gpu.py").study({**CALL, "failed": list(failed)}, rows, "2026-11-28")


@pytest.fixture(scope="module")
def chooser():
    return load("experiments/benchmarks/choose_fast_flags.py")


def test_the_fastest_faithful_row_whose_loss_matches_is_chosen(chooser):
    choice = chooser.choose(bench_study(ROWS))
    assert choice["single"]["variant"] == "fast_compiled_all"  # 2.345 is within 0.025 of the fast path's 2.33
    assert choice["seeds"]["variant"] == "fast_compiled_all_stacked3"
    rejected = choice["rejected"]
    assert set(rejected) == {"today", "fast_compiled_all_tf32", "fast_compiled_all_rows80", "diverged",
                             "stacked_short"}
    assert "--tf32" in rejected["fast_compiled_all_tf32"] and "--packed_rows" in rejected["fast_compiled_all_rows80"]
    assert "not within 0.0250" in rejected["diverged"] and "too few losses" in rejected["stacked_short"]
    # The flags the run sets itself are left out; the rest is what train_pretrain.py gets through --pretrain_extra.
    assert chooser.run_flags(choice["seeds"]) == COMPILED.removeprefix("--device_data True ")
    # With the stacked row gone, one model after another is the three seeds' choice. With no three-seed row allowed
    # (here: it failed), the one-seed choice's flags train the seeds in turn, and the failure is among the reasons.
    assert chooser.choose(bench_study(ROWS[:7]))["seeds"]["variant"] == "fast_compiled_all_seeds3"
    failed = [{"variant": "fast_compiled_all_stacked3", "error": "RuntimeError: CUDA graphs"}]
    choice = chooser.choose(bench_study(ROWS[:3], failed))
    assert choice["seeds"] is choice["single"] and choice["single"]["variant"] == "fast_compiled_all"
    assert choice["seeds_in_turn"]
    assert choice["rejected"]["fast_compiled_all_stacked3"] == "failed: RuntimeError: CUDA graphs"
    assert chooser.run_flags(choice["seeds"]) == chooser.run_flags(ROWS[2])
    assert "the seeds in turn (unmeasured)" in "\n".join(chooser.describe(choice, 3))
    # A diverged row is never chosen, however fast (NaN compares as within any tolerance).
    nan = chooser.choose(bench_study([*ROWS[:3], row("nan", COMPILED, 1.0, loss=float("nan"))]))
    assert nan["single"]["variant"] == "fast_compiled_all" and nan["rejected"]["nan"] == "loss nan"


def test_the_choice_is_explained(chooser, tmp_path, capsys):
    bench = tmp_path / "bench_gpu.json"
    bench.write_text(json.dumps(bench_study(ROWS)))
    assert run_cli(chooser.main, [str(bench)]) == 0
    printed = capsys.readouterr().out
    assert "one seed: fast_compiled_all (120 s projected): --torch_compile True" in printed
    assert "3 seeds: fast_compiled_all_stacked3 (250 s projected)" in printed and "  not diverged: loss" in printed


@pytest.mark.parametrize("content, message", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a bench_gpu.py results file"),
    (json.dumps(bench_study([row("today", "--sync_steps 1", 1.0)])), "no 'fast' row to compare losses with"),
    (json.dumps({"records": [{"flags": "--device_data True", "facts": {"bench_variant": "fast"}}]}), "a row lacks"),
    (json.dumps(bench_study([row("fast", "--device_data True", 1.0, loss=float("nan"))])), "'fast' row's loss is nan"),
])
def test_bad_benchmark_files_are_one_line(chooser, tmp_path, capsys, content, message):
    bench = tmp_path / "bench.json"
    bench.write_text(content)
    assert run_cli(chooser.main, [str(bench)]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and str(bench) in err and len(err.splitlines()) == 1


def test_gpu_session_trains_with_the_chosen_flags_unless_given(tmp_path):
    bench = tmp_path / "bench_gpu.json"
    bench.write_text(json.dumps(bench_study(ROWS)))
    experiments = load("chargpt/recipes/reproduce.py")
    flags = COMPILED.removeprefix("--device_data True ")

    def run(*argv: str):
        [command] = session_commands("reproduce", "--out", str(tmp_path / "out"), "--choose_from", str(bench), *argv)
        return experiments.build_parser().parse_args(command[2:])

    # the script itself, as the device runs it: the choice (its reasons on stderr, for the log), then the command
    proc = subprocess.run([sys.executable, "experiments/gpu_session.py", "commands", "reproduce", "--choose_from",
                           str(bench)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "3 seeds: fast_compiled_all_stacked3 (250 s projected)" in proc.stderr
    reproduce = experiments.build_parser().parse_args(shlex.split(proc.stdout)[3:])
    assert reproduce.pretrain_extra == flags and reproduce.stack_seeds
    experiments.check_all_stage_flags(reproduce)
    assert experiments.pretrain_stage_flags(reproduce)[-len(flags.split()):] == flags.split()
    # Flags given to the session win over the benchmark's (even empty). --repro_args (e.g. a dry run's shortening)
    # keeps the choice, which adds to it.
    reproduce = run("--repro_pretrain", "")
    assert (reproduce.pretrain_extra, reproduce.stack_seeds) == ("", False)
    reproduce = run("--repro_pretrain", "--optim adamw_torch_fused")
    assert (reproduce.pretrain_extra, reproduce.stack_seeds) == ("--optim adamw_torch_fused", False)
    reproduce = run("--repro_args=--pretrain_epochs=1")
    assert (reproduce.pretrain_epochs, reproduce.pretrain_extra, reproduce.stack_seeds) == (1, flags, True)
    # With no three-seed row allowed, the one-seed choice's flags train the seeds in turn, unstacked.
    bench.write_text(json.dumps(bench_study(ROWS[:3])))
    assert (run().pretrain_extra, run().stack_seeds) == (flags, False)
    # No benchmark file, or one that chooses nothing: the defaults (the fast path alone).
    bench.write_text(json.dumps(bench_study([row("today", "--sync_steps 1", 1.0)])))
    assert (run().pretrain_extra, run().stack_seeds) == ("", False)
    bench.unlink()
    assert (run().pretrain_extra, run().stack_seeds) == ("", False)


def test_gpu_session_bench_measures_what_the_choice_needs(tmp_path):
    """`reproduce --bench`'s shorter benchmark keeps the fast path (the loss reference) and a row for one seed and for
    three, so its choice can pick compiled and stacked flags for the reproduction that follows, which reads them from
    the benchmark's own file."""
    bench_cmd, reproduce_cmd = session_commands("reproduce", "--bench", "--out", str(tmp_path / "out"))
    bench = load("experiments/benchmarks/bench_gpu.py")
    opts = bench.build_parser().parse_args(bench_cmd[2:])
    names = opts.variants.split(",")
    assert {"today", "fast"} <= set(names) and all(name in bench.VARIANTS for name in names)
    three = [name for name in names if "0,1,2" in bench.VARIANTS[name][1]]  # the value of --seeds
    one = [name for name in names if name not in three and "--torch_compile" in bench.VARIANTS[name][1]]
    assert three and one  # a compiled row for one seed, and a row for three
    assert opts.out == str(tmp_path / "out" / "bench_gpu.json") and reproduce_cmd[1] == "chargpt/recipes/reproduce.py"

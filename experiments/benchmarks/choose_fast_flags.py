"""The fast-path flags a GPU session should train with, read from what experiments/benchmarks/bench_gpu.py measured
there.

    python experiments/benchmarks/choose_fast_flags.py bench_gpu.json            # the choice, explained

Why: a device session has minutes, not hours, so its long runs (`python experiments/gpu_session.py reproduce`:
`make reproduce SEEDS=0,1,2`) should use whatever its own benchmark found fastest, without a person in between.

A candidate is a fast-path row (`--device_data True`) that keeps the faithful semantics: fp32 (no `--tf32`) and every
example in its step (no `--packed_rows`), and whose loss over the last tenth of the steps is the fast path's within
one step-to-step standard deviation (the larger of the two rows'), so a variant that trains worse is never chosen.
Among one-model rows the shortest projected pretraining (compile time included) is the single run's choice; among
rows that train three seeds at once (`--seeds 0,1,2`, `--stack_seeds True` or not) the shortest projection for all
three is the choice for three seeds; with none allowed (say, it failed), the one-seed choice's flags train the seeds
in turn. experiments/gpu_session.py calls `choose` and `run_flags`: the seeds' train_pretrain.py flags (its
`--pretrain_extra`), and `--stack_seeds` for the recipe when stacking won; flags that the run's own options set
(`--device_data`, `--seeds`) are left out.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from chargpt.training.cli import UsageError, run_cli

UNFAITHFUL = ("--tf32", "--packed_rows")  # flags that change what is computed: opt-in, never chosen for a run
MIN_TAIL = 5  # losses in a row's last tenth below which its spread says nothing (the reference row is itself)
SET_BY_THE_RUN = ("--device_data", "--seeds", "--stack_seeds", "--seed")  # flags chargpt.recipes.reproduce sets itself


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", help="bench_gpu.json written by experiments/benchmarks/bench_gpu.py --out")
    parser.add_argument("--reference", default="fast",
                        help="the row whose loss the others must match (default: fast, the plain fast path)")
    parser.add_argument("--seeds", type=int, default=3, help="how many models a seeds row must train (default 3)")
    return parser


def flag_pairs(flags: str) -> list[tuple[str, str | None]]:
    """`--name value` pairs of a row's flags (a flag without a value pairs with None)."""
    words, pairs, k = shlex.split(flags), [], 0
    while k < len(words):
        value = words[k + 1] if k + 1 < len(words) and not words[k + 1].startswith("--") else None
        pairs.append((words[k], value))
        k += 1 if value is None else 2
    return pairs


def rejection(row: dict, reference: dict) -> str | None:
    """Why `row` may not be chosen, or None when it may (the fast-path reference itself always may)."""
    pairs = flag_pairs(row["flags"])
    names = {name for name, _ in pairs}
    if ("--device_data", "True") not in pairs:
        return "not the fast path"
    if row is reference:
        return None
    if names & set(UNFAITHFUL):
        return f"changes the numerics or the batches ({', '.join(sorted(names & set(UNFAITHFUL)))})"
    if not math.isfinite(row["loss_tail_mean"]):
        return f"loss {row['loss_tail_mean']}"
    if min(row["loss_tail_steps"], reference["loss_tail_steps"]) < MIN_TAIL:
        return f"too few losses to compare ({min(row['loss_tail_steps'], reference['loss_tail_steps'])} < {MIN_TAIL})"
    noise = max(row["loss_tail_std"], reference["loss_tail_std"])
    if abs(row["loss_tail_mean"] - reference["loss_tail_mean"]) > noise:
        return (f"loss {row['loss_tail_mean']:.4f}, not within {noise:.4f} of {reference['variant']}'s "
                f"{reference['loss_tail_mean']:.4f}")
    return None


def run_flags(row: dict) -> str:
    """The row's flags without those the run sets itself."""
    kept = [part for name, value in flag_pairs(row["flags"]) if name not in SET_BY_THE_RUN
            for part in (name, value) if part is not None]
    return shlex.join(kept)


def bench_row(rec: dict) -> dict:
    """A bench_gpu.py record as the row it measured: its variant's name, flags and measurements."""
    return {**rec["facts"], "variant": rec["facts"]["bench_variant"], "flags": rec["flags"]}


def choose(results: dict, reference: str = "fast", seeds: int = 3) -> dict:
    """The fastest allowed one-model row and `seeds`-model row, and every rejection (a failed variant's too). With
    no `seeds`-model row allowed (none measured, or it failed), the one-model row's flags train the seeds in turn
    (`seeds_in_turn`): compiled steps each, unmeasured, rather than the eager default."""
    rows = [bench_row(rec) for rec in results.get("records", [])]
    by_name = {row["variant"]: row for row in rows}
    if reference not in by_name:
        raise ValueError(f"no {reference!r} row to compare losses with (rows: {', '.join(by_name) or 'none'})")
    if not math.isfinite(by_name[reference]["loss_tail_mean"]):
        loss = by_name[reference]["loss_tail_mean"]
        raise ValueError(f"the {reference!r} row's loss is {loss}: nothing to compare the others with")
    allowed, rejected = [], {}
    for row in rows:
        why = rejection(row, by_name[reference])
        if why is None:
            allowed.append(row)
        else:
            rejected[row["variant"]] = why
    single = [row for row in allowed if row.get("members", 1) == 1]
    several = [row for row in allowed if row.get("members", 1) == seeds]
    fastest = min(single, key=lambda r: r["projected_full_pretraining_s"], default=None)
    fastest_seeds = min(several, key=lambda r: r["projected_full_pretraining_s"], default=None)
    rejected.update({f["variant"]: f"failed: {f.get('error', '?')[:200]}" for f in results.get("failed", [])})
    in_turn = fastest_seeds is None and fastest is not None
    return {"single": fastest, "seeds": fastest if in_turn else fastest_seeds, "seeds_in_turn": in_turn,
            "rejected": rejected}


def describe(choice: dict, seeds: int) -> list[str]:
    lines = []
    for key, what in (("single", "one seed"), ("seeds", f"{seeds} seeds")):
        row = choice[key]
        if key == "seeds" and choice["seeds_in_turn"]:
            lines.append(f"{what}: no {seeds}-seed row allowed; {row['variant']}'s flags, the seeds in turn "
                         f"(unmeasured): {run_flags(row) or '(the fast path alone)'}")
            continue
        lines.append(f"{what}: " + ("no row allowed" if row is None else
                                    f"{row['variant']} ({row['projected_full_pretraining_s']:,.0f} s projected): "
                                    f"{run_flags(row) or '(the fast path alone)'}"))
    lines += [f"  not {name}: {why}" for name, why in choice["rejected"].items()]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    path = Path(opts.bench)
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise UsageError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(results, dict):
        raise UsageError(f"{path}: not a bench_gpu.py results file (no records)")
    try:
        choice = choose(results, opts.reference, opts.seeds)
    except KeyError as err:
        raise UsageError(f"{path}: a row lacks {err}: not written by experiments/benchmarks/bench_gpu.py") from None
    except ValueError as err:
        raise UsageError(f"{path}: {err}") from None
    print("\n".join(describe(choice, opts.seeds)))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))

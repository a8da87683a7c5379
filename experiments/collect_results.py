"""Gather `run_experiments.py` outputs into one small JSON and plot dev accuracy against training wall time.

    python experiments/collect_results.py out/cpu/*/results.json --label_from_dir \
        --json results/accuracy_vs_compute_cpu.json --plot out/accuracy_vs_compute_cpu_all.png

Each point is one pretrain -> finetune -> evaluate run; x is its pretraining + finetuning wall time, so the plot
answers "how much accuracy does this much compute buy". Rows already in --json are kept (merged by run id), so
runs made in different sessions accumulate.

`--finetune_sweep FILE --sweep_lr LR` adds the points of a finetuning sweep (rows naming their pretrained model in
`command`) at one learning rate: each is priced as that model's pretraining time, taken from the row already
collected for it, plus its own finetuning time.

`--lr_selection out/sel/selection.json ...` adds the final models of `select_finetune_lr.py --final` runs (the
finetuning rate chosen on held-out training questions), priced as their model's pretraining plus the whole
selection and the final finetuning.

`--seed_group "NAME=ID,ID,ID"` (repeatable) names runs of one recipe that differ only in their seed, and reports
their mean and sample standard deviation (n - 1) of dev accuracy and wall time under "seed_groups" in --json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from pathlib import Path

from training.files import atomic_write_text

ANCHORS = Path(__file__).resolve().parents[1] / "results" / "anchors.json"  # the handout's bars, the 60-minute goal


def read_json(path: Path, what: str) -> dict:
    """The JSON object in `path`; anything else ends the script with one line naming the file."""
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise SystemExit(f"{path}: cannot read {what} ({err.strerror})") from None
    except ValueError as err:  # JSONDecodeError carries the line; a UnicodeDecodeError does not
        where = f"line {err.lineno}: " if hasattr(err, "lineno") else ""
        raise SystemExit(f"{path}: not {what}: {where}{err}") from None
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: not {what}: expected a JSON object")
    return data


def rows_from(summary: dict, label: str) -> list[dict]:
    rows = []
    for run in summary["runs"]:
        if "accuracy" not in run.get("dev", {}):
            continue
        if "position" not in run:  # London baseline or finetuning from scratch: no pretraining
            rows.append({
                "id": f"{label}/{run['name']}", "recipe": label, "baseline": run["name"], "position": "-",
                "attention": "-", "seed": 0, "pretrain_epochs": 0,
                "train_minutes": round(run.get("train_seconds", 0) / 60, 2), "dev_accuracy": run["dev"]["accuracy"],
                "dev_correct": run["dev"]["correct"], "dev_total": run["dev"]["total"],
                "threads": summary.get("threads"), "command": summary.get("command", ""),
            })
            continue
        rows.append({
            "id": f"{label}/{run['name']}",
            "recipe": label,
            "position": run["position"],
            "attention": run["attention"],
            "seed": run["seed"],
            "pretrain_epochs": run.get("pretrain_epochs", summary.get("pretrain_epochs")),
            "snapshot_of_epochs": run.get("snapshot_of_epochs"),
            "pretrain_seconds": run["pretrain_seconds"],
            "finetune_seconds": run["finetune_seconds"],
            "train_minutes": round(run["train_seconds"] / 60, 2),
            "dev_accuracy": run["dev"]["accuracy"],
            "dev_correct": run["dev"]["correct"],
            "dev_total": run["dev"]["total"],
            "threads": summary.get("threads"),
            "command": summary.get("command", ""),
            # A hand-written caveat on a run (e.g. that it was resumed and how its wall time was pieced together).
            **({"note": run["note"]} if "note" in run else {}),
        })
    return rows


def sweep_rows(sweep_path: Path, lr: float, epochs: int, collected: dict[str, dict]) -> list[dict]:
    """Rows for the sweep runs at (lr, epochs), each joined with the collected run of the model it finetuned."""
    runs = read_json(sweep_path, "a finetuning sweep JSON").get("runs")
    if not isinstance(runs, list):
        raise SystemExit(f"{sweep_path}: not a finetuning sweep JSON: no 'runs' list")
    rows = []
    for i, run in enumerate(runs):
        try:
            if run["finetune_learning_rate"] == lr and run["finetune_epochs"] == epochs:
                rows.append(_sweep_row(run, lr, collected, sweep_path))
        except (KeyError, ValueError, IndexError, TypeError) as err:
            raise SystemExit(f"{sweep_path}: runs[{i}]: needs finetune_learning_rate, finetune_epochs, "
                             f"finetune_seconds, dev_* and a command with --model_name_or_path ({err!r})") from None
    return rows


def _pretrained_run(model: Path, collected: dict[str, dict], source: Path) -> tuple[str, dict]:
    """The name and the collected row of the run whose pretraining made `model` (a -pretrain folder or a snapshot)."""
    snapshot = model.name if model.name.startswith("epoch-") else None
    pretrain_dir = model.parent if snapshot else model
    name = pretrain_dir.name.removesuffix("-pretrain") + (f"-{snapshot}" if snapshot else "")
    base_id = f"{pretrain_dir.parent.name}/{name}"
    if base_id not in collected:
        raise SystemExit(f"{source}: no collected run {base_id!r} to take the pretraining time from")
    return name, collected[base_id]


def _sweep_row(run: dict, lr: float, collected: dict[str, dict], sweep_path: Path) -> dict:
    words = run["command"].split()
    name, base = _pretrained_run(Path(words[words.index("--model_name_or_path") + 1]), collected, sweep_path)
    recipe = f"{base['recipe']} + finetuning lr {lr:g}"
    seconds = base["pretrain_seconds"] + run["finetune_seconds"]
    return dict(base, id=f"{recipe}/{name}", recipe=recipe, finetune_seconds=run["finetune_seconds"],
                train_minutes=round(seconds / 60, 2), dev_accuracy=run["dev_accuracy"],
                dev_correct=run["dev_correct"], dev_total=run["dev_total"], command=run["command"])


def selection_row(path: Path, collected: dict[str, dict]) -> dict:
    """The final model of a select_finetune_lr.py run, priced as pretraining + every finetuning and held-out
    evaluation of the selection + the final finetuning: choosing the rate is part of the recipe's compute."""
    sel = read_json(path, "a select_finetune_lr.py selection.json")
    try:
        final, dev = sel["final"], sel["final"]["dev"]
        name, base = _pretrained_run(Path(sel["model"]), collected, path)
        selection = sum(p["finetune_seconds"] + p["holdout"]["seconds"] for p in sel["points"])
        seconds = base["pretrain_seconds"] + selection + final["finetune_seconds"]
        recipe = f"{base['recipe']} + finetuning lr chosen on {sel['holdout']} held-out training questions"
        return dict(base, id=f"{recipe}/{name}", recipe=recipe, finetune_learning_rate=final["learning_rate"],
                    finetune_seconds=final["finetune_seconds"], selection_seconds=round(selection, 1),
                    train_minutes=round(seconds / 60, 2),
                    dev_accuracy=dev["accuracy"], dev_correct=dev["correct"], dev_total=dev["total"],
                    command=sel["command"], selection_points=[
                        {"learning_rate": p["learning_rate"], "holdout_correct": p["holdout"]["correct"],
                         "holdout_total": p["holdout"]["total"]} for p in sel["points"]])
    except (KeyError, TypeError) as err:
        raise SystemExit(f"{path}: not a finished select_finetune_lr.py --final run: missing {err}") from None


def seed_groups(specs: list[str], collected: dict[str, dict]) -> list[dict]:
    """Mean and sample std over the seeds of one recipe; a group must name collected runs with distinct seeds."""
    groups = []
    for spec in specs:
        name, sep, ids = spec.partition("=")
        ids = [i.strip() for i in ids.split(",") if i.strip()]
        if not sep or not name.strip() or len(ids) < 2:
            raise SystemExit(f"--seed_group {spec!r}: expected NAME=ID,ID[,ID...] with at least two run ids")
        missing = [i for i in ids if i not in collected]
        if missing:
            raise SystemExit(f"--seed_group {name!r}: no collected run {missing[0]!r}")
        runs = [collected[i] for i in ids]
        seeds = [r["seed"] for r in runs]
        if len(set(seeds)) != len(seeds):
            raise SystemExit(f"--seed_group {name!r}: runs share a seed ({seeds}); a group compares seeds")
        acc = [r["dev_accuracy"] for r in runs]
        minutes = [r["train_minutes"] for r in runs]
        groups.append({
            "name": name.strip(), "ids": ids, "seeds": seeds, "n": len(runs), "dev_accuracies": acc,
            "dev_accuracy_mean": round(statistics.mean(acc), 2), "dev_accuracy_std": round(statistics.stdev(acc), 2),
            "train_minutes_mean": round(statistics.mean(minutes), 2),
            "train_minutes_std": round(statistics.stdev(minutes), 2),
        })
    return groups


def plot(rows: list[dict], path: Path, title: str, groups: list[dict] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5.5))
    series: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        if row.get("baseline"):
            continue
        series.setdefault((row["recipe"], f"{row['position']}/{row['attention']}"), []).append(row)
    palette = plt.get_cmap("tab20").colors  # the default cycle repeats after 10 series
    for i, ((recipe, variant), points) in enumerate(sorted(series.items())):
        points.sort(key=lambda r: r["train_minutes"])
        xs, ys = [r["train_minutes"] for r in points], [r["dev_accuracy"] for r in points]
        snapshots = any(r.get("snapshot_of_epochs") for r in points)
        label = f"{variant}, {recipe}" + (" (snapshots of one run)" if snapshots else "")
        ax.plot(xs, ys, marker="o", color=palette[2 * i % 20 + (i // 10) % 2], label=label)
        for r in points:
            if r["pretrain_epochs"]:
                ax.annotate(f"{r['pretrain_epochs']:g}ep", (r["train_minutes"], r["dev_accuracy"]),
                            textcoords="offset points", xytext=(4, 4), fontsize=7)
    colours = ("black", "darkmagenta", "darkgoldenrod", "navy", "darkgreen", "firebrick", "teal", "saddlebrown")
    for i, g in enumerate(groups or []):
        ax.errorbar(g["train_minutes_mean"], g["dev_accuracy_mean"], xerr=g["train_minutes_std"],
                    yerr=g["dev_accuracy_std"], fmt="D", color=colours[i % len(colours)], capsize=3, markersize=5,
                    label=f"{g['name']}: mean ± std over {g['n']} seeds")
    anchors = read_json(ANCHORS, "the anchors JSON")
    for name, bar in anchors["handout_bars"].items():
        ax.axhline(bar["accuracy"], linestyle="--", linewidth=0.8, color="gray")
        ax.text(0.0, bar["accuracy"], f" handout bar ({name}) {bar['accuracy']:.0f}%", va="bottom", fontsize=7,
                color="gray", transform=ax.get_yaxis_transform())
    for row in rows:
        if row.get("baseline", "").startswith("no pretraining"):
            ax.axhline(row["dev_accuracy"], linestyle=":", linewidth=0.8, color="tab:red")
            ax.text(0.0, row["dev_accuracy"], f" no pretraining {row['dev_accuracy']:.1f}%", ha="left", va="bottom",
                    fontsize=7, color="tab:red", transform=ax.get_yaxis_transform())
    ax.axhline(5.0, linestyle=":", linewidth=0.8, color="gray")
    ax.text(0.0, 5.0, " London baseline 5%", va="bottom", fontsize=7, color="gray", transform=ax.get_yaxis_transform())
    ax.set_xlabel("pretraining + finetuning wall time (minutes)")
    ax.set_ylabel("dev exact match (%), 500 questions")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    goal = anchors["cpu_goal_minutes"]
    right = max((r["train_minutes"] for r in rows), default=goal)
    ax.set_xlim(left=0, right=max(right, goal) * 1.08)  # room for the last point's label
    ax.axvline(goal, linestyle="--", linewidth=0.8, color="gray")
    ax.text(goal, 0.99, f"{goal}-minute goal ", ha="right", va="top", fontsize=7, color="gray",
            transform=ax.get_xaxis_transform())
    ax.grid(alpha=0.3)
    # Below the axes in two columns, the figure grown to hold it: every entry visible, none wider than the plot.
    entries = len(ax.get_legend_handles_labels()[1])
    fig.set_size_inches(11, 5.5 + 0.16 * ((entries + 1) // 2))
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="*", type=Path, help="results.json files written by run_experiments.py")
    parser.add_argument("--label_from_dir", action="store_true", help="Label each run by its folder name.")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--plot", type=Path, required=True)
    parser.add_argument("--finetune_sweep", type=Path, help="A finetuning sweep JSON (see above).")
    parser.add_argument("--sweep_lr", type=float, help="The sweep's learning rate to plot.")
    parser.add_argument("--sweep_epochs", type=int, default=10)
    parser.add_argument("--lr_selection", nargs="+", default=[], type=Path, metavar="SELECTION_JSON",
                        help="selection.json files of select_finetune_lr.py --final runs (see above).")
    parser.add_argument("--seed_group", action="append", default=[], metavar="NAME=ID,ID,ID",
                        help="Runs of one recipe with different seeds, summarised as mean and std (repeatable).")
    parser.add_argument("--hardware", default=f"{platform.machine()} CPU, 2 cores")
    return parser


def main() -> None:
    parser = build_parser()
    opts = parser.parse_args()
    if opts.finetune_sweep and opts.sweep_lr is None:
        parser.error("--finetune_sweep needs --sweep_lr")

    previous = read_json(opts.json, "a collected results JSON") if opts.json.exists() else {}
    # Keys this script does not make (a recipe's description in today's flags, probe_recall.py counts) are kept.
    kept_keys = {k: v for k, v in previous.items() if k not in ("hardware", "runs", "seed_groups")}
    merged = {row["id"]: row for row in previous.get("runs", [])}
    for path in opts.results:
        summary = read_json(path, "a run_experiments.py results.json")
        try:
            found = rows_from(summary, path.parent.name if opts.label_from_dir else summary["recipe"])
        except (KeyError, TypeError) as err:
            raise SystemExit(f"{path}: not a run_experiments.py results.json: missing {err}") from None
        for row in found:
            merged[row["id"]] = row
    if opts.finetune_sweep:
        for row in sweep_rows(opts.finetune_sweep, opts.sweep_lr, opts.sweep_epochs, merged):
            merged[row["id"]] = row
    for path in opts.lr_selection:
        row = selection_row(path, merged)
        merged[row["id"]] = row
    kept = [f"{g['name']}={','.join(g['ids'])}" for g in previous.get("seed_groups", [])]
    groups = {g["name"]: g for g in seed_groups(kept + opts.seed_group, merged)}  # recomputed: rows may change
    rows = sorted(merged.values(), key=lambda r: (r["position"], r["recipe"], r["pretrain_epochs"] or 0))
    opts.json.parent.mkdir(parents=True, exist_ok=True)
    summary = {"hardware": opts.hardware, "runs": rows}
    if groups:
        summary["seed_groups"] = list(groups.values())
    atomic_write_text(opts.json, json.dumps(summary | kept_keys, indent=2) + "\n")
    title = f"chargpt on wiki.txt: dev accuracy vs training wall time\n({opts.hardware})"  # 2 lines: fits the axes
    plot(rows, opts.plot, title, list(groups.values()))
    print("| recipe | variant | seed | pretrain epochs | pretrain + finetune (min) | dev accuracy |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        variant = r.get("baseline") or f"{r['position']}/{r['attention']}"
        print(f"| {r['recipe']} | {variant} | {r['seed']} | {r['pretrain_epochs'] or '-'} | "
              f"{r['train_minutes']:.1f} | {r['dev_accuracy']:.1f}% ({r['dev_correct']}/{r['dev_total']}) |")
    for g in groups.values():
        print(f"{g['name']}: seeds {g['seeds']}: dev {g['dev_accuracy_mean']:.1f} ± {g['dev_accuracy_std']:.1f}% "
              f"({', '.join(f'{a:.1f}' for a in g['dev_accuracies'])}), {g['train_minutes_mean']:.1f} ± "
              f"{g['train_minutes_std']:.1f} min")


if __name__ == "__main__":
    main()

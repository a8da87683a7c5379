"""Gather `chargpt.recipes.reproduce` outputs into run records (experiments/records.py) and plot dev accuracy against
training wall time.

    python experiments/collect_results.py out/cpu/*/results.json --label_from_dir \
        --json results/accuracy_vs_compute_cpu.json --plot out/accuracy_vs_compute_cpu_all.png

Each point is one pretrain -> finetune -> evaluate run; x is its pretraining + finetuning wall time, so the plot
answers "how much accuracy does this much compute buy". Records already in --json are kept (merged by name), so
runs made in different sessions accumulate.

`--finetune_sweep FILE --sweep_lr LR` adds the points of a finetuning sweep (rows naming their pretrained model in
`command`) at one learning rate: each is priced as that model's pretraining time, taken from the record already
collected for it, plus its own finetuning time.

`--lr_selection out/sel/selection.json ...` adds the final models of `chargpt.recipes.select_finetune_lr --final` runs
(the finetuning rate chosen on held-out training questions), priced as their model's pretraining plus the whole
selection and the final finetuning.

`--seed_group "NAME=ID,ID,ID"` (repeatable) names runs of one recipe that differ only in their seed (their
facts.seed_group), and prints their mean and sample standard deviation (n - 1) of dev accuracy and wall time; the
tables and plots compute the same from the records.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from datetime import date
from pathlib import Path

import records
from docs_tables import score
from records import record
from records import train_minutes as minutes

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


def _record(name: str, label: str, facts: dict, seconds: dict, dev: dict, command: str, seed: int,
            variant: str) -> dict:
    return record(name, recipe=label, variant=variant, seeds=[seed], hardware="", date=date.today().isoformat(),
                  scores={"dev": {key: dev[key] for key in ("correct", "total", "accuracy")}},
                  seconds=seconds, command=command, facts=facts)


def rows_from(summary: dict, label: str) -> list[dict]:
    """The run records of one chargpt.recipes.reproduce results.json, named LABEL/RUN (their hardware set by main)."""
    rows = []
    for run in summary["runs"]:
        if "accuracy" not in run.get("dev", {}):
            continue
        common = {"run_folder": label, "threads": summary.get("threads")}
        if "position" not in run:  # London baseline or finetuning from scratch: no pretraining
            facts = {"position": "-", "attention": "-", "baseline": run["name"], **common}  # no epochs: none ran
            trained = {"train": run["train_seconds"]} if "train_seconds" in run else {}  # answering London: none
            rows.append(_record(f"{label}/{run['name']}", label, facts, trained,
                                run["dev"], summary.get("command", ""), 0, run["name"]))
            continue
        facts = {"position": run["position"], "attention": run["attention"],
                 "pretrain_epochs": run.get("pretrain_epochs", summary.get("pretrain_epochs")), **common}
        if run.get("snapshot_of_epochs") is not None:
            facts["snapshot_of_epochs"] = run["snapshot_of_epochs"]
        if "note" in run:  # a hand-written caveat (e.g. that it was resumed and how its wall time was pieced together)
            facts["note"] = run["note"]
        seconds = {"pretrain": run["pretrain_seconds"], "finetune": run["finetune_seconds"],
                   "train": run["train_seconds"]}
        rows.append(_record(f"{label}/{run['name']}", label, facts, seconds, run["dev"], summary.get("command", ""),
                            run["seed"], f"{run['position']}/{run['attention']}"))
    return rows


def sweep_rows(sweep_path: Path, lr: float, epochs: int, collected: dict[str, dict]) -> list[dict]:
    """Records for the sweep runs at (lr, epochs), each joined with the collected run of the model it finetuned."""
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
    """The name and the collected record of the run whose pretraining made `model` (a -pretrain folder or a
    snapshot)."""
    snapshot = model.name if model.name.startswith("epoch-") else None
    pretrain_dir = model.parent if snapshot else model
    name = pretrain_dir.name.removesuffix("-pretrain") + (f"-{snapshot}" if snapshot else "")
    base_id = f"{pretrain_dir.parent.name}/{name}"
    if base_id not in collected:
        raise SystemExit(f"{source}: no collected run {base_id!r} to take the pretraining time from")
    return name, collected[base_id]


def _derived(base: dict, name: str, label: str, seconds: dict, dev: dict, command: str, **facts: object) -> dict:
    """A record that finetuned `base`'s pretrained model another way."""
    return dict(base, name=f"{label}/{name}", recipe=label, seconds=seconds, command=command,
                date=date.today().isoformat(), facts={**base["facts"], "run_folder": label, **facts},
                scores={"dev": {key: dev[key] for key in ("correct", "total", "accuracy")}})


def _sweep_row(run: dict, lr: float, collected: dict[str, dict], sweep_path: Path) -> dict:
    words = run["command"].split()
    name, base = _pretrained_run(Path(words[words.index("--model_name_or_path") + 1]), collected, sweep_path)
    pretrain = base["seconds"]["pretrain"]
    seconds = {"pretrain": pretrain, "finetune": run["finetune_seconds"], "train": pretrain + run["finetune_seconds"]}
    dev = {"correct": run["dev_correct"], "total": run["dev_total"], "accuracy": run["dev_accuracy"]}
    return _derived(base, name, f"{base['facts']['run_folder']} + finetuning lr {lr:g}", seconds, dev, run["command"])


def selection_row(path: Path, collected: dict[str, dict]) -> dict:
    """The final model of a chargpt.recipes.select_finetune_lr run, priced as pretraining + every finetuning and
    held-out evaluation of the selection + the final finetuning: choosing the rate is part of the recipe's compute."""
    sel = read_json(path, "a chargpt.recipes.select_finetune_lr selection.json")
    try:
        final = sel["final"]
        name, base = _pretrained_run(Path(sel["model"]), collected, path)
        selection = sum(p["finetune_seconds"] + p["holdout"]["seconds"] for p in sel["points"])
        pretrain = base["seconds"]["pretrain"]
        seconds = {"pretrain": pretrain, "finetune": final["finetune_seconds"], "selection": round(selection, 1),
                   "train": pretrain + selection + final["finetune_seconds"]}
        label = f"{base['facts']['run_folder']} + finetuning lr chosen on {sel['holdout']} held-out training questions"
        points = [{"learning_rate": p["learning_rate"], "holdout_correct": p["holdout"]["correct"],
                   "holdout_total": p["holdout"]["total"]} for p in sel["points"]]
        return _derived(base, name, label, seconds, final["dev"], sel["command"],
                        finetune_learning_rate=final["learning_rate"], selection_points=points)
    except (KeyError, TypeError) as err:
        raise SystemExit(f"{path}: not a finished chargpt.recipes.select_finetune_lr --final run: "
                         f"missing {err}") from None


def seed_groups(specs: list[str], collected: dict[str, dict]) -> dict[str, list[str]]:
    """NAME -> run names of `--seed_group NAME=ID,ID,...`: collected runs with distinct seeds, at least two."""
    groups = {}
    for spec in specs:
        name, sep, ids = spec.partition("=")
        ids = [i.strip() for i in ids.split(",") if i.strip()]
        if not sep or not name.strip() or len(ids) < 2:
            raise SystemExit(f"--seed_group {spec!r}: expected NAME=ID,ID[,ID...] with at least two run ids")
        missing = [i for i in ids if i not in collected]
        if missing:
            raise SystemExit(f"--seed_group {name!r}: no collected run {missing[0]!r}")
        seeds = [collected[i]["seeds"][0] for i in ids]
        if len(set(seeds)) != len(seeds):
            raise SystemExit(f"--seed_group {name!r}: runs share a seed ({seeds}); a group compares seeds")
        groups[name.strip()] = ids
    return groups


def group_summary(name: str, members: list[dict]) -> dict:
    """Mean and sample standard deviation (n - 1) of a seed group's dev accuracy and wall minutes."""
    acc = [m["scores"]["dev"]["accuracy"] for m in members]
    minutes = [m["seconds"]["train"] / 60 for m in members]
    return {"name": name, "seeds": [m["seeds"][0] for m in members], "n": len(members), "dev_accuracies": acc,
            "dev_accuracy_mean": statistics.mean(acc), "dev_accuracy_std": statistics.stdev(acc),
            "train_minutes_mean": statistics.mean(minutes), "train_minutes_std": statistics.stdev(minutes)}


def accuracy(row: dict) -> float:
    return row["scores"]["dev"]["accuracy"]


def plot(rows: list[dict], path: Path, title: str, groups: list[dict] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5.5))
    series: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        if row["facts"].get("baseline"):
            continue
        series.setdefault((row["facts"]["run_folder"], row["variant"]), []).append(row)
    palette = plt.get_cmap("tab20").colors  # the default cycle repeats after 10 series
    for i, ((recipe, variant), points) in enumerate(sorted(series.items())):
        points.sort(key=minutes)
        xs, ys = [minutes(r) for r in points], [accuracy(r) for r in points]
        snapshots = any(r["facts"].get("snapshot_of_epochs") for r in points)
        label = f"{variant}, {recipe}" + (" (snapshots of one run)" if snapshots else "")
        ax.plot(xs, ys, marker="o", color=palette[2 * i % 20 + (i // 10) % 2], label=label)
        for r in points:
            if r["facts"].get("pretrain_epochs"):
                ax.annotate(f"{r['facts']['pretrain_epochs']:g}ep", (minutes(r), accuracy(r)),
                            textcoords="offset points", xytext=(4, 4), fontsize=7)
    colours = ("black", "darkmagenta", "darkgoldenrod", "navy", "darkgreen", "firebrick", "teal", "saddlebrown")
    for i, g in enumerate(groups or []):
        ax.errorbar(g["train_minutes_mean"], g["dev_accuracy_mean"], xerr=g["train_minutes_std"],
                    yerr=g["dev_accuracy_std"], fmt="D", color=colours[i % len(colours)], capsize=3, markersize=5,
                    label=f"{g['name']}: mean ± std over {g['n']} seeds")
    anchors = records.read(ANCHORS)
    bars = {rec["name"]: rec["facts"]["handout_bar"] for rec in anchors["records"] if "handout_bar" in rec["facts"]}
    for name, bar in bars.items():
        ax.axhline(bar["accuracy"], linestyle="--", linewidth=0.8, color="gray")
        ax.text(0.0, bar["accuracy"], f" handout bar ({name}) {bar['accuracy']:.0f}%", va="bottom", fontsize=7,
                color="gray", transform=ax.get_yaxis_transform())
    for row in rows:
        if row["facts"].get("baseline", "").startswith("no pretraining"):
            ax.axhline(accuracy(row), linestyle=":", linewidth=0.8, color="tab:red")
            ax.text(0.0, accuracy(row), f" no pretraining {accuracy(row):.1f}%", ha="left", va="bottom",
                    fontsize=7, color="tab:red", transform=ax.get_yaxis_transform())
    ax.axhline(5.0, linestyle=":", linewidth=0.8, color="gray")
    ax.text(0.0, 5.0, " London baseline 5%", va="bottom", fontsize=7, color="gray", transform=ax.get_yaxis_transform())
    ax.set_xlabel("pretraining + finetuning wall time (minutes)")
    ax.set_ylabel("dev exact match (%), 500 questions")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    goal = anchors["cpu_goal_minutes"]
    right = max((minutes(r) for r in rows), default=goal)
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
    parser.add_argument("results", nargs="*", type=Path, help="results.json files written by chargpt.recipes.reproduce")
    parser.add_argument("--label_from_dir", action="store_true", help="Label each run by its folder name.")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--plot", type=Path, required=True)
    parser.add_argument("--finetune_sweep", type=Path, help="A finetuning sweep JSON (see above).")
    parser.add_argument("--sweep_lr", type=float, help="The sweep's learning rate to plot.")
    parser.add_argument("--sweep_epochs", type=int, default=10)
    parser.add_argument("--lr_selection", nargs="+", default=[], type=Path, metavar="SELECTION_JSON",
                        help="selection.json files of chargpt.recipes.select_finetune_lr --final runs (see above).")
    parser.add_argument("--seed_group", action="append", default=[], metavar="NAME=ID,ID,ID",
                        help="Runs of one recipe with different seeds, summarised as mean and std (repeatable).")
    parser.add_argument("--hardware", default=f"{platform.machine()} CPU, 2 cores")
    return parser


def main() -> None:
    parser = build_parser()
    opts = parser.parse_args()
    if opts.finetune_sweep and opts.sweep_lr is None:
        parser.error("--finetune_sweep needs --sweep_lr")

    previous = records.read(opts.json) if opts.json.exists() else {"records": []}
    # e.g. what chargpt.evaluation.probe_recall counted, kept
    notes = {k: v for k, v in previous.items() if k != "records"}
    merged = {row["name"]: row for row in previous["records"]}
    for path in opts.results:
        summary = read_json(path, "a chargpt.recipes.reproduce results.json")
        try:
            found = rows_from(summary, path.parent.name if opts.label_from_dir else summary["recipe"])
        except (KeyError, TypeError) as err:
            raise SystemExit(f"{path}: not a chargpt.recipes.reproduce results.json: missing {err}") from None
        merged |= {row["name"]: dict(row, hardware=opts.hardware) for row in found}
    if opts.finetune_sweep:
        merged |= {row["name"]: row for row in sweep_rows(opts.finetune_sweep, opts.sweep_lr, opts.sweep_epochs,
                                                           merged)}
    for path in opts.lr_selection:
        row = selection_row(path, merged)
        merged[row["name"]] = row
    for name, ids in seed_groups(opts.seed_group, merged).items():
        for i in ids:
            merged[i]["facts"]["seed_group"] = name
    rows = sorted(merged.values(), key=lambda r: (r["facts"]["position"], r["facts"]["run_folder"],
                                                  r["facts"].get("pretrain_epochs", 0)))
    opts.json.parent.mkdir(parents=True, exist_ok=True)
    records.write(opts.json, rows, **notes)
    groups: dict[str, list[dict]] = {}
    for row in rows:
        if "seed_group" in row["facts"]:
            groups.setdefault(row["facts"]["seed_group"], []).append(row)
    summaries = [group_summary(name, members) for name, members in groups.items()]
    title = f"chargpt on wiki.txt: dev accuracy vs training wall time\n({opts.hardware})"  # 2 lines: fits the axes
    plot(rows, opts.plot, title, summaries)
    print("| recipe | variant | seed | pretrain epochs | pretrain + finetune (min) | dev accuracy |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        epochs = r["facts"].get("pretrain_epochs", "-")
        print(f"| {r['facts']['run_folder']} | {r['variant']} | {r['seeds'][0]} | {epochs} | {minutes(r):.1f} | "
              f"{score(r['scores']['dev'])} |")
    for g in summaries:
        print(f"{g['name']}: seeds {g['seeds']}: dev {g['dev_accuracy_mean']:.1f} ± {g['dev_accuracy_std']:.1f}% "
              f"({', '.join(f'{a:.1f}' for a in g['dev_accuracies'])}), {g['train_minutes_mean']:.1f} ± "
              f"{g['train_minutes_std']:.1f} min")


if __name__ == "__main__":
    main()

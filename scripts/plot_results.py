"""The plot a reader sees: dev accuracy against wall time for the CPU recipes a reader cites, from results/*.json.

    python scripts/plot_results.py [--out docs/accuracy_vs_compute_cpu.png]

Four 3-seed recipes of `--preset cpu-fast` (mean ± std, and each seed as a dot), the baselines and the handout's
bars. Every run, snapshot and sweep is in docs/results.md's tables; `collect_results.py --plot` draws them all.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from training.files import atomic_write_bytes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
OUT = ROOT / "docs" / "accuracy_vs_compute_cpu.png"
# (seed group of results/accuracy_vs_compute_cpu.json, legend label, colour): the recipes docs/results.md cites.
CITED = [
    ("rope, --preset cpu-fast --num_train_epochs 290", "rope, --num_train_epochs 290", "tab:blue"),
    ("rope, --preset cpu-fast --weight_decay 0.3", "rope, --weight_decay 0.3", "tab:cyan"),
    ("learned, --preset cpu-fast --weight_decay 0.3", "learned, --weight_decay 0.3", "tab:red"),
    ("learned, --preset cpu-fast", "learned (220 epochs)", "tab:orange"),
]


def load(folder: Path = RESULTS) -> tuple[dict, dict]:
    """(accuracy_vs_compute_cpu.json, anchors.json) of `folder`."""
    return (json.loads((folder / "accuracy_vs_compute_cpu.json").read_text()),
            json.loads((folder / "anchors.json").read_text()))


def plot(runs: dict, anchors: dict) -> Figure:
    """The figure; lines and labels come from the JSON, so a new measurement moves them."""
    rows = {row["id"]: row for row in runs["runs"]}
    groups = {g["name"]: g for g in runs["seed_groups"]}
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for name, label, colour in CITED:
        points = [rows[i] for i in groups[name]["ids"]]
        xs, ys = [p["train_minutes"] for p in points], [p["dev_accuracy"] for p in points]
        ax.scatter(xs, ys, s=18, color=colour, alpha=0.45, linewidths=0)
        ax.errorbar(statistics.mean(xs), statistics.mean(ys), xerr=statistics.stdev(xs), yerr=statistics.stdev(ys),
                    fmt="D", color=colour, markersize=7, capsize=3, label=label)
    right = max(r["train_minutes"] for r in rows.values()) * 1.05
    goal = anchors["cpu_goal_minutes"]
    references = [(bar["accuracy"], f"handout bar, {name} ({bar['split']})", "--", "0.45")
                  for name, bar in anchors["handout_bars"].items()]
    for row in rows.values():
        if row.get("baseline"):
            references.append((row["dev_accuracy"], row["baseline"].split(" (")[0].capitalize(), ":", "0.45"))
    for y, text, style, colour in references:
        ax.axhline(y, linestyle=style, linewidth=0.8, color=colour, zorder=0)
        ax.text(0.6, y + 0.25, f"{text} {y:.1f}%", fontsize=7.5, color="0.3", va="bottom")
    ax.axvline(goal, linestyle="--", linewidth=0.8, color="0.45", zorder=0)
    ax.text(goal - 0.8, 0.4, f"{goal}-minute goal", fontsize=7.5, color="0.3", ha="right", va="bottom")
    ax.set_xlim(0, right)
    ax.set_ylim(0, max(r["dev_accuracy"] for r in rows.values()) + 3)
    ax.set_xlabel("pretraining + finetuning wall time (minutes)")
    ax.set_ylabel("dev exact match (%), 500 questions")
    ax.set_title(f"Dev accuracy against compute on {runs['hardware']}", fontsize=10)
    ax.grid(alpha=0.25)
    ax.legend(loc="upper left", bbox_to_anchor=(0.01, 0.86), fontsize=8, title_fontsize=8, framealpha=0.95,
              title="--preset cpu-fast, 3 seeds:\nmean ± std (dots: each seed)")
    fig.tight_layout()
    return fig


def save(fig: Figure, path: Path) -> None:
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT, help="Where the PNG goes.")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    save(plot(*load()), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

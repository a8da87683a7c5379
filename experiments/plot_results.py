"""The plots a reader sees, from results/*.json.

    python experiments/plot_results.py [--out docs/accuracy_vs_compute_cpu.png] \
        [--stored_out docs/stored_vs_answered.png]

- accuracy_vs_compute_cpu.png: dev accuracy against wall time of four 3-seed recipes of `--preset cpu-fast` (mean ±
  std, and each seed as a dot), the baselines and the handout's bars.
- stored_vs_answered.png (the README's): the project's question in one picture. For each recipe, how many dev
  birthplaces the pretrained model stored (`chargpt.evaluation.probe_recall`: it continues the person's own wiki.txt
  line with the place) beside how many dev questions the finetuned model answers.
Every run, snapshot and sweep is in docs/results.md's tables; `collect_results.py --plot` draws them all.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from docs_tables import Results, flat  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from records import train_minutes as minutes  # noqa: E402

from chargpt.training.files import atomic_write_bytes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
OUT = ROOT / "docs" / "accuracy_vs_compute_cpu.png"
STORED_OUT = ROOT / "docs" / "stored_vs_answered.png"
# (seed group of results/accuracy_vs_compute_cpu.json, legend label, colour): the recipes docs/results.md cites.
CITED = [
    ("rope, --preset cpu-fast --num_train_epochs 290", "rope, --num_train_epochs 290", "tab:blue"),
    ("rope, --preset cpu-fast --weight_decay 0.3", "rope, --weight_decay 0.3", "tab:cyan"),
    ("learned, --preset cpu-fast --weight_decay 0.3", "learned, --weight_decay 0.3", "tab:red"),
    ("learned, --preset cpu-fast", "learned (220 epochs)", "tab:orange"),
]


# ---------------------------------------------------------------------------------------------------- lookups
# (the runs the figures draw; tables.yaml's summary rows name the same ones)


def frontier_runs(results: Results, stem: str) -> list[dict]:
    """The frontier runs of a study (a probes study's facts.part 'frontier'; every run of one without parts), flat."""
    return [flat(rec) for rec in results.records(stem) if rec["facts"].get("part", "frontier") == "frontier"]


def recitation_runs(results: Results) -> dict[str, dict]:
    """The `--recite True` finetunings of cpu_fp32_recitation.json by name, flat (its seed check left out)."""
    return {rec["name"]: flat(rec) for rec in results.records("cpu_fp32_recitation") if "part" not in rec["facts"]}


def recitation_source(results: Results, run: dict) -> dict:
    """The pretraining record a recitation run finetuned: a run of its `pretrained_results` file (the mixed-frontier
    runs by default, else the shape-probe frontier runs), or that run's snapshot."""
    stem = run.get("pretrained_results", "cpu_fp32_mixed_frontier")
    runs = frontier_runs(results, stem)
    source = next(r for r in runs if r["name"] == run["pretrained_run"])
    return source["snapshot"] if run.get("snapshot") else source


def cpu_group(results: Results, name: str) -> list[dict]:
    """The records of a seed group of accuracy_vs_compute_cpu.json, in seed order."""
    return [rec for rec in results.records("accuracy_vs_compute_cpu") if rec["facts"].get("seed_group") == name]


def dev_of(rows: list[dict]) -> list[float]:
    return [row["scores"]["dev"]["accuracy"] for row in rows]


def fast_path(results: Results, part: str) -> dict:
    """The record of one stage of faithful_h100_fast_path.json (facts.part), flat."""
    return flat(next(rec for rec in results.records("faithful_h100_fast_path") if rec["facts"]["part"] == part))


def faithful(results: Results, part: str, series: str | None = None) -> list[dict]:
    """The records of one stage of faithful_h100.json (facts.part), of one finetuning series ('rope, lr 2e-4, CPU')."""
    return [rec for rec in results.records("faithful_h100") if rec["facts"]["part"] == part
            and (series is None or rec["facts"]["series"] == series)]


# the CPU frontier's runs (cpu_fp32_recitation.json, one per seed): their pretraining never saw the held-out questions
FRONTIER_RUNS = ["… 76 epochs, 400 questions held out of pretraining", "… the same, seed 1", "… the same, seed 2"]
FRONTIER_150 = ["… 150 epochs, 400 questions held out of pretraining", "… 150 epochs, seed 1", "… 150 epochs, seed 2"]
# ... with learned positions at 76 epochs, one seed (Xeon)
FRONTIER_LEARNED = ["… the same, learned positions"]
# ... and with learned positions, fp32 on AMD EPYCs without AMX
FRONTIER_150_LEARNED = ["… 150 epochs on the AMD EPYC, learned positions",
                        "… 150 epochs on the AMD EPYC, learned positions, seed 1",
                        "… 150 epochs on the AMD EPYC, learned positions, seed 2"]


def handout_bars(results: Results) -> dict[str, dict]:
    """The handout's bars by model (anchors.json): {'learned': {'accuracy': 15.0, 'split': 'dev'}, ...}."""
    return {rec["name"]: rec["facts"]["handout_bar"] for rec in results.records("anchors")
            if "handout_bar" in rec["facts"]}


def load(folder: Path = RESULTS) -> tuple[Results, dict]:
    """(the results of `folder`, what the figure is measured against: the handout's bars and the CPU goal)."""
    results = Results(folder)
    return results, {"handout_bars": handout_bars(results), "cpu_goal_minutes": results["anchors"]["cpu_goal_minutes"]}


def plot(results: Results, anchors: dict) -> Figure:
    """The figure; lines and labels come from the records of accuracy_vs_compute_cpu.json, so a new measurement
    moves them."""
    rows = results.records("accuracy_vs_compute_cpu")
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for name, label, colour in CITED:
        points = cpu_group(results, name)
        xs, ys = [minutes(p) for p in points], [p["scores"]["dev"]["accuracy"] for p in points]
        ax.scatter(xs, ys, s=18, color=colour, alpha=0.45, linewidths=0)
        ax.errorbar(statistics.mean(xs), statistics.mean(ys), xerr=statistics.stdev(xs), yerr=statistics.stdev(ys),
                    fmt="D", color=colour, markersize=7, capsize=3, label=label)
    right = max(minutes(r) for r in rows) * 1.05
    goal = anchors["cpu_goal_minutes"]
    references = [(bar["accuracy"], f"handout bar, {name} ({bar['split']})", "--", "0.45")
                  for name, bar in anchors["handout_bars"].items()]
    for row in rows:
        if row["facts"].get("baseline"):
            references.append((row["scores"]["dev"]["accuracy"], row["variant"].split(" (")[0].capitalize(), ":",
                               "0.45"))
    for y, text, style, colour in references:
        ax.axhline(y, linestyle=style, linewidth=0.8, color=colour, zorder=0)
        ax.text(0.6, y + 0.25, f"{text} {y:.1f}%", fontsize=7.5, color="0.3", va="bottom")
    ax.axvline(goal, linestyle="--", linewidth=0.8, color="0.45", zorder=0)
    ax.text(goal - 0.8, 0.4, f"{goal}-minute goal", fontsize=7.5, color="0.3", ha="right", va="bottom")
    ax.set_xlim(0, right)
    ax.set_ylim(0, max(r["scores"]["dev"]["accuracy"] for r in rows) + 3)
    ax.set_xlabel("pretraining + finetuning wall time (minutes)")
    ax.set_ylabel("dev exact match (%), 500 questions")
    ax.set_title(f"Dev accuracy against compute on {rows[0]['hardware']}", fontsize=10)
    ax.grid(alpha=0.25)
    ax.legend(loc="upper left", bbox_to_anchor=(0.01, 0.86), fontsize=8, title_fontsize=8, framealpha=0.95,
              title="--preset cpu-fast, 3 seeds:\nmean ± std (dots: each seed)")
    fig.tight_layout()
    return fig


# (label, runs of results/cpu_fp32_recitation.json, one per seed) of the recitation recipe, per position scheme: the
# runs of docs_tables.py's summary rows
RECITE_RECIPES = {
    "rope": [("recite\n76 ep., 4×128", FRONTIER_RUNS), ("recite\n150 ep., 4×128", FRONTIER_150)],
    "learned": [("recite\n76 ep., 4×128", FRONTIER_LEARNED), ("recite\n150 ep., 4×128", FRONTIER_150_LEARNED)],
}


def stored_and_answered(folder: Path = RESULTS) -> dict[str, list[tuple[str, list[float], list[float]]]]:
    """Per position scheme: (recipe, % of probed dev places stored per seed, % of dev answered per seed). The
    faithful models (4 layers x 256, 650 span-corruption epochs on an H100) answer with the reference finetuning or
    at lr 2e-4, and one of them pretrained again on the fast path with `--recite True` (rope, seed 0); the
    recitation recipe's (4 x 128, uncorrupted documents with recitation rows, then `--recite`) with the rate chosen
    on held-out training questions, last with spans of the recitation, at 4 x 128 and at the reference size."""
    results = Results(folder)
    recitation = recitation_runs(results)
    frontier = {rec["name"]: rec["facts"] for rec in results.records("cpu_fp32_mixed_frontier")}

    def span_stored(rec: dict) -> float:
        """% of probed dev places a span-answers model's pretraining stored: its own run's, or the frontier run's it
        re-evaluated."""
        if "pretrained_run" in rec["facts"]:
            made = frontier[rec["facts"]["pretrained_run"]]
            return 100 * made["probe_recall"] / made["probe_found"]
        made = rec["facts"]["answer_from_recitation"]["run"]
        return 100 * made["stored"] / made["stored_of"]

    out: dict[str, list[tuple[str, list[float], list[float]]]] = {}
    for variant, recipes in RECITE_RECIPES.items():
        made = [rec["facts"] for rec in faithful(results, "pretraining") if rec["variant"] == variant]
        stored = [100 * m["probe_recall"] / m["probe_of"] for m in made]
        rows = [(label, stored, dev_of(faithful(results, "finetuning", f"{variant}, {way}")))
                for label, way in (("faithful\n650 ep., 4×256", "reference, CPU"),
                                   ("lr 2e-4\n(same model)", "lr 2e-4, CPU"))]
        made, recite = fast_path(results, "pretraining"), fast_path(results, "recite")
        if made["variant"] == variant:  # the faithful pretraining again (fast path), finetuned to recite: one seed
            rows.append(("faithful + recite\n650 ep., 4×256", [made["probe_recall"]["recalled_percent"]],
                         [recite["dev"]["accuracy"]]))
        for label, names in recipes:
            runs = [recitation[name] for name in names]
            sources = [recitation_source(results, run) for run in runs]
            rows.append((label, [100 * s["probe_recall"] / s["probe_found"] for s in sources],
                         [run["dev"]["accuracy"] for run in runs]))
        spans = [rec for rec in results.records("cpu_fp32_span_answers")
                 if rec["variant"] == variant and rec["facts"]["epochs"] == 150 and "dev" in rec["scores"]]
        rows.append(("span answers\n150 ep., 4×128", [span_stored(rec) for rec in spans],
                     [rec["scores"]["dev"]["accuracy"] for rec in spans]))
        reference_size = [flat(r) for r in results.records("cpu_fp32_reference_size") if r["variant"] == variant]
        for epochs in sorted({r["epochs"] for r in reference_size}):  # a group per budget, its seeds as dots
            runs = [r for r in reference_size if r["epochs"] == epochs]
            rows.append((f"span answers\n{epochs} ep., 4×256", [100 * r["stored"] / r["stored_of"] for r in runs],
                         [r["dev"]["accuracy"] for r in runs]))
        out[variant] = rows
    return out


def plot_stored(data: dict[str, list[tuple[str, list[float], list[float]]]]) -> Figure:
    """Two bars per recipe, the mean over seeds with each seed as a dot: stored (light) and answered (dark)."""
    fig, axes = plt.subplots(1, len(data), figsize=(14.5, 4.6), sharey=True, layout="constrained")
    for ax, (variant, rows) in zip(axes, data.items(), strict=True):
        for i, (_, stored, answered) in enumerate(rows):
            for offset, values, colour, ink, label in (
                    (-0.2, stored, "#9ecae1", "black", "stored: continues its wiki.txt line with the place"),
                    (0.2, answered, "#08519c", "white", "answered: dev exact match")):
                mean = statistics.mean(values)
                ax.bar(i + offset, mean, width=0.38, color=colour, label=label if i == 0 else None)
                ax.scatter([i + offset] * len(values), values, s=12, color="0.15", zorder=3, linewidths=0)
                ax.text(i + offset, 2, f"{mean:.0f}%", ha="center", va="bottom", fontsize=7.5, color=ink)
        ax.set_xticks(range(len(rows)), [label for label, _, _ in rows], fontsize=7)
        n = ", ".join(str(len(answered)) for _, _, answered in rows)
        ax.set_title(f"{variant} positions (seeds per recipe: {n})", fontsize=9)
        ax.grid(axis="y", alpha=0.25)
    axes[0].set_ylabel("% of dev people")
    axes[0].set_ylim(0, 100)
    fig.suptitle("Pretrained models store most dev birthplaces; the recipe decides how many they answer "
                 "(bars: mean; dots: seeds)", fontsize=10)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=8)
    return fig


def save(fig: Figure, path: Path) -> None:
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT, help="Where the accuracy-against-compute PNG goes.")
    parser.add_argument("--stored_out", type=Path, default=STORED_OUT, help="Where the stored-vs-answered PNG goes.")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    save(plot(*load()), args.out)
    save(plot_stored(stored_and_answered()), args.stored_out)
    print(f"wrote {args.out} and {args.stored_out}")


if __name__ == "__main__":
    main()

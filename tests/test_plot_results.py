"""The plots read at a glance (a few recipes, no label on another) and are drawn from results/*.json."""

from __future__ import annotations

import copy
import json
import shutil
import statistics

import numpy as np
import pytest
import yaml
from test_readme_commands import load as load_script

# run as a script, plot_results.py finds its sibling docs_tables.py on its own folder's path
plotting = load_script("experiments/plot_results.py")
CITED, RECITE_RECIPES, RESULTS = plotting.CITED, plotting.RECITE_RECIPES, plotting.RESULTS
load, main, plot, plot_stored, stored_and_answered = (plotting.load, plotting.main, plotting.plot, plotting.plot_stored,
                                                      plotting.stored_and_answered)


def _boxes(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    texts = [t for t in ax.texts if t.get_text()]
    return renderer, ax, texts, ax.get_legend()


def test_the_plot_shows_the_cited_recipes_with_nothing_overlapping():
    fig = plot(*load())
    renderer, ax, texts, legend = _boxes(fig)
    assert [t.get_text() for t in legend.get_texts()] == [label for _, label, _ in CITED]
    frame = legend.get_window_extent(renderer)
    axes = ax.get_window_extent(renderer)
    assert axes.x0 <= frame.x0 and frame.x1 <= axes.x1 and axes.y0 <= frame.y0 and frame.y1 <= axes.y1
    boxes = [t.get_window_extent(renderer) for t in texts] + [frame]
    for i, a in enumerate(boxes):
        assert fig.bbox.contains(a.x0, a.y0) and fig.bbox.contains(a.x1, a.y1)
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), f"labels overlap: {a} and {b}"
    points = np.concatenate([c.get_offsets() for c in ax.collections if len(c.get_offsets())]
                            + [line.get_xydata() for line in ax.lines if line.get_marker() == "D"])
    for x, y in ax.transData.transform(points):
        assert not any(box.contains(x, y) for box in boxes), f"a label covers the point at {x:.0f}, {y:.0f}"


def test_the_plot_follows_the_json(tmp_path):
    runs, anchors = load()
    moved = load()[0]  # its own copy of the records: one seed of the first cited recipe moves
    first = next(r for r in moved.records("accuracy_vs_compute_cpu") if r["facts"].get("seed_group") == CITED[0][0])
    first["scores"]["dev"]["accuracy"] += 3.0
    mean = [line.get_ydata()[0] for line in plot(runs, anchors).axes[0].lines if line.get_marker() == "D"]
    moved_mean = [line.get_ydata()[0] for line in plot(moved, anchors).axes[0].lines if line.get_marker() == "D"]
    assert moved_mean[0] == mean[0] + 1.0 and moved_mean[1:] == mean[1:]
    main(["--out", str(tmp_path / "plot.png"), "--stored_out", str(tmp_path / "stored.png")])  # docs/ untouched
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_stored_and_answered_reads_every_seed_from_the_json():
    """The README's figure: the faithful models' probe (of 449) and dev scores, the recitation recipe's probe (of
    471) and dev scores, seed by seed; its recipes are the ones the summary table of tables.yaml names."""
    FRONTIER_150, FRONTIER_150_LEARNED = plotting.FRONTIER_150, plotting.FRONTIER_150_LEARNED
    FRONTIER_RUNS, FRONTIER_LEARNED = plotting.FRONTIER_RUNS, plotting.FRONTIER_LEARNED
    named = yaml.safe_load((RESULTS.parent / "experiments" / "tables.yaml").read_text())["summary"]["records"]
    assert [named[alias]["names"] for alias in ("recite_76", "recite_150", "recite_76_learned", "recite_150_learned")] \
        == [FRONTIER_RUNS, FRONTIER_150, FRONTIER_LEARNED, FRONTIER_150_LEARNED]

    assert [names for _, names in RECITE_RECIPES["rope"]] == [FRONTIER_RUNS, FRONTIER_150]
    assert RECITE_RECIPES["learned"][1][1] == FRONTIER_150_LEARNED
    data = stored_and_answered()
    faithful = {rec["name"]: rec for rec in json.loads((RESULTS / "faithful_h100.json").read_text())["records"]}
    label, stored, answered = data["rope"][0]
    assert label.startswith("faithful")
    assert stored == [100 * faithful[f"rope, seed {s}, pretraining"]["facts"]["probe_recall"] / 449 for s in "012"]
    assert answered == [faithful[f"rope, seed {s}, reference, CPU"]["scores"]["dev"]["accuracy"] for s in "012"]
    assert data["rope"][1][1] == stored and data["rope"][1][2] == [
        faithful[f"rope, seed {s}, lr 2e-4, CPU"]["scores"]["dev"]["accuracy"] for s in "012"]
    fast = {rec["facts"]["part"]: rec for rec in  # rope only: one seed, then recite
            json.loads((RESULTS / "faithful_h100_fast_path.json").read_text())["records"]}
    label, stored, answered = data["rope"][2]
    assert label.startswith("faithful + recite") and not data["learned"][2][0].startswith("faithful")
    assert stored == [fast["pretraining"]["facts"]["probe_recall"]["recalled_percent"]]
    assert answered == [fast["recite"]["scores"]["dev"]["accuracy"]]
    label, stored, answered = data["rope"][4]
    assert "150" in label and len(stored) == len(answered) == 3
    assert all(0 < s <= 100 for s in stored) and answered[0] == 62.8  # cpu_fp32_recitation.json, seed 0
    spans = {rec["seeds"][0]: rec for rec in json.loads((RESULTS / "cpu_fp32_span_answers.json").read_text())[
        "records"] if rec["variant"] == "rope" and rec["facts"]["epochs"] == 150}
    label, stored, answered = data["rope"][5]
    assert label.startswith("span answers") and "4×128" in label
    assert answered == [spans[s]["scores"]["dev"]["accuracy"] for s in range(5)]
    made = spans[0]["facts"]["answer_from_recitation"]["run"]
    assert stored[0] == 100 * made["stored"] / made["stored_of"]
    reference = json.loads((RESULTS / "cpu_fp32_reference_size.json").read_text())["records"]
    label, stored, answered = data["rope"][6]
    rope = [r for r in reference if r["variant"] == "rope"]
    assert "4×256" in label and answered == [r["scores"]["dev"]["accuracy"] for r in rope]
    assert stored == [100 * r["facts"]["stored"] / r["facts"]["stored_of"] for r in rope]
    label, stored, answered = data["learned"][-1]  # learned positions at the reference size: its own group
    learned = [r for r in reference if r["variant"] == "learned"]
    assert "4×256" in label and answered == [r["scores"]["dev"]["accuracy"] for r in learned]
    assert stored == [100 * r["facts"]["stored"] / r["facts"]["stored_of"] for r in learned]


def test_a_reference_size_run_of_learned_positions_adds_its_group_and_another_budget_another(tmp_path):
    shutil.copytree(RESULTS, tmp_path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("predictions"))
    path = tmp_path / "cpu_fp32_reference_size.json"
    data = json.loads(path.read_text())

    def another(base: dict, name: str, epochs: int, correct: int, **facts: object) -> dict:
        """A record like `base` at another budget (its own name), answering `correct` of dev."""
        return dict(base, name=name, variant="learned", facts={**base["facts"], "epochs": epochs, **facts},
                    scores={**base["scores"], "dev": {"correct": correct, "total": 500, "accuracy": correct / 5}})

    data["records"].append(another(data["records"][0], "learned, 60 epochs", 60, 300, stored=400, stored_of=471))
    path.write_text(json.dumps(data))
    label, stored, answered = stored_and_answered(tmp_path)["learned"][-1]
    assert label == "span answers\n60 ep., 4×256" and stored == [100 * 400 / 471] and answered == [60.0]
    data["records"].append(another(data["records"][-1], "learned, 90 epochs", 90, 350))
    path.write_text(json.dumps(data))
    groups = stored_and_answered(tmp_path)["learned"][-2:]
    assert [(label, answered) for label, _, answered in groups] == [("span answers\n60 ep., 4×256", [60.0]),
                                                                    ("span answers\n90 ep., 4×256", [70.0])]


def test_the_stored_figure_draws_each_mean_and_follows_the_json(tmp_path):
    data = stored_and_answered()
    fig = plot_stored(data)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax, rows in zip(fig.axes, data.values(), strict=True):
        heights = [round(bar.get_height(), 6) for bar in ax.patches]
        expected = [round(statistics.mean(values), 6) for _, stored, answered in rows for values in (stored, answered)]
        assert sorted(heights) == sorted(expected)
        ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
        assert not any(a.overlaps(b) for i, a in enumerate(ticks) for b in ticks[i + 1:]), "tick labels overlap"
    legend = fig.legends[0].get_window_extent(renderer)
    assert not any(legend.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)
    moved = copy.deepcopy(data)
    moved["rope"][3][2][0] += 3.0  # seed 0 of the 150-epoch recipe answers 3 points more: its bar rises by 1
    before = [bar.get_height() for bar in plot_stored(data).axes[0].patches]
    after = [bar.get_height() for bar in plot_stored(moved).axes[0].patches]
    assert after[7] == pytest.approx(before[7] + 1.0) and after[:7] == before[:7]  # bars: stored, answered, ...
    main(["--out", str(tmp_path / "a.png"), "--stored_out", str(tmp_path / "s.png")])
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

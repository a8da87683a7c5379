"""docs/accuracy_vs_compute_cpu.png reads at a glance: a few recipes, a legend inside the axes, no label on another."""

from __future__ import annotations

import copy

import numpy as np

from scripts.plot_results import CITED, load, main, plot


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
    moved = copy.deepcopy(runs)
    first = next(g for g in moved["seed_groups"] if g["name"] == CITED[0][0])["ids"][0]
    next(r for r in moved["runs"] if r["id"] == first)["dev_accuracy"] += 3.0
    mean = [line.get_ydata()[0] for line in plot(runs, anchors).axes[0].lines if line.get_marker() == "D"]
    moved_mean = [line.get_ydata()[0] for line in plot(moved, anchors).axes[0].lines if line.get_marker() == "D"]
    assert moved_mean[0] == mean[0] + 1.0 and moved_mean[1:] == mean[1:]
    main(["--out", str(tmp_path / "plot.png")])
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

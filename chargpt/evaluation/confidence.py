"""How far the model's confidence in its answer can be trusted: selective accuracy, calibration, an abstention rule.

All functions take the records of one evaluation (`chargpt.evaluation.records`) and use the ones with a gold place. The
confidence of an answer is its probability under the model (``exp(logprob)``, the answer and its closing MASK;
for a reciting model, its recitation too); "answering when confident" means answering the questions whose
confidence is at least a threshold.

- `selection_curve`: coverage (share answered) and accuracy of the answered ones, at every threshold.
- `aurc`: area under the risk-coverage curve (Geifman & El-Yaniv, 2017): the mean error rate of the k most
  confident answers over k = 1..n; lower is better. A random ranking gives 1 - accuracy in expectation, a perfect
  one `aurc_optimal`. Tied confidences count as if answered in random order.
- `reliability` / `ece`: equal-width confidence bins; expected calibration error = sum over bins of
  (share of questions) x |accuracy - mean confidence|.
- `choose_threshold`: the lowest threshold whose answered questions reach a target precision (the most coverage
  that does), chosen on held-out *training* questions and then applied to dev with `apply_threshold`.
- `scored_grounded`: the points of a rule that also never answers an ungrounded answer (evaluate_birthplace.py
  --abstain_ungrounded): the curve, threshold and coverage functions take the number of all questions as `total`.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from chargpt.training import atomic_write_bytes

__all__ = [
    "CurvePoint",
    "answer_alone",
    "apply_threshold",
    "aurc",
    "aurc_optimal",
    "choose_threshold",
    "describe",
    "ece",
    "plot_coverage_accuracy",
    "plot_reliability",
    "reliability",
    "scored",
    "scored_grounded",
    "selection_curve",
    "summarize",
]

Scored = list[tuple[float, bool]]


def scored(records: Sequence[Mapping[str, Any]], key: str = "confidence") -> Scored:
    """(confidence, correct) of every record with a gold place and a score, confidence read from `key`."""
    return [(float(r[key]), bool(r["correct"])) for r in records if r["correct"] is not None and r.get(key) is not None]


def scored_grounded(records: Sequence[Mapping[str, Any]], key: str = "confidence") -> tuple[Scored, int]:
    """The points a rule that never answers an ungrounded answer can answer (those of `scored` whose answer is
    grounded or cannot be checked, as --abstain_ungrounded decides), and the number of all points: its coverage is
    over every question."""
    rows = [r for r in records if r["correct"] is not None and r.get(key) is not None]
    return [(float(r[key]), bool(r["correct"])) for r in rows if r.get("grounded") is not False], len(rows)


@dataclass(frozen=True)
class CurvePoint:
    """Answering the questions with confidence >= `threshold`: `answered` of `total`, `right` of them correct."""

    threshold: float
    answered: int
    right: int
    total: int

    @property
    def coverage(self) -> float:
        return self.answered / self.total if self.total else 0.0

    @property
    def precision(self) -> float:
        return self.right / self.answered if self.answered else 0.0

    def as_dict(self) -> dict[str, float]:
        return {"threshold": self.threshold, "answered": self.answered, "right": self.right, "total": self.total,
                "coverage": self.coverage, "precision": self.precision}


def _groups(points: Scored) -> list[tuple[float, int, int]]:
    """(confidence, questions, right) per distinct confidence, most confident first."""
    out = []
    for conf, group in groupby(sorted(points, key=lambda p: -p[0]), key=lambda p: p[0]):
        correct = [c for _, c in group]
        out.append((conf, len(correct), sum(correct)))
    return out


def selection_curve(points: Scored, total: int | None = None) -> list[CurvePoint]:
    """One point per distinct confidence, from the strictest threshold (fewest answers) to answering every point;
    coverage over `total` questions (default: the points)."""
    curve, answered, right = [], 0, 0
    for conf, size, good in _groups(points):
        answered, right = answered + size, right + good
        curve.append(CurvePoint(conf, answered, right, len(points) if total is None else total))
    return curve


def aurc(points: Scored) -> float:
    """Mean over k = 1..n of the error rate among the k most confident answers (ties in expected random order)."""
    total, errors_before, before = 0.0, 0, 0
    for _, size, good in _groups(points):
        wrong = size - good
        for k in range(before + 1, before + size + 1):
            total += (errors_before + (k - before) * wrong / size) / k
        errors_before, before = errors_before + wrong, before + size
    return total / len(points) if points else 0.0


def aurc_optimal(points: Scored) -> float:
    """The AURC of a perfect ranking (every right answer more confident than every wrong one)."""
    right = sum(c for _, c in points)
    return sum(max(0, k - right) / k for k in range(1, len(points) + 1)) / len(points) if points else 0.0


def reliability(points: Scored, n_bins: int = 10) -> list[dict[str, float]]:
    """Per equal-width confidence bin (the last one includes 1.0): questions, mean confidence, accuracy."""
    bins: list[list[tuple[float, bool]]] = [[] for _ in range(n_bins)]
    for conf, correct in points:
        bins[min(int(conf * n_bins), n_bins - 1)].append((conf, correct))
    return [{"low": i / n_bins, "high": (i + 1) / n_bins, "count": len(b),
             "confidence": sum(c for c, _ in b) / len(b) if b else 0.0,
             "accuracy": sum(ok for _, ok in b) / len(b) if b else 0.0} for i, b in enumerate(bins)]


def ece(points: Scored, n_bins: int = 10) -> float:
    """Expected calibration error over `n_bins` equal-width bins."""
    n = len(points)
    return sum(b["count"] / n * abs(b["accuracy"] - b["confidence"]) for b in reliability(points, n_bins)) if n else 0.0


def choose_threshold(points: Scored, target_precision: float, total: int | None = None) -> CurvePoint | None:
    """The threshold that answers the most questions while its answers reach `target_precision`; None if none does."""
    reaching = [p for p in selection_curve(points, total) if p.precision >= target_precision]
    return max(reaching, key=lambda p: p.answered) if reaching else None


def apply_threshold(points: Scored, threshold: float, total: int | None = None) -> CurvePoint:
    """Answer the questions with confidence >= `threshold`, abstain on the rest (and on the `total` - len(points)
    questions the points leave out)."""
    answered = [c for conf, c in points if conf >= threshold]
    return CurvePoint(threshold, len(answered), sum(answered), len(points) if total is None else total)


def _share(right: int, total: int) -> dict[str, float]:
    return {"right": right, "total": total, "accuracy": right / total if total else 0.0}


def summarize(records: Sequence[Mapping[str, Any]], n_bins: int = 10) -> dict[str, Any]:
    """Accuracy (of the model's answers, abstention aside), its grounded split, abstentions, and where the model
    gave scores, AURC (by confidence and by min_char_prob), its optimum, and ECE."""
    gold = [r for r in records if r["correct"] is not None]
    out: dict[str, Any] = {"questions": len(records), "with_gold": len(gold),
                           "answers": _share(sum(r["correct"] for r in gold), len(gold))}
    for flag in ("grounded", "place_in_wiki", "gold_grounded"):
        known = [r for r in gold if r.get(flag) is not None]
        if known:
            out[flag] = {"yes": _share(sum(r["correct"] for r in known if r[flag]), sum(bool(r[flag]) for r in known)),
                         "no": _share(sum(r["correct"] for r in known if not r[flag]),
                                      sum(not r[flag] for r in known))}
    if any(r["abstained"] for r in records):
        given = [r for r in gold if not r["abstained"]]
        out["abstained"] = sum(r["abstained"] for r in records)
        out["answered"] = {**_share(sum(r["correct"] for r in given), len(given)),
                           "coverage": len(given) / len(gold) if gold else 0.0}
    points = scored(records)
    if points:
        out.update(mean_confidence=sum(c for c, _ in points) / len(points), aurc=aurc(points),
                   aurc_optimal=aurc_optimal(points),
                   aurc_min_char_prob=aurc(scored(records, "min_char_prob")), ece=ece(points, n_bins), ece_bins=n_bins)
    alone = answer_alone(records)
    if alone:  # a reciting model: how the answer's own probability, recitation left out, would rank and calibrate
        out.update(aurc_answer_alone=aurc(alone), ece_answer_alone=ece(alone, n_bins))
    return out


def answer_alone(records: Sequence[Mapping[str, Any]]) -> Scored:
    """(probability of the answer given the recitation, correct) of a reciting model's records; [] for others."""
    return [(math.exp(r["logprob"] - r["recitation_logprob"]), bool(r["correct"])) for r in records
            if r["correct"] is not None and r.get("logprob") is not None and r.get("recitation_logprob") is not None]


def describe(summary: Mapping[str, Any]) -> list[str]:
    """The summary as the lines a script prints."""
    a = summary["answers"]
    lines = [f"answers: {a['right']}/{a['total']} right ({100 * a['accuracy']:.1f}%)"]
    if "grounded" in summary:
        yes, no = summary["grounded"]["yes"], summary["grounded"]["no"]
        lines.append(f"grounded (answer in the person's wiki.txt line): {yes['right']}/{yes['total']} right "
                     f"({100 * yes['accuracy']:.1f}%; {100 * yes['total'] / max(a['total'], 1):.1f}% of questions); "
                     f"not grounded: {no['right']}/{no['total']} ({100 * no['accuracy']:.1f}%)")
    if "aurc" in summary:
        lines.append(f"confidence: mean {summary['mean_confidence']:.3f} against accuracy {a['accuracy']:.3f}; "
                     f"AURC {summary['aurc']:.3f} (perfect ranking {summary['aurc_optimal']:.3f}, "
                     f"random {1 - a['accuracy']:.3f}; by min char prob {summary['aurc_min_char_prob']:.3f}), "
                     f"ECE {summary['ece']:.3f} ({summary['ece_bins']} bins)")
    if "aurc_answer_alone" in summary:
        lines.append(f"the answer's probability alone (recitation left out): AURC {summary['aurc_answer_alone']:.3f}, "
                     f"ECE {summary['ece_answer_alone']:.3f}")
    if "abstained" in summary:
        s = summary["answered"]
        lines.append(f"abstained on {summary['abstained']}; answered {s['total']} ({100 * s['coverage']:.1f}% "
                     f"coverage), {s['right']} right ({100 * s['accuracy']:.1f}% precision)")
    return lines


# ---------------------------------------------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------------------------------------------


def _save(fig, path: str | os.PathLike) -> None:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_coverage_accuracy(
    curves: Mapping[str, Scored], path: str | os.PathLike, threshold: float | None = None, title: str = "",
    totals: Mapping[str, int] | None = None,
) -> None:
    """Accuracy of the answered questions against the share answered, one line per set; the threshold's points. A
    set named in `totals` is a rule's answerable points out of that many questions (no AURC: it ranks a part)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (label, points) in enumerate(curves.items()):
        total = (totals or {}).get(label)
        curve = selection_curve(points, total)
        ax.plot([0, *(p.coverage for p in curve)], [curve[0].precision, *(p.precision for p in curve)],
                drawstyle="steps-pre", label=label if total is not None else f"{label} (AURC {aurc(points):.3f})")
        if threshold is not None:
            at = apply_threshold(points, threshold, total)
            ax.plot([at.coverage], [at.precision], "o", color=ax.lines[-1].get_color())
            ax.annotate(f"{100 * at.precision:.0f}% at {100 * at.coverage:.0f}%", (at.coverage, at.precision),
                        textcoords="offset points", xytext=(6, 6 if i % 2 == 0 else -14), fontsize=8)  # apart
    ax.set(xlabel="coverage (share of questions answered, most confident first)",
           ylabel="accuracy of the answered questions", xlim=(0, 1), ylim=(0, 1.02),
           title=title or "answering only when confident" + (f" (threshold {threshold:.3g})" if threshold else ""))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def plot_reliability(points: Scored, path: str | os.PathLike, n_bins: int = 10, label: str = "") -> None:
    """Reliability diagram of the questions `label` names: accuracy per confidence bin against the diagonal, with
    the bins' sizes."""
    plt = _pyplot()
    bins = reliability(points, n_bins)
    fig, ax = plt.subplots(figsize=(5, 4.5))
    width = 1 / n_bins
    filled = [b for b in bins if b["count"]]
    ax.bar([b["low"] for b in filled], [b["accuracy"] for b in filled], width=width, align="edge",
           edgecolor="black", alpha=0.7, label="accuracy")
    ax.plot([b["confidence"] for b in filled], [b["accuracy"] for b in filled], "k.", label="bin mean confidence")
    for b in filled:
        ax.annotate(str(b["count"]), (b["low"] + width / 2, b["accuracy"]), ha="center", va="bottom", fontsize=7)
    ax.plot([0, 1], [0, 1], "--", color="gray", label="perfect calibration")
    ax.set(xlabel="confidence (probability of the answer)", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1.05),
           title=f"{label + ': ' if label else ''}reliability (ECE {ece(points, n_bins):.3f}, {len(points)} questions)")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    _save(fig, path)

"""The README's demo table, made from `results/demo_cpu.json` (one `make demo` per world seed).

    python scripts/demo_table.py [results/demo_cpu.json]

A test checks that README.md holds exactly this table, so the demo's numbers live in the JSON alone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "results" / "demo_cpu.json"
# (label, run name prefix, which score): the rows a reader compares.
ROWS = [
    ("London baseline", "london baseline", "dev"),
    ("no pretraining (finetuned from scratch)", "no pretraining", "dev"),
    ("pretrained (rope), all dev people", "rope-causal", "dev"),
    ("… people read in 4 paraphrased sentences", "rope-causal", "paraphrased"),
    ("… people read in one sentence", "rope-causal", "single"),
]


def _score(run: dict, which: str) -> dict:
    return run["dev"] if which == "dev" else run["dev_groups"][which]


def demo_table(results: dict) -> str:
    """Markdown: one column per world seed (correct/total), then the mean accuracy; the last row the wall time."""
    seeds = sorted(results["worlds"], key=int)
    worlds = [results["worlds"][s] for s in seeds]
    lines = ["| dev exact match | " + " | ".join(f"world seed {s}" for s in seeds) + " | mean |",
             "| --- |" + " --- |" * (len(seeds) + 1)]
    for label, prefix, which in ROWS:
        scores = [_score(next(r for r in w["runs"] if r["name"].startswith(prefix)), which) for w in worlds]
        cells = [f"{s['accuracy']:.1f}% ({s['correct']}/{s['total']})" for s in scores]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {mean(s['accuracy'] for s in scores):.1f}% |")
    seconds = [w["demo_seconds"] for w in worlds]
    lines.append("| whole demo, wall time | " + " | ".join(f"{s} s" for s in seconds) + f" | {mean(seconds):.0f} s |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="?", default=str(DEFAULT_JSON), help="the demo's results JSON")
    args = parser.parse_args(argv)
    print(demo_table(json.loads(Path(args.results).read_text())))


if __name__ == "__main__":
    main()

"""The result tables of README.md and docs/*.md, generated from results/*.json so each number has one home.

    python experiments/docs_tables.py            # rewrite every table in place
    python experiments/docs_tables.py --check    # exit 1 naming each stale table (the tests run this check)
    python experiments/docs_tables.py --print demo

A table lives between `<!-- table:NAME -->` and `<!-- /table -->` in a Markdown file; NAME is a key of TABLES: a
query of tables.yaml over one study's run records (experiments/records.py), rendered by `make_table`, or, for the
tables that join studies or compute across rows, a function below. Edit the JSON (or the query, or the code), never
the table: a hand edit is overwritten, and `--check` fails until then.
"""

from __future__ import annotations

import argparse
import ast
import json
import operator
import re
import statistics
import string
import sys
from collections.abc import Callable
from pathlib import Path

import records as run_records
import yaml

from training.files import atomic_write_text
from training.presets import DEFAULTS as PRESET_DEFAULTS
from training.presets import EVALUATION as PRESET_EVALUATION
from training.presets import FROM_SCRATCH
from training.presets import NEEDS as PRESET_NEEDS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- table:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


class Results:
    """The JSON files of one results folder, read once each (tests pass a folder with edited copies)."""

    def __init__(self, folder: Path = RESULTS) -> None:
        self.folder = folder
        self._cache: dict[str, dict] = {}

    def __getitem__(self, stem: str) -> dict:
        if stem not in self._cache:
            path = self.folder / f"{stem}.json"
            try:
                self._cache[stem] = json.loads(path.read_text())
            except (OSError, ValueError) as err:
                raise SystemExit(f"{path}: cannot read it as JSON ({err})") from None
        return self._cache[stem]

    def records(self, stem: str) -> list[dict]:
        """The run records of results/STEM.json (experiments/records.py's shape), checked."""
        key = f"{stem}#records"
        if key not in self._cache:
            self._cache[key] = run_records.read(self.folder / f"{stem}.json")["records"]
        return self._cache[key]


# ---------------------------------------------------------------------------------------------------- formatting


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; a `|` inside a cell (a regex flag, say) is escaped so it cannot split the cell."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows])


def pct(accuracy: float) -> str:
    return f"{accuracy:.1f}%"


def score(dev: dict) -> str:
    """'30.8% (154/500)' from {'accuracy', 'correct', 'total'}."""
    return f"{dev['accuracy']:.1f}% ({dev['correct']}/{dev['total']})"


def spread(values: list[float], unit: str = "%") -> str:
    """'29.8 ± 1.1%': mean ± sample standard deviation (n - 1), or the value itself for one run."""
    if len(values) == 1:
        return f"{values[0]:.1f}{unit}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}{unit}"


def seeds_list(values: list[float]) -> str:
    return " / ".join(f"{v:.1f}" for v in values)


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def lr(value: float) -> str:
    """A learning rate as the flags spell it: 7.5e-5, 1e-4, 1.2e-3."""
    mantissa, exponent = f"{value:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def short_hardware(text: str) -> str:
    """A table-cell name for a JSON `hardware` string."""
    if "H100" in text:
        return "1 H100"
    if "AMD EPYC" in text:
        return "2 AMD EPYC cores, no AMX"
    if "without AMX" in text:
        return "2 CPU cores, no AMX"
    if "AMX" in text:
        return "2 CPU cores, AMX"
    return text


# ---------------------------------------------------------------------------------------------------- records

SPECS = Path(__file__).with_name("tables.yaml")
FORMATS: dict[str, Callable] = {  # a template's named formats: '{scores[dev]:score}', '{seconds[train]:min}'
    "pct": pct, "score": score, "lr": lr, "hw": short_hardware, "seeds": seeds_list, "spread": spread,
    "min": lambda seconds: f"{seconds / 60:.1f}", "percent": lambda share: f"{100 * share:.1f}",
    "share": lambda share: f"{100 * share:.0f}%",
    "if": lambda value: "" if value else when_not(),  # '(the default){facts[default]:if}': shown where it holds
    "spread_min": lambda seconds: spread([s / 60 for s in seconds], " min"),
    "steps": lambda at: " / ".join(sorted(at, key=int)),  # {step: loss}: '400 / 1000 / 2000'
    "losses": lambda at: " / ".join(f"{at[step]:.2f}" for step in sorted(at, key=int)),
    # over a group's list of values
    "mean_min": lambda seconds: f"{statistics.mean(seconds) / 60:.1f}", "max": lambda values: f"{max(values):.1f}",
    "each_min": lambda seconds: " / ".join(f"{s / 60:.1f}" for s in seconds),
    "range_min": lambda seconds: f"{min(seconds) / 60:.0f}–{max(seconds) / 60:.0f}",
    "count": lambda values: str(len(values)), "slash": lambda values: " / ".join(map(str, values)),
    "seed_ids": lambda seeds: ", ".join(str(s[0]) for s in seeds),  # [[0], [1]] as '0, 1'
    "lrs": lambda rates: ", ".join(lr(r) for r in sorted(set(rates))),
    "rates": lambda rates: ", ".join(sorted({lr(r) for r in rates})),  # sorted as text: '1.5e-4, 7.5e-5'
    "machines": lambda machines: f" ({len(set(machines))} machines)" if len(set(machines)) > 1 else "",
    "one": lambda values: "" if len(values) == 1 else when_not(),  # '...{runs[name]:one}': a group of one
    "several": lambda values: "" if len(set(values)) > 1 else when_not(),  # the members differ
    "all": lambda values: "" if all(values) else when_not(),
    "seed_names": lambda seeds: "" if seeds == [[s] for s in range(len(seeds))] else
    f", seeds {', '.join(str(s[0]) for s in seeds)}",  # named when they are not 0, 1, 2, ...
    "range": lambda values: f"{min(values):.0f}–{max(values):.0f}", "dots": " · ".join,
    "hours": lambda seconds: f"{seconds / 3600:.1f}",
    "hours_range": lambda seconds: f"{min(seconds) / 3600:.1f}–{max(seconds) / 3600:.1f}",
    "cores": lambda text: text.split(" cores")[0],  # '2 AMD EPYC' of '2 AMD EPYC cores under KVM ...'
    "family": lambda text: short_hardware(text) + (f", family {found[1]}" if (found := re.search(r"family (\d+)", text))
                                                    else ""),  # two EPYC generations: family 26 steps ~1.5x as fast
    "machine": lambda text: re.sub(r", (no )?AMX$", "", short_hardware(text)),  # '2 CPU cores', '1 H100'
}


def when_not() -> str:
    raise LookupError("the condition of an ':if' does not hold")  # the column's next template


class Group(dict):
    """The records of one row of a grouped table: '{scores[dev][accuracy]}' is the list over them, '{group}' the
    value they share, '{member[1][seeds]}' the second record's field."""

    def __init__(self, name: object, members: list) -> None:
        super().__init__(group=name)
        self.members = members

    def __missing__(self, key: str) -> list:
        return self.members if key == "member" else [member[key] for member in self.members]


def index(value: list | dict, key: str) -> object:
    return value[int(key)] if isinstance(value, list) else value[key]


class Template(string.Formatter):
    """str.format over a record with FORMATS; in a Group a field is the list over its members. `optional`: an empty
    field (missing, None, '' or []) raises LookupError, so that a column can fall back to its next template."""

    def __init__(self, optional: bool = False) -> None:
        self.optional = optional

    def get_field(self, field_name: str, args, kwargs) -> tuple:
        first, *rest = re.split(r"\]?\[", field_name.removesuffix("]"))  # 'scores[dev][accuracy]'
        each = isinstance(kwargs, Group) and first not in ("group", "member")
        try:
            value = kwargs[first]
            for key in rest:  # a list's index is a number, a dict's key a string ('{x[facts][by_epoch][160]}')
                if isinstance(value, Group) and not each and key not in ("group", "member"):
                    value, each = value[key], True  # a named group: the list over its members
                    continue
                value = [index(v, key) for v in value] if each else index(value, key)
        except (KeyError, IndexError, TypeError):  # TypeError: a field of a missing (None) record
            if self.optional:
                raise LookupError(field_name) from None
            raise
        if self.optional and (value is None or (isinstance(value, str | list) and not value)):
            raise LookupError(field_name)
        return value, first

    def format_field(self, value: object, spec: str) -> str:
        if spec.startswith("items"):  # '{x:items ms}': a dict as 'k1 v1 ms · k2 v2 ms'
            return " · ".join(f"{key} {item}{spec[5:]}" for key, item in value.items())
        if spec.startswith("list"):  # '{x:list.2f}': a list as '1.03, 1.39'
            return ", ".join(format(item, spec[4:]) for item in value)
        return FORMATS[spec](value) if spec in FORMATS else format(value, spec)


def cell(templates: str | list[str], row: dict) -> str:
    """The first of `templates` whose fields are all present and not empty (a zero is a value); the last one rendered
    as it is."""
    options = [templates] if isinstance(templates, str) else templates
    for template in options[:-1]:
        try:
            return Template(optional=True).vformat(template, (), row)
        except LookupError:
            continue
    return Template().vformat(options[-1], (), row)


def present(templates: str | list[str], row: dict) -> bool:
    """Whether one of `templates` has all its fields present and not empty."""
    for template in [templates] if isinstance(templates, str) else templates:
        try:
            Template(optional=True).vformat(template, (), row)
            return True
        except LookupError:
            continue
    return False


def make_table(rows: list[dict], columns: list[list]) -> str:
    """A Markdown table of `rows` (records, or Groups of them), one cell per (header, template or templates); a
    header with a field takes it from the first row."""
    return table([cell(header, rows[0]) if "{" in header else header for header, _ in columns],
                 [[cell(t, row) for _, t in columns] for row in rows])


OPERATIONS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              }
COMPARISONS = {ast.Eq: operator.eq, ast.Is: operator.is_, ast.IsNot: operator.is_not}


def compute(expression: str, row: dict) -> float:
    """A computed field of tables.yaml: + - * / over numbers and a record's fields ('facts["steps"] / 11'), == and
    `is None`, `a if test else b`, and f-strings."""
    def value(node: ast.AST) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return row[node.id]
        if isinstance(node, ast.Subscript):
            return value(node.value)[value(node.slice)]
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATIONS:
            return OPERATIONS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARISONS:
            return COMPARISONS[type(node.ops[0])](value(node.left), value(node.comparators[0]))
        if isinstance(node, ast.BoolOp):
            values = (value(v) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.IfExp):
            return value(node.body) if value(node.test) else value(node.orelse)
        if isinstance(node, ast.JoinedStr):  # f"{x / 60:.1f} + {y / 60:.1f}"
            return "".join(str(value(part)) for part in node.values)
        if isinstance(node, ast.FormattedValue):
            return format(value(node.value), value(node.format_spec) if node.format_spec else "")
        raise SystemExit(f"{SPECS.name}: {expression!r}: only + - * /, ==, is, if-else and f-strings over fields")
    return value(ast.parse(expression, mode="eval").body)


def flat(rec: dict) -> dict:
    """A record as one flat dict (its facts, NAME_seconds and scores beside name and hardware), for the tables
    that join studies in code."""
    return {"hardware": rec["hardware"], "variant": rec["variant"], "flags": rec["flags"],
            "seed": (rec["seeds"] or [None])[0], "seeds": rec["seeds"], **rec["facts"],
            "name": rec["facts"].get("display_name", rec["name"]),
            **{f"{stage}_seconds": s for stage, s in rec["seconds"].items()}, **rec["scores"]}


def frontier_runs(results: Results, stem: str) -> list[dict]:
    """The frontier runs of a study (a probes study's facts.part 'frontier'; every run of one without parts), flat."""
    return [flat(rec) for rec in results.records(stem) if rec["facts"].get("part", "frontier") == "frontier"]


def recitation_runs(results: Results) -> dict[str, dict]:
    """The `--recite True` finetunings of cpu_fp32_recitation.json by name, flat (its seed check left out)."""
    return {rec["name"]: flat(rec) for rec in results.records("cpu_fp32_recitation") if "part" not in rec["facts"]}


def selected(results: Results, query: dict) -> list[dict]:
    """The records of a query's study (or studies, one after another) whose facts (or variant) match its `where`."""
    studies = query["study"] if isinstance(query["study"], list) else [query["study"]]
    return [rec for stem in studies for rec in results.records(stem)
            if all((rec["variant"] if key == "variant" else rec["facts"].get(key)) in
                   (value if isinstance(value, list) else [value]) for key, value in query.get("where", {}).items())]


def named(results: Results, query: dict) -> dict | Group:
    """Records a literal-rows table names: `name` one record of the study, `names` a Group of them (in that order),
    else a Group of the records its `where` selects (and whose `has` template has its fields); `notes: true` the
    study's notes. `join: {as, study, by}` puts beside each record the record of that study its facts[by] names
    (None where it names none); `compute` adds fields to each."""
    if query.get("notes"):  # the study's own notes: its top-level keys but the records
        return {key: value for key, value in results[query["study"]].items() if key != "records"}
    found = selected(results, query)
    if "name" in query or "names" in query:
        by_name = {rec["name"]: rec for rec in found}
        found = [by_name[n] for n in ([query["name"]] if "name" in query else query["names"])]
    found = [rec for rec in found if "has" not in query or present(query["has"], rec)]
    if "join" in query:
        join = query["join"]
        other = {rec["name"]: rec for rec in results.records(join["study"])}
        found = [{**rec, join["as"]: other.get(rec["facts"].get(join["by"]))} for rec in found]
    found = [{**rec, **{key: compute(e, rec) for key, e in query.get("compute", {}).items()}} for rec in found]
    return found[0] if "name" in query else Group(None, found)


def literal_rows(results: Results, spec: dict, context: dict) -> list[list[str]]:
    """The rows of a literal-rows table. A row is a list of templates, or a dict: `with: {NAME: ALIAS}` binds names
    to the table's records for one row; `each: ALIAS or a query, as: NAME` makes a row per record of that group
    (`group_by: [TEMPLATES]`: per Group of the records that render them alike; `sort: [EXPRESSIONS]` over its fields
    orders them), NAME bound to it. Either takes `compute`, `if: TEMPLATES` (the row only where one of them has
    all its fields) and `cells: [...]`, or `rows: [[...], ...]` for several rows."""
    out = []
    for row in spec["rows"]:
        if isinstance(row, list):
            out.append([cell(t, context) for t in row])
            continue
        if "each" in row:
            group = named(results, row["each"]) if isinstance(row["each"], dict) else context[row["each"]]
            members = group.members
            if "group_by" in row:  # a Group per value of these templates, in order of appearance
                groups: dict = {}
                for rec in members:
                    groups.setdefault(tuple(cell(t, rec) for t in row["group_by"]), []).append(rec)
                members = [Group(key, recs) for key, recs in groups.items()]
            if "sort" in row:
                members = sorted(members, key=lambda m: tuple(compute(e, m) for e in row["sort"]))
            bindings = [{row["as"]: member} for member in members]
        else:
            bindings = [{key: context[alias] for key, alias in row["with"].items()}]
        for binding in bindings:
            bound = {**context, **binding}
            bound.update({key: compute(e, bound) for key, e in row.get("compute", {}).items()})
            if "if" not in row or present(row["if"], bound):
                out += [[cell(t, bound) for t in cells] for cells in row.get("rows", [row.get("cells")])]
    return out


def spec_table(name: str, spec: dict) -> Callable[[Results], str]:
    """A table of tables.yaml. A query: the records of its study (or studies) where facts match `where`, with
    `compute`d fields, optionally grouped by a fact (groups in order of appearance), one row each. Literal rows:
    `records` names records, `header` and `rows` are templates over those names. A field that no record has ends the
    run in one line naming the table."""
    def render_spec(results: Results) -> str:
        try:
            if "rows" in spec:
                context = {"best_shape": BEST_SHAPE} | {alias: named(results, query)
                                                          for alias, query in spec["records"].items()}
                context.update({key: compute(e, context) for key, e in spec.get("compute", {}).items()})
                return table([cell(h, context) for h in spec["header"]], literal_rows(results, spec, context))
            rows = [{**rec, **{key: compute(e, rec) for key, e in spec.get("compute", {}).items()}}
                    for rec in selected(results, spec)]
            if "group_by" in spec:
                groups: dict = {}
                for rec in rows:
                    if spec["group_by"] in rec["facts"]:
                        groups.setdefault(rec["facts"][spec["group_by"]], []).append(rec)
                rows = [Group(group, members) for group, members in groups.items()]
            return make_table(rows, spec["columns"])
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise SystemExit(f"{SPECS.name}: table {name}: {type(err).__name__}: {err}") from None
    return render_spec


# ---------------------------------------------------------------------------------------------------- lookups


def cpu_runs(results: Results, stem: str = "accuracy_vs_compute_cpu") -> dict[str, dict]:
    return {rec["name"]: rec for rec in results.records(stem)}


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


# ---------------------------------------------------------------------------------------------------- the demo


DEMO_ROWS = [  # (label, score of a world's record): the rows a reader compares
    ("London baseline", "london baseline"),
    ("no pretraining (finetuned from scratch)", "no pretraining (learned)"),
    ("pretrained (rope), all dev people", "rope-causal-seed0"),
    ("… people read in 4 paraphrased sentences", "rope-causal-seed0, paraphrased"),
    ("… people read in one sentence", "rope-causal-seed0, single"),
]


def demo(results: Results) -> str:
    """README: `make demo` on a CPU without AMX, the issue's setting (results/demo_cpu_no_amx.json)."""
    return _demo_table(demo_worlds(results, "demo_cpu_no_amx"))


def demo_amx(results: Results) -> str:
    """docs/results.md: the same worlds on the Xeon with AMX units, unused in fp32 (results/demo_cpu.json)."""
    return _demo_table(demo_worlds(results, "demo_cpu"))


def demo_worlds(results: Results, stem: str) -> list[dict]:
    """The `make demo` runs of a demo study, one record per world seed (its other records: side measurements)."""
    return [rec for rec in results.records(stem) if rec["facts"]["part"] == "worlds"]


def _demo_table(worlds: list[dict]) -> str:
    """One column per world seed of `make demo` (correct/total), then the mean; the last row the wall time."""
    rows = []
    for label, key in DEMO_ROWS:
        scores = [w["scores"][key] for w in worlds]
        rows.append([label, *(score(s) for s in scores), pct(statistics.mean(s["accuracy"] for s in scores))])
    wall = [w["seconds"]["demo"] for w in worlds]
    rows.append(["whole demo, wall time", *(f"{s} s" for s in wall), f"{statistics.mean(wall):.0f} s"])
    return table(["dev exact match", *(f"world seed {w['seeds'][0]}" for w in worlds), "mean"], rows)


def demo_mixing(results: Results) -> str:
    """The demo's rope recipe with questions mixed into pretraining (or first, alone): one row per recipe and group of
    dev people, one column per world seed it ran on."""
    runs = {(rec["recipe"], rec["seeds"][0]): rec for rec in results.records("demo_mixed_cpu")}
    seeds = sorted({seed for _, seed in runs})
    rows = []
    for recipe in dict.fromkeys(recipe for recipe, _ in runs):
        steps = next(rec for (name, _), rec in runs.items() if name == recipe)["facts"]["pretraining_steps"]
        for group, label in (("dev", "all dev"), ("paraphrased", "read in 4 paraphrases"),
                             ("single", "read in one sentence")):
            cells = [score(runs[recipe, s]["scores"][group]) if (recipe, s) in runs else "not run" for s in seeds]
            rows.append([f"{recipe} ({steps:,} steps)" if group == "dev" else "", label, *cells])
    return table(["pretraining", "dev people", *(f"world seed {s}" for s in seeds)], rows)


# ---------------------------------------------------------------------------------------------------- headline
# (tables.yaml's `summary` and `front`; the figures of plot_results.py draw the same runs)

# (layers, width, pretraining epochs) of --preset best: the model's default shape (training/arguments.py, not imported:
# it would load torch) and the preset's epochs; tables.yaml's `best_shape`
BEST_SHAPE = (4, 256, PRESET_DEFAULTS["pretrain"]["best"]["num_train_epochs"])
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


# ---------------------------------------------------------------------------------------------------- the H100


def preset_best_selection(results: Results) -> str:
    runs = [(rec["variant"], rec["seeds"][0], rec["facts"]) for rec in faithful(results, "selection")]
    rates = sorted({float(r) for _, _, run in runs for r in run["heldout_accuracy_by_lr"]})
    rows = []
    for variant, seed, run in sorted(runs, key=lambda t: (t[0], t[1])):
        by_rate = {float(k): v for k, v in run["heldout_accuracy_by_lr"].items()}
        cells = [("**" + pct(by_rate[r]) + "**" if r == run["chosen_learning_rate"] else pct(by_rate[r]))
                 if r in by_rate else "" for r in rates]
        rows.append([variant, seed, *cells, lr(run["chosen_learning_rate"])])
    shared = [r for r in rates if all(r in {float(k) for k in run["heldout_accuracy_by_lr"]} for *_, run in runs)]
    mean = {r: statistics.mean(v for *_, run in runs for k, v in run["heldout_accuracy_by_lr"].items() if float(k) == r)
            for r in shared}
    rows.append([f"mean of the {len(runs)}", "", *(pct(mean[r]) if r in mean else "" for r in rates), ""])
    return table(["variant", "seed", *(f"held-out at {lr(r)}" for r in rates), "chosen"], rows)


def _rate_cells(points: dict[float, float], chosen: float) -> str:
    """'3e-5: 8.0 · **1e-4: 17.0** · ...': held-out accuracy per rate, the chosen rate in bold."""
    cells = [(f"{lr(rate)}: {acc:.1f}", rate) for rate, acc in sorted(points.items())]
    return " · ".join(f"**{cell}**" if rate == chosen else cell for cell, rate in cells)


def heldout_selection_cpu(results: Results) -> str:
    rows = []
    for row in results.records("accuracy_vs_compute_cpu"):
        facts = row["facts"]
        if "selection_points" not in facts:
            continue
        points = {p["learning_rate"]: 100 * p["holdout_correct"] / p["holdout_total"]
                  for p in facts["selection_points"]}
        rows.append([f"{facts['position']}, {facts['pretrain_epochs']:g} epochs", row["seeds"][0],
                     _rate_cells(points, facts["finetune_learning_rate"]), score(row["scores"]["dev"]),
                     minutes(row["seconds"]["selection"])])
    for run in map(flat, results.records("finetune_lr_wide_grid_cpu")):
        name = run["name"]
        points = {float(k): v for k, v in run["heldout_accuracy_by_lr"].items()}
        rows.append(["learned, 220 epochs, wider grid (repeat)", name[-1],
                     _rate_cells(points, run["chosen_learning_rate"]), score(run["dev"]),
                     minutes(run["selection_seconds"])])
    return table(["model (`--preset cpu-fast`)", "seed", "held-out exact match (%) per finetuning lr, chosen in bold",
                  "dev at the chosen lr", "selection"], rows)


# ---------------------------------------------------------------------------------------------------- CPU, no AMX


def shape_frontier(results: Results) -> str:
    """The frontier question at about 28 minutes of pretraining: the reference shape against smaller ones."""
    ref = next(r for r in frontier_runs(results, "cpu_fp32_batch_probes") if r["batch_size"] == 32)
    ref = {**ref, **results["cpu_fp32_shape_probes"]["frontier"]["reference_shape"],
           "name": "4 layers, 256 dims (the reference shape)"}
    rows = []
    for run in [ref, *frontier_runs(results, "cpu_fp32_shape_probes")]:
        chosen = run.get("selection")
        rows.append([run["name"], f"{run['parameters']:,}", f"{run['epochs']:.0f}",
                     f"{run['pretrain_seconds'] / 60:.1f} min", f"{run['final_pretrain_loss']:.2f}",
                     f"{run['probe_recall']} of {run['probe_found']}",
                     f"**{score(run['dev'])}**", f"{run['grounded_correct']} of {run['grounded_predictions']}",
                     f"{score(chosen['dev'])} (lr {chosen['chosen_learning_rate']:g})" if chosen else "—",
                     score(run["dev_without_finetuning"]) if "dev_without_finetuning" in run else "—"])
    return table(["model (rope, fp32, batch 32)", "parameters", "epochs", "pretraining", "final loss",
                  "`probe_recall.py`", "dev (lr 7.5e-5)", "grounded answers right", "dev, rate chosen on held-out",
                  "dev, not finetuned"], rows)


def mixed_frontier(results: Results) -> str:
    """Mixed training on the 4-layer 128-dim model at the frontier's budget: the questions' share and place in the
    epoch, name windows, and one longer run with its 30-minute snapshot."""
    base = next(r for r in frontier_runs(results, "cpu_fp32_shape_probes")
                if r["name"] == "4 layers, 128 dims, mixed training")
    base = {**base, "name": "each question once per epoch, spread evenly (the table above)", "flags": ""}
    entries = []
    for run in [base, *frontier_runs(results, "cpu_fp32_mixed_frontier")]:
        entries.append(run)
        if snap := run.get("snapshot"):
            entries.append({**snap, "name": f"… its {snap['epochs']:.0f}-epoch snapshot (cosine mid-way)", "flags": ""})
    rows = []
    for entry in entries:
        plain = entry["dev_without_finetuning"]
        recited = " (reciting)" if entry.get("answer_format") == "recite" else ""
        rows.append([entry["name"], f"`{entry['flags']}`" if entry["flags"] else "",
                     f"{entry['epochs']:.0f}", f"{entry['pretrain_seconds'] / 60:.1f} min",
                     f"{entry['probe_recall']} of {entry['probe_found']}", f"**{score(plain)}**{recited}",
                     f"{plain['grounded_correct']} of {plain['grounded_predictions']}", score(entry["dev"])])
    return table(["4 layers, 128 dims, rope, fp32 unless named: training questions in pretraining", "flags beyond "
                  "`--mixed_qa_corpus_path`", "epochs", "pretraining", "`probe_recall.py`", "dev, not finetuned",
                  "its grounded answers right", "dev, finetuned (lr 7.5e-5)"], rows)


def recitation_source(results: Results, run: dict) -> dict:
    """The pretraining record a recitation run finetuned: a run of its `pretrained_results` file (the mixed-frontier
    runs by default, else the shape-probe frontier runs), or that run's snapshot."""
    stem = run.get("pretrained_results", "cpu_fp32_mixed_frontier")
    runs = frontier_runs(results, stem)
    source = next(r for r in runs if r["name"] == run["pretrained_run"])
    return source["snapshot"] if run.get("snapshot") else source


def recitation(results: Results) -> str:
    """Recite, then answer (`train_finetune.py --recite True`) on pretrained models of the frontier tables: each
    row's pretraining numbers and direct answers come from there, the recitation rows from their own file."""
    rows = []
    for run in recitation_runs(results).values():
        source = recitation_source(results, run)
        direct = None if source.get("answer_format") == "recite" else source.get("dev_without_finetuning")
        rows.append([run["name"], f"{source['pretrain_seconds'] / 60:.1f} min",
                     f"{source['probe_recall']} of {source['probe_found']}", score(direct) if direct else "—",
                     score(source["dev"]), f"**{score(run['dev'])}**",
                     f"{run['recitations_with_gold']} of {run['dev']['total']}",
                     f"{lr(run['learning_rate'])} ({run['rate_chosen_by']})",
                     f"{run['finetune_seconds'] / 60:.1f} min"])
    return table(["pretrained model (4 layers, 128 dims, rope, fp32 unless named)", "pretraining",
                  "`probe_recall.py`", "dev, asked directly", "dev, finetuned (lr 7.5e-5)",
                  "dev, recite then answer", "recitations holding the gold place", "finetuning rate", "finetuning"],
                 rows)


def recitation_rates(results: Results) -> str:
    """The held-out score of each `--recite True` finetuning rate tried on each model (select_finetune_lr.py)."""
    runs = list(recitation_runs(results).values())
    rates = sorted({float(rate) for run in runs for rate in run["heldout_by_learning_rate"]})
    rows = []
    for run in runs:
        held = {float(rate): value for rate, value in run["heldout_by_learning_rate"].items()}
        rows.append([run["name"], *(score(held[rate]) if rate in held else "—" for rate in rates),
                     lr(run["learning_rate"])])
    return table(["model (as above)", *(f"lr {lr(rate)}" for rate in rates), "chosen"], rows)


# ---------------------------------------------------------------------------------------------------- performance


def model_steps(facts: dict) -> float:
    """A bench_gpu.py record's steps per second times the models each step trains (a `--seeds` variant: several)."""
    return facts["steps_per_s"] * facts.get("members", 1)


def bench_runs(results: Results, stem: str, key: str = "call") -> list[list[dict]]:
    """The records of a bench_gpu.py study, one list per device call (or CPU run: `key`), in the order run."""
    runs: dict[int, list[dict]] = {}
    for rec in results.records(stem):
        if key in rec["facts"]:
            runs.setdefault(rec["facts"][key], []).append(rec)
    return list(runs.values())


# results/*.json of experiments/benchmarks/bench_gpu.py, in the order run
GPU_BENCHES = ("bench_gpu_h200", "bench_gpu_h100")


def bench_gpu(results: Results) -> str:
    """Every device call's benchmark rows, each call's machine named: variants compare within a call only (the fast
    path ran in every call)."""
    rows = []
    for number, call in enumerate((call for stem in GPU_BENCHES for call in bench_runs(results, stem)), 1):
        first = model_steps(call[0]["facts"])
        rows += [[str(number), r["device"].removeprefix("NVIDIA ").split(" ")[0], f"`{r['bench_variant']}`",
                  f"{r['steps_per_s']:.2f}", f"{r['useful_tokens_per_s']:,}", f"×{model_steps(r) / first:.2f}",
                  f"{r['gpu_utilization_percent']:.0f}%", f"{r['loss_tail_mean']:.4f} ± {r['loss_tail_std']:.4f}",
                  f"{r['projected_full_pretraining_s']:.0f} s"] for r in (rec["facts"] for rec in call)]
    return table(["call", "GPU", "variant", "steps/s", "useful tokens/s", "vs the call's first (per model)",
                  "GPU util.", "loss (last tenth)", "650 epochs (projected)"], rows)


def gpu_flops(results: Results) -> str:
    """The H100's step as arithmetic: a step's FLOPs (counted on a CPU, in proportion to its packed rows) times the
    steps per second, against the card's peaks; then the rates issue 23's goals would need: one faithful pretraining
    in 60 s, and `make reproduce SEEDS=0,1,2`'s nine pretrainings (three seeds of learned, rope and synthesizer) in
    its 10 minutes, with nothing else."""
    count, peaks = step_ops_runs(results, "flops"), results["step_ops_cpu"]["gpu_peaks"]["H100 SXM"]

    def variant(run: dict) -> str:
        """rope, synthesizer, or learned (the default positions and attention: neither flag)."""
        return next((name for name in ("rope", "synthesizer") if name in run["flags"]), "learned")

    def per_row(name: str) -> float:
        """GFLOP a packed row of the counted run of variant `name`."""
        (run,) = [r for r in count if variant(r) == name]
        return run["total_gflop_per_step"] / run["packed_rows"]

    rope, learned, synthesizer = per_row("rope"), per_row("learned"), per_row("synthesizer")
    bench = next(rec for rec in results.records("bench_gpu_h100") if rec["facts"]["bench_variant"] ==
                 "fast_compiled_all")["facts"]
    made = fast_path(results, "pretraining")
    goal, reproduce = made["steps"] / 60, 9 * made["steps"] / 600

    def row(what: str, gflop_row: float, rows: float, steps_per_s: float) -> list[str]:
        tflops = gflop_row * rows * steps_per_s / 1e3
        shares = [f"{100 * tflops / peaks[k]:.0f}%" for k in ("fp32_tflops", "tf32_tensor_dense_tflops")]
        return [what, f"{rows:g}", f"{gflop_row * rows:.1f}", f"{steps_per_s:.1f}", f"{tflops:.1f}", *shares]

    rows = made["packed_rows"]
    used = next(rec["facts"] for rec in results.records("bench_fast_path_cpu") if rec["facts"].get("batch_size") == 128)
    return table(["one H100 SXM, the faithful step", "packed rows", "GFLOP a step", "steps/s", "TFLOP/s",
                  f"of the FP32 peak ({peaks['fp32_tflops']:g})",
                  f"of the dense TF32 peak ({peaks['tf32_tensor_dense_tflops']:g})"],
                 [row(f"`fast_compiled_all` (rope), the benchmark's {bench['steps_timed']} timed steps", rope,
                      bench.get("rows_per_step_mean", rows), bench["steps_per_s"]),  # rows: recorded since 2026-11-27
                  row(f"the whole rope pretraining, {made['steps']:,} steps in {made['loop_seconds']} s", rope, rows,
                      made["steps"] / made["loop_seconds"]),
                  row("goal: those steps in 60 s", rope, rows, goal),
                  row("goal, in the rows the batches needed at most", rope, made["packed_rows_needed_at_most"], goal),
                  row("goal, with no padded row at all (the rows a batch fills on average, 300 CPU-drawn batches)",
                      rope, used["mean_rows_used"], goal),
                  row("goal: `make reproduce SEEDS=0,1,2`'s nine pretrainings in 10 min, nothing else (the mean step "
                      "of learned, rope and synthesizer)", (learned + rope + synthesizer) / 3, rows, reproduce)])


def bench_fast_path_cpu(results: Results) -> str:
    """Today's loop against the fast path on a CPU, run by run (rows compare within a run only); a run on another
    CPU than the file's names its own."""
    rows = []
    for number, run in enumerate(bench_runs(results, "bench_fast_path_cpu", "run"), 1):
        first = run[0]["facts"]["steps_per_s"]
        rows += [[str(number), r["cpu"], r["code"].split(":")[0].split(",")[0], f"`{r['bench_variant']}`",
                  str(r["steps"]), f"{r['steps_per_s']:.2f}", f"{r['useful_tokens_per_s']:,}",
                  f"×{r['steps_per_s'] / first:.2f}", f"{r['loss_tail_mean']:.4f} ± {r['loss_tail_std']:.4f}"]
                 for r in (rec["facts"] for rec in run)]
    return table(["run", "CPU", "commit", "variant", "steps", "steps/s", "useful tokens/s", "vs the run's first",
                  "loss (last tenth)"], rows)


def step_ops_runs(results: Results, part: str) -> list[dict]:
    """step_ops_cpu.json's runs of one kind, flat: 'ops' (operations per step at a small width) or 'flops' (at the
    faithful width)."""
    return [flat(rec) for rec in results.records("step_ops_cpu") if rec["facts"]["part"] == part]


def step_ops(results: Results) -> str:
    """Operations per fast-path step by phase, one column per run (`--optim`)."""
    runs = step_ops_runs(results, "ops")
    phases = list(runs[0]["aten_ops_per_step"])
    return table(["phase", *(f"`{r['flags']}`" for r in runs)],
                 [[phase, *(f"{r['aten_ops_per_step'].get(phase, 0):g}" for r in runs)] for phase in phases]
                 + [["**total**", *(f"**{r['total_per_step']:g}**" for r in runs)]])


def bench_seeds_cpu(results: Results) -> str:
    """Three seeds three ways on a CPU: separate runs in a row, `--seeds`, stacked; wall time against the first."""
    way: dict[str, list[dict]] = {}
    for rec in results.records("bench_seeds_cpu"):
        way.setdefault(rec["facts"]["way"], []).append(flat(rec))
    separate = sum(run["wall_seconds"] for run in way["separate"])
    (together,), (twice,) = way["together"], way["same seed twice"]
    ways = [("separate runs, one after another", separate, 0.0),
            (f"`--seeds {','.join(map(str, together['seeds']))}` (one process, members in turn)",
             together["wall_seconds"], together["max_weight_difference"])]
    ways += [("`--stack_seeds True`" + (f" `{run['extra']}`" if run["extra"] else ""), run["wall_seconds"],
              run["max_weight_difference"]) for run in way.get("stacked", [])]
    twice = twice["max_weight_difference"]
    return table(["three seeds", "wall", "vs separate runs", "largest weight difference"],
                 [[what, f"{wall:.1f} s", f"×{separate / wall:.2f}",
                   f"— (one seed run twice: {twice:.3g})" if not i else f"{diff:.3g}"]
                  for i, (what, wall, diff) in enumerate(ways)])


# ---------------------------------------------------------------------------------------------------- confidence


def _ranking(summary: dict) -> list[str]:
    if "aurc" not in summary:
        return ["—", "—", "—"]
    random = 1 - summary["answers"]["accuracy"] / 100
    return [f"{summary['mean_confidence']:.2f}",
            f"{summary['aurc']:.3f} ({summary['aurc_optimal']:.3f}, {random:.3f})", f"{summary['ece']:.3f}"]


def confidence_span(results: Results) -> str:
    """docs/confidence.md: a span-corruption model at about the faithful models' accuracy, trained on a CPU as a
    stand-in for them: each held-out model (one per finetuning rate) and the final model, how well the answer's
    probability ranks and calibrates, grounding, and the threshold chosen on the 400 held-out questions."""
    return _confidence_stand_in(dict(span_groups(results)[SPAN_290])[0])


def confidence_span_learned(results: Results) -> str:
    """docs/confidence.md: the same measurements for the learned-positions span-corruption model (220 epochs; its
    held-out models live in span_recite_epochs_cpu.json beside its final and reciting models)."""
    return _confidence_stand_in(dict(span_groups(results)[("learned", 220)])[0])


def _confidence_stand_in(run: dict) -> str:
    """One stand-in's confidence table: the held-out models by rate, the final model at its rate's threshold, and
    the reciting models (held-out, then final) when measured."""
    rates, final, recite = run["confidence"]["rates"], run["final"], run.get("recite")
    def at(point: dict | None) -> str:
        if point is None:
            return "none reaches 80%"
        return "none answered" if not point["answered"] else f"{pct(point['precision'])} / {pct(point['coverage'])}"

    def grounded_only(dev: dict) -> str:
        yes = dev["grounded"]["yes"]
        return f"{pct(yes['accuracy'])} / {pct(100 * yes['total'] / dev['with_gold'])}"

    def threshold(run: dict) -> str:
        value = run["threshold"]
        return "—" if value is None else f"{value:.3f}" if value >= 1e-3 else f"{value:.1e}"

    rows = []
    for rate, run in sorted(rates.items(), key=lambda item: float(item[0])):
        rows.append([f"held-out model, lr {lr(float(rate))}", pct(run["holdout"]["answers"]["accuracy"]),
                     pct(run["dev"]["answers"]["accuracy"]), *_ranking(run["dev"])[1:], grounded_only(run["dev"]),
                     threshold(run), at(run["chosen"]), f"**{at(run['dev_at_threshold'])}**",
                     at(run["grounded_only_rule"]["dev_at_threshold"])])
    rate = final["learning_rate"]
    same = rates[str(rate)]
    rows.append([f"final model (all 2,000 questions), lr {lr(rate)}, at that rate's threshold", "—",
                 pct(final["dev"]["answers"]["accuracy"]), *_ranking(final["dev"])[1:], grounded_only(final["dev"]),
                 threshold(same), "—",
                 f"**{at(same['final_dev_at_threshold'])}**", "—"])
    if recite is not None:  # the same pretrained model finetuned to recite, answering with spans of the recitation
        run = recite
        rows.append([f"held-out model, **`--recite True`**, span answers, lr {lr(run['chosen_learning_rate'])}",
                     pct(run["holdout"]["answers"]["accuracy"]), pct(run["dev"]["answers"]["accuracy"]),
                     *_ranking(run["dev"])[1:], grounded_only(run["dev"]), threshold(run), at(run["chosen"]),
                     f"**{at(run['dev_at_threshold'])}**", at(run["grounded_only_rule"]["dev_at_threshold"])])
        if "final" in run:
            final = run["final"]
            rows.append([f"final model, **`--recite True`** (all 2,000 questions), lr {lr(final['learning_rate'])}, "
                         "at the held-out threshold", "—", pct(final["dev"]["answers"]["accuracy"]),
                         *_ranking(final["dev"])[1:], grounded_only(final["dev"]), threshold(run), "—",
                         f"**{at(final['dev_at_threshold'])}**", "—"])
    return table(["model", "held-out accuracy (400)", "dev accuracy", "AURC (perfect, random)", "ECE",
                  "grounded answers only: precision / coverage", "threshold", "held-out precision / coverage",
                  "dev precision / coverage", "grounded and above the grounded threshold: dev precision / coverage"],
                 rows)


SPAN_290 = ("rope", 290)  # confidence_cpu_span.json's group: the README's span-corruption-then-recite row


SPAN_SCORES = (("dev, reference finetuning", ("final", "dev")), ("holdout", ("recite", "holdout")),
               ("dev, held-out model", ("recite", "dev")), ("dev", ("recite", "final", "dev")))


def span_run(rec: dict) -> dict:
    """A span-corruption-then-recite record as the nested run its tables read: each score back under its stage as
    `answers` ({right, total, accuracy}), the pretraining's seconds and the machine beside the other figures."""
    run = {**json.loads(json.dumps(rec["facts"])), "hardware": rec["hardware"]}
    for key, path in SPAN_SCORES:
        node = run
        for stage in path:
            node = node[stage]
        got = rec["scores"][key]
        node["answers"] = {"right": got["correct"], "total": got["total"], "accuracy": got["accuracy"]}
    run["pretraining"]["pretrain_seconds"] = rec["seconds"]["pretrain"]
    return run


def span_groups(results: Results) -> dict[tuple[str, int], list[tuple[int, dict]]]:
    """Span corruption then recite on 2 CPU cores, by (positions, epochs) in order of appearance (rope at 290 epochs,
    confidence_cpu_span.json, first; then span_recite_epochs_cpu.json), each group's seeds in order."""
    groups: dict[tuple[str, int], list[tuple[int, dict]]] = {}
    for rec in (rec for stem in ("confidence_cpu_span", "span_recite_epochs_cpu") for rec in results.records(stem)):
        groups.setdefault((rec["variant"], rec["facts"]["epochs"]), []).append((rec["seeds"][0], span_run(rec)))
    return {key: sorted(runs, key=lambda pair: pair[0]) for key, runs in groups.items()}


# ---------------------------------------------------------------------------------------------------- misses


def miss_table(study: dict) -> str:
    """experiments/miss_split.py's split: per kind of question (a score of each model's record), how many there are
    and each model's right answers, then each model's misses by what it answered."""
    models = study["records"]
    rows = []
    for kind in ["all", *study["kinds"]]:
        counts = [m["scores"][kind] for m in models]
        shares = [100 * c["correct"] / c["total"] if c["total"] else 0.0 for c in counts]
        rows.append([kind, counts[0]["total"], *(f"{c['correct']} ({s:.1f}%)" for c, s in zip(counts, shares,
                                                                                                strict=True)),
                     pct(statistics.mean(shares))])
    for how in study["answers"]:
        answered = [m["facts"]["misses_answered"][how] for m in models]
        rows.append([f"misses answered with {how}", "", *answered, f"{statistics.mean(answered):.1f}"])
    return table(["dev questions", "of 500", *(m["name"] for m in models), "mean right"], rows)


def miss_split(results: Results) -> str:
    results.records("miss_split_cpu")  # checked
    return miss_table(results["miss_split_cpu"])


def presets(results: Results) -> str:
    """What each `--preset` sets, per stage and in the evaluation, and what it needs from you, read from its file in
    recipes/ (the home of these values; docs/usage.md links them)."""
    del results  # the values are recipe files, not measurements

    def flags(values: dict) -> str:
        return "; ".join(f"`--{k} {v}`" for k, v in values.items())

    def cell(stage: str, name: str) -> str:
        needs = PRESET_NEEDS.get((stage, name), {})
        return "; ".join(filter(None, [flags(PRESET_DEFAULTS[stage][name]) or "as `reference`",
                                       *(f"needs `--{k}` ({why})" for k, why in needs.items())]))

    names = list(PRESET_DEFAULTS["pretrain"])
    rows = [[f"[`{name}`](../recipes/{name}.yaml)", *(cell(stage, name) for stage in PRESET_DEFAULTS),
             flags(PRESET_EVALUATION.get(name, {})) or "as the assignment"] for name in names]
    rows.insert(1, ["finetuning from scratch (no `--model_name_or_path`)", "—",
                    f"{flags(FROM_SCRATCH)} over `reference`", "—"])
    return table(["preset", *PRESET_DEFAULTS, "evaluate"], rows)


# ---------------------------------------------------------------------------------------------------- machinery


CODED = (  # tables too particular for a query of tables.yaml: they join studies or compute across them
    demo, demo_amx, demo_mixing, preset_best_selection, heldout_selection_cpu, shape_frontier, mixed_frontier,
    recitation, recitation_rates, bench_gpu, gpu_flops, bench_fast_path_cpu, step_ops, bench_seeds_cpu,
    confidence_span, confidence_span_learned, presets, miss_split,
)
TABLES: dict[str, Callable[[Results], str]] = {f.__name__.replace("_", "-"): f for f in CODED} | {
    name: spec_table(name, spec) for name, spec in yaml.safe_load(SPECS.read_text()).items()}


def render(text: str, results: Results, path: Path | str = "<text>") -> str:
    """`text` with every table block regenerated; an unknown table name ends the run naming file and line."""
    def replace(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            line = text.count("\n", 0, match.start()) + 1
            raise SystemExit(f"{path}:{line}: unknown table {name!r}; known: {', '.join(TABLES)}")
        return f"{match[1]}{TABLES[name](results)}\n{match[4]}"

    return BLOCK.sub(replace, text)


def stale(paths: list[Path], results: Results) -> list[str]:
    """'file: table NAME' for each block whose text differs from what the JSON gives."""
    found = []
    for path in paths:
        text = path.read_text()
        fresh = render(text, results, path)
        old = {m["name"]: m["body"] for m in BLOCK.finditer(text)}
        new = {m["name"]: m["body"] for m in BLOCK.finditer(fresh)}
        found += [f"{path.relative_to(ROOT)}: table {name}" for name in old if old[name] != new[name]]
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="Change nothing; exit 1 if a table is stale.")
    parser.add_argument("--print", dest="name", choices=sorted(TABLES), help="Print one table and exit.")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    results = Results()
    if args.name:
        print(TABLES[args.name](results))
        return
    if args.check:
        found = stale(DOCS, results)
        if found:
            sys.exit("stale tables (regenerate: python experiments/docs_tables.py):\n  " + "\n  ".join(found))
        return
    for path in DOCS:
        text = path.read_text()
        fresh = render(text, results, path)
        if fresh != text:
            atomic_write_text(path, fresh)
            print(f"rewrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""The result tables of README.md and docs/*.md, generated from results/*.json so each number has one home.

    python experiments/docs_tables.py            # rewrite every table in place
    python experiments/docs_tables.py --check    # exit 1 naming each stale table (the tests run this check)
    python experiments/docs_tables.py --print demo

A table lives between `<!-- table:NAME -->` and `<!-- /table -->` in a Markdown file; NAME is a table of
tables.yaml: a query over one study's run records (experiments/records.py), rendered by `make_table`, or literal rows
over named records, with computed fields where a table joins studies or computes across rows. Edit the JSON (or the
table's spec), never the table: a hand edit is overwritten, and `--check` fails until then.
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
from collections.abc import Callable, Iterator
from pathlib import Path

import records as run_records
import yaml

from chargpt.training.files import atomic_write_text
from chargpt.training.presets import BY_POSITION as PRESET_BY_POSITION
from chargpt.training.presets import DEFAULTS as PRESET_DEFAULTS
from chargpt.training.presets import EVALUATION as PRESET_EVALUATION
from chargpt.training.presets import FROM_SCRATCH
from chargpt.training.presets import NEEDS as PRESET_NEEDS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- table:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


class Results:
    """The JSON files of one results folder, read once each (tests pass a folder with edited copies)."""

    def __init__(self, folder: Path = RESULTS, studies: dict[str, dict] | None = None) -> None:
        self.folder = folder
        self._cache: dict[str, dict] = {}
        for stem, study in (studies or {}).items():  # studies not written yet (checked by whoever made them)
            self._cache[stem], self._cache[f"{stem}#records"] = study, study["records"]

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
    "pct": pct, "score": score, "lr": lr, "hw": short_hardware, "spread": spread,
    "seeds": lambda values: " / ".join(f"{v:.1f}" for v in values),
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
    "block": lambda size: "" if size == 160 else f", block {size}",  # best-fast's rows at another block than best's
    "cpu": lambda text: "2 Intel Xeon cores" if "2 cores of an Intel Xeon" in text else FORMATS["machine"](text),
    "cpus": lambda texts: " / ".join(dict.fromkeys(FORMATS["cpu"](t) for t in texts)),  # each machine, once
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
    return value[int(key)] if isinstance(value, list | tuple) else value[key]


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
              ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
              ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
              ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b, ast.Not: operator.not_,
              ast.USub: operator.neg}
FUNCTIONS = FORMATS | {f.__name__: f for f in (sorted, set, len, sum, min, max, float, int, str, list, dict, zip,
                                                enumerate, any, all, statistics.mean, statistics.stdev)} | {
    "flat": lambda rec: flat(rec)}
METHODS = {"items", "keys", "values", "get", "split", "removeprefix", "startswith", "members", "fromkeys",
           "join"}


def compute(expression: str, row: dict) -> object:
    """A computed field of tables.yaml: a Python expression over a record's fields (or the names bound to a row),
    limited to operators, comparisons, if-else, f-strings, comprehensions, lambdas, the FORMATS and a few builtins
    (FUNCTIONS), and the dict and str methods of METHODS; nothing else is evaluated."""
    def value(node: ast.AST, scope: dict) -> object:
        kind = type(node)
        if kind is ast.Constant:
            return node.value
        if kind is ast.Name:  # a comprehension's or lambda's name, a field, or a function
            if node.id in scope or (node.id in FUNCTIONS and node.id not in row):
                return scope[node.id] if node.id in scope else FUNCTIONS[node.id]
            return row[node.id]
        if kind in (ast.Tuple, ast.List):
            items = [value(e, scope) for e in node.elts]
            return tuple(items) if kind is ast.Tuple else items
        if kind is ast.Dict:  # {'name': ..., **run}
            parts = [value(item, scope) if key is None else {value(key, scope): value(item, scope)}
                     for key, item in zip(node.keys, node.values, strict=True)]
            return {k: v for part in parts for k, v in part.items()}
        if kind is ast.Subscript:
            key = node.slice
            if type(key) is ast.Slice:
                return value(node.value, scope)[slice(*(value(k, scope) if k else None
                                                       for k in (key.lower, key.upper, key.step)))]
            return value(node.value, scope)[value(key, scope)]
        if kind is ast.Attribute and node.attr in METHODS:
            return getattr(value(node.value, scope), node.attr)
        if kind is ast.Call:
            return value(node.func, scope)(*(value(a, scope) for a in node.args),
                                           **{k.arg: value(k.value, scope) for k in node.keywords})
        if kind is ast.Lambda:
            names = [a.arg for a in node.args.args]
            return lambda *args: value(node.body, {**scope, **dict(zip(names, args, strict=True))})
        if kind is ast.BinOp and type(node.op) in OPERATIONS:
            return OPERATIONS[type(node.op)](value(node.left, scope), value(node.right, scope))
        if kind is ast.UnaryOp and type(node.op) in OPERATIONS:
            return OPERATIONS[type(node.op)](value(node.operand, scope))
        if kind is ast.Compare and len(node.ops) == 1 and type(node.ops[0]) in OPERATIONS:
            return OPERATIONS[type(node.ops[0])](value(node.left, scope), value(node.comparators[0], scope))
        if kind is ast.BoolOp:  # Python's: the first operand that decides, lazily
            for operand in node.values:
                result = value(operand, scope)
                if bool(result) != isinstance(node.op, ast.And):
                    break
            return result
        if kind is ast.IfExp:
            return value(node.body, scope) if value(node.test, scope) else value(node.orelse, scope)
        if kind is ast.JoinedStr:  # f"{x / 60:.1f} + {y / 60:.1f}"
            return "".join(str(value(part, scope)) for part in node.values)
        if kind is ast.FormattedValue:
            return format(value(node.value, scope), value(node.format_spec, scope) if node.format_spec else "")
        if kind in (ast.ListComp, ast.GeneratorExp, ast.SetComp):
            found = [value(node.elt, inner) for inner in scopes(node.generators, scope)]
            return set(found) if kind is ast.SetComp else found
        if kind is ast.DictComp:
            return {value(node.key, s): value(node.value, s) for s in scopes(node.generators, scope)}
        raise ValueError(f"{expression!r}: {kind.__name__} is not allowed in an expression")

    def bind(target: ast.AST, item: object) -> dict:
        if type(target) is ast.Name:
            return {target.id: item}
        return {k: v for t, i in zip(target.elts, item, strict=True) for k, v in bind(t, i).items()}

    def scopes(generators: list, scope: dict) -> Iterator[dict]:  # a comprehension's scopes, in order
        if not generators:
            yield scope
            return
        first, *rest = generators
        for item in value(first.iter, scope):
            inner = {**scope, **bind(first.target, item)}
            if all(value(test, inner) for test in first.ifs):
                yield from scopes(rest, inner)

    return value(ast.parse(expression.strip(), mode="eval").body, {})


def flat(rec: dict) -> dict:
    """A record as one flat dict (its facts, NAME_seconds and scores beside name and hardware), for the expressions
    of tables.yaml that join studies and for the figures."""
    return {"hardware": rec["hardware"], "variant": rec["variant"], "flags": rec["flags"],
            "seed": (rec["seeds"] or [None])[0], "seeds": rec["seeds"], **rec["facts"],
            "name": rec["facts"].get("display_name", rec["name"]),
            **{f"{stage}_seconds": s for stage, s in rec["seconds"].items()}, **rec["scores"]}


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


def computed(row: dict, expressions: dict) -> dict:
    """`row` with the fields of `compute` added in order (a later one may use an earlier one)."""
    row = dict(row)
    for key, expression in expressions.items():
        row[key] = compute(expression, row)
    return row


def cells(templates: list, row: dict) -> list[str]:
    """A row's cells: a template (or list of them) makes one; `{for: EXPRESSION, as: NAME, cell: TEMPLATES}` one per
    item of the expression's value, NAME bound to it (a column per seed, per rate, per run)."""
    out = []
    for template in templates:
        if isinstance(template, dict):
            out += [cell(template["cell"], {**row, template["as"]: item}) for item in compute(template["for"], row)]
        else:
            out.append(cell(template, row))
    return out


def literal_rows(results: Results, spec: dict, context: dict) -> list[list[str]]:
    """The rows of a literal-rows table. A row is a list of templates, or a dict: `with: {NAME: ALIAS}` binds names
    to the table's records for one row; `each: ALIAS, a query, an expression or a list, as: NAME` makes a row per
    record (or item) of it (`group_by: [TEMPLATES]`: per Group of the records that render them alike; `sort:
    [EXPRESSIONS]` over its fields orders them), NAME bound to it. Either takes `compute`, `if: TEMPLATES` (the row
    only where one of them has all its fields) and `cells: [...]`, or `rows: [[...], ...]` for several rows."""
    out = []
    for row in spec["rows"]:
        if isinstance(row, list):
            out.append(cells(row, context))
            continue
        if "each" in row:
            each = row["each"]
            group = (named(results, each) if isinstance(each, dict) else each if isinstance(each, list)
                     else context[each] if each in context else compute(each, context))
            members = group.members if isinstance(group, Group) else group
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
            bound = computed({**context, **binding}, row.get("compute", {}))
            if "if" not in row or present(row["if"], bound):
                out += [cells(templates, bound) for templates in row.get("rows", [row.get("cells")])]
    return out


# (layers, width, pretraining epochs, block) of --preset best: the model's default shape and block (128;
# chargpt/training/arguments.py, not imported: it would load torch), the preset's epochs and block;
# tables.yaml's `best_shape`
BEST_SHAPE = (4, 256, PRESET_DEFAULTS["pretrain"]["best"]["num_train_epochs"],
              PRESET_DEFAULTS["pretrain"]["best"].get("block_size", 128))
# what each recipe file of chargpt/recipes/ sets (chargpt/training/presets.py reads them): tables.yaml's `recipes`
RECIPES = {"defaults": PRESET_DEFAULTS, "evaluation": PRESET_EVALUATION, "needs": PRESET_NEEDS,
           "from_scratch": FROM_SCRATCH, "by_position": PRESET_BY_POSITION}


def spec_table(name: str, spec: dict) -> Callable[[Results], str]:
    """A table of tables.yaml. A query: the records of its study (or studies) where facts match `where`, with
    `compute`d fields, optionally grouped by a fact (groups in order of appearance), one row each. Literal rows:
    `records` names records, `header` and `rows` are templates over those names. A field that no record has ends the
    run in one line naming the table."""
    def render_spec(results: Results) -> str:
        try:
            if "rows" in spec:
                context = {"best_shape": BEST_SHAPE, "recipes": RECIPES} | {alias: named(results, query)
                                                          for alias, query in spec["records"].items()}
                context = computed(context, spec.get("compute", {}))
                return table(cells(spec["header"], context), literal_rows(results, spec, context))
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


# ---------------------------------------------------------------------------------------------------- machinery


TABLES: dict[str, Callable[[Results], str]] = {
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

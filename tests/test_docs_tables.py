"""README.md and docs/*.md hold result tables generated from results/*.json, and no hand-typed accuracy besides.

So a number lives in one place: a changed JSON makes the committed tables stale (and this test fail) until
`python experiments/docs_tables.py` rewrites them; prose may quote an accuracy only if the JSON holds it.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from test_readme_commands import load as load_script

from chargpt import recipes
from chargpt.training import ModelArguments

docs_tables = load_script("experiments/docs_tables.py")  # as it runs: its sibling records.py by that name
plotting = load_script("experiments/plot_results.py")  # the figures' lookups of the runs the summary rows name
BEST_SHAPE, BLOCK, DOCS, ROOT = docs_tables.BEST_SHAPE, docs_tables.BLOCK, docs_tables.DOCS, docs_tables.ROOT
TABLES, Results, render, stale = docs_tables.TABLES, docs_tables.Results, docs_tables.render, docs_tables.stale

RESULTS = ROOT / "results"


def test_the_results_page_leads_with_findings_and_the_studies_have_their_own_pages():
    results = (ROOT / "docs" / "results.md").read_text()
    assert len(results.splitlines()) <= 300
    assert results.index("## What was found") < results.index("## Summary")
    for page in ("results-h100.md", "results-cpu.md", "results-recitation.md", "results-demo.md"):
        assert f"]({page}#" in results or f"]({page})" in results


def test_every_committed_table_is_what_the_json_gives():
    assert not stale(DOCS, Results()), "regenerate them: python experiments/docs_tables.py"


def test_a_changed_number_makes_its_tables_stale(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    demo = json.loads((RESULTS / "demo_cpu_no_amx.json").read_text())
    demo["records"][0]["scores"]["london baseline"]["accuracy"] = 99.9  # world 0's London baseline
    (tmp_path / "results" / "demo_cpu_no_amx.json").write_text(json.dumps(demo))
    edited = Results(tmp_path / "results")
    assert "99.9%" in TABLES["demo"](edited)
    assert stale([ROOT / "README.md"], edited) == ["README.md: table demo"]
    faithful = json.loads((RESULTS / "faithful_h100.json").read_text())
    moved = next(r for r in faithful["records"] if r["name"] == "rope, seed 1, lr 2e-4, CPU")
    moved["scores"]["dev"]["accuracy"] = 42.2
    (tmp_path / "results" / "faithful_h100.json").write_text(json.dumps(faithful))
    assert "42.2" in TABLES["summary"](Results(tmp_path / "results"))


def test_studies_hold_records_of_one_shape_and_a_bad_record_is_named(tmp_path):
    records = docs_tables.run_records
    studies = [path for path in sorted(RESULTS.glob("*.json")) if "records" in json.loads(path.read_text())]
    assert {path.stem for path in studies} == {path.stem for path in RESULTS.glob("*.json")}  # every one
    for path in studies:
        assert all(set(rec) == set(records.FIELDS) for rec in records.read(path)["records"])
    good = records.record("a", seeds=[0], scores={"dev": {"correct": 1, "total": 2, "accuracy": 50.0}})
    for bad, message in ((dict(good, extra=1), r"records\[1\]: a record has exactly the keys"),
                         (dict(good, seeds=0), r"records\[1\]: seeds should be"),
                         (good, r"records\[1\]: a second record named 'a'")):
        (tmp_path / "s.json").write_text(json.dumps({"records": [good, bad]}))
        with pytest.raises(SystemExit, match=rf"s\.json: {message}"):
            records.read(tmp_path / "s.json")
    with pytest.raises(SystemExit, match=r"s\.json: records\[0\]"):  # nothing half-checked reaches the file
        records.write(tmp_path / "s.json", [dict(good, date=5)])
    with pytest.raises(ValueError, match="unknown fields"):
        records.record("b", epochs=3)


def test_a_query_table_renders_records_with_fallbacks_and_groups():
    recs = [docs_tables.run_records.record(f"r{seed}", seeds=[seed], scores={"dev": {"correct": c, "total": 500,
                                                                                    "accuracy": c / 5}},
                                           seconds={"train": 60.0 * (seed + 1)}, facts=facts)
            for seed, c, facts in ((0, 150, {"epochs": 290, "group": "g"}), (1, 140, {"group": "g"}),
                                   (2, 100, {"epochs": 0}), (3, 90, {}))]
    columns = [["seed", "{seeds[0]}"], ["epochs", ["{facts[epochs]:g} epochs", "—"]], ["dev", "{scores[dev]:score}"]]
    assert docs_tables.make_table(recs, columns).splitlines()[2:] == [
        "| 0 | 290 epochs | 30.0% (150/500) |", "| 1 | — | 28.0% (140/500) |", "| 2 | 0 epochs | 20.0% (100/500) |",
        "| 3 | — | 18.0% (90/500) |"]  # a zero is a value; only a missing or empty field falls back
    group = docs_tables.Group("g", recs[:2])
    assert docs_tables.cell("{group}: {scores[dev][accuracy]:spread}, {seconds[train]:spread_min}", group) == \
        "g: 29.0 ± 1.4%, 1.5 ± 0.7 min"
    with pytest.raises(KeyError):  # a typo in a column's only template is an error, not an empty cell
        docs_tables.cell("{facts[epoch]}", recs[0])
    typo = docs_tables.spec_table("t", {"study": "bench_train_cpu", "columns": [["x", "{facts[epoch]}"]]})
    with pytest.raises(SystemExit, match=r"^tables\.yaml: table t: KeyError: 'epoch'$"):  # one line naming the table
        typo(Results())


def test_a_literal_rows_table_names_records_computes_and_repeats_a_row_per_member(tmp_path):
    """tables.yaml's literal rows: records by name, a computed number over them, a row per member of a group where
    its `if` field is present, an `==` choosing between templates, dict items and list formats."""
    record = docs_tables.run_records.record
    recs = [record(f"r{i}", seeds=[i], scores={"dev": {"correct": c, "total": 500, "accuracy": c / 5}},
                   seconds={"train": 60.0 * (i + 1)} if i != 1 else {},
                   facts={"part": "p", "lr": rate, "ms": {"fp32": 2.5, "bf16": 1.0}, "steps": [1.234, 2.0]})
            for i, c, rate in ((0, 150, 1e-4), (1, 140, 3e-4), (2, 100, 3e-4))]
    docs_tables.run_records.write(tmp_path / "s.json", recs, what="a test study")
    spec = {"records": {"first": {"study": "s", "name": "r0"}, "all": {"study": "s", "where": {"part": "p"}}},
            "compute": {"per_step": 'first["seconds"]["train"] / 4'},
            "header": ["run", "dev of {first[name]}"],
            "rows": [["first", "{first[scores][dev]:score}, {per_step:.0f} s, {first[facts][ms]:items ms}, "
                               "{first[facts][steps]:list.1f}, mean {all[scores][dev][accuracy]:spread}"],
                     {"each": "all", "as": "r", "if": "{r[seconds][train]}",
                      "compute": {"same": 'r["facts"]["lr"] == first["facts"]["lr"]'},
                      "cells": ["{r[name]}", ["{r[facts][lr]:lr} (first's rate){same:if}", "{r[facts][lr]:lr}"]]}]}
    assert docs_tables.spec_table("t", spec)(Results(tmp_path)).splitlines() == [
        "| run | dev of r0 |", "| --- | --- |",
        "| first | 30.0% (150/500), 15 s, fp32 2.5 ms · bf16 1.0 ms, 1.2, 2.0, mean 26.0 ± 5.3% |",
        "| r0 | 1e-4 (first's rate) |", "| r2 | 3e-4 |"]  # r1 has no training time: no row


def test_a_table_can_have_a_column_per_item_and_expressions_only_of_the_allowed_kinds(tmp_path):
    """A column per rate (`for` cells) over a computed, sorted set; a row per item of an expression; a lambda and a
    comprehension in `compute`; a study not written yet (miss_split.py prints one). Anything beyond the allowed
    expressions (attributes, unknown names) ends the run naming the table."""
    record = docs_tables.run_records.record
    recs = [record(f"m{i}", seeds=[i], scores={"dev": {"correct": 1, "total": 2, "accuracy": 50.0}},
                   facts={"by_rate": by_rate}) for i, by_rate in enumerate(({"1e-4": 10.0, "3e-4": 20.0},
                                                                             {"3e-4": 30.0}))]
    study = {"what": "a test study", "records": recs}
    spec = {"records": {"runs": {"study": "s"}},
            "compute": {"runs": "runs.members",
                        "rates": "sorted({float(k) for r in runs for k in r['facts']['by_rate']})",
                        "bold": "lambda text, yes: f'**{text}**' if yes else text"},
            "header": ["model", {"for": "rates", "as": "r", "cell": "lr {r:lr}"}],
            "rows": [{"each": "[(r['name'], {float(k): v for k, v in r['facts']['by_rate'].items()}) for r in runs]",
                      "as": "row", "compute": {"best": "max(row[1].values())"},
                      "cells": ["{row[0]}", {"for": "[bold(row[1][r], row[1][r] == best) if r in row[1] else '—' "
                                                    "for r in rates]", "as": "c", "cell": "{c}"}]}]}
    assert docs_tables.spec_table("t", spec)(Results(tmp_path, studies={"s": study})).splitlines() == [
        "| model | lr 1e-4 | lr 3e-4 |", "| --- | --- | --- |", "| m0 | 10.0 | **20.0** |", "| m1 | — | **30.0** |"]
    for sneaky in ("runs.__class__", "open('x')", "__import__('os')"):
        with pytest.raises(SystemExit, match="table t"):
            docs_tables.spec_table("t", {**spec, "compute": {"runs": sneaky}})(Results(tmp_path, studies={"s": study}))


def test_every_table_is_shown_somewhere_and_an_unknown_one_is_named_with_its_line():
    used = {m["name"] for path in DOCS for m in BLOCK.finditer(path.read_text())}
    assert used == set(TABLES)
    text = "intro\n\n<!-- table:nope -->\n<!-- /table -->\n"
    with pytest.raises(SystemExit, match=r"^x\.md:3: unknown table 'nope'"):
        render(text, Results(), "x.md")


def headline_rows(results: Results) -> list[dict]:
    """docs/results.md's summary table (tables.yaml's `summary`) as dicts; `how`: the reproduce.md section."""
    rows = []
    for line in TABLES["summary"](results).splitlines()[2:]:
        variant, recipe, hardware, wall, dev, how = line.removeprefix("| ").removesuffix(" |").split(" | ")
        rows.append({"variant": variant, "recipe": recipe, "hardware": hardware, "wall": wall, "dev": dev,
                     "how": how.split("#", 1)[1].removesuffix(")")})
    return rows


def front_rows(results: Results) -> list[str]:
    return TABLES["front"](results).splitlines()[2:]


def test_a_run_with_its_own_hardware_and_precision_is_shown_so(tmp_path):
    """Each frontier record names its machine, and fp32 unless a `mixed_precision` fact says otherwise."""
    FRONTIER_NO_AMX = ["… 46 epochs, 2 AMD EPYC cores without AMX", "… 52 epochs, 2 AMD EPYC cores without AMX"]
    FRONTIER_NO_AMX_BF16 = ["… 52 epochs in bf16, 2 AMD EPYC cores without AMX",
                            "… 52 epochs in bf16 on the AMD EPYC, seed 1",
                            "… 52 epochs in bf16 on the AMD EPYC, seed 2"]

    def no_amx_rows(results: Results) -> list[str]:
        return [r["hardware"] for r in headline_rows(results) if "(46 epochs)" in r["recipe"]
                or "(52 epochs)" in r["recipe"]]

    assert no_amx_rows(Results()) == ["2 AMD EPYC cores, no AMX, fp32"] * 2 + ["2 AMD EPYC cores, no AMX, bf16"] * 2
    assert next(r["hardware"] for r in headline_rows(Results())
                if "(150 epochs)" in r["recipe"]) == "2 CPU cores, AMX, fp32"
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    front = json.loads((RESULTS / "cpu_fp32_mixed_frontier.json").read_text())
    xeon = next(run["hardware"] for run in front["records"] if "Intel Xeon" in run["hardware"])
    for run in front["records"]:
        if run["name"] in FRONTIER_NO_AMX:
            run["hardware"] = xeon  # as if they had run on the AMX machine
        if run["name"] in FRONTIER_NO_AMX_BF16:
            del run["facts"]["mixed_precision"]
    (tmp_path / "results" / "cpu_fp32_mixed_frontier.json").write_text(json.dumps(front))
    assert no_amx_rows(Results(tmp_path / "results")) == ["2 CPU cores, AMX, fp32"] * 2 + [
        "2 AMD EPYC cores, no AMX, fp32", "2 AMD EPYC cores, no AMX, bf16"]  # the learned runs kept both keys


def test_seeds_run_on_different_machines_show_each_machines_time_not_a_mean(tmp_path):
    FRONTIER_150_LEARNED = plotting.FRONTIER_150_LEARNED

    def learned_150(results: Results) -> dict:
        return next(r for r in headline_rows(results) if r["variant"].startswith("learned") and "(150 epochs)" in
                    r["recipe"])

    front = json.loads((RESULTS / "cpu_fp32_mixed_frontier.json").read_text())
    runs = [r for r in front["records"] if r["name"] in FRONTIER_150_LEARNED]
    finetuning = {r["name"]: r["seconds"]["finetune"] for r in json.loads(
        (RESULTS / "cpu_fp32_recitation.json").read_text())["records"] if "finetune" in r["seconds"]}
    row = learned_150(Results())
    assert row["hardware"].endswith(f"({len({r['hardware'] for r in runs})} machines)")
    assert row["wall"] == " / ".join(f"{r['seconds']['pretrain'] / 60:.1f} + {finetuning[r['name']] / 60:.1f}"
                                     for r in runs) + " min"
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    for run in runs[1:]:
        run["hardware"] = runs[0]["hardware"]  # one machine after all: the mean, and the slowest seed's total
    (tmp_path / "results" / "cpu_fp32_mixed_frontier.json").write_text(json.dumps(front))
    row = learned_150(Results(tmp_path / "results"))
    slowest = max(r["seconds"]["pretrain"] + finetuning[r["name"]] for r in runs) / 60
    assert row["hardware"] == "2 AMD EPYC cores, no AMX, fp32" and row["wall"].endswith(f"min (at most {slowest:.1f})")


@pytest.mark.parametrize("stem", ["demo_cpu_no_amx", "demo_cpu"])
def test_the_demo_results_are_complete_runs(stem):
    worlds = [rec for rec in Results().records(stem) if rec["facts"]["part"] == "worlds"]
    assert [world["seeds"] for world in worlds] == [[0], [1], [2]]
    for world in worlds:
        assert f"--seed {world['seeds'][0]}" in world["facts"]["synthetic_args"]
        assert set(world["facts"]["runs"]) == {"london baseline", "no pretraining (learned)", "rope-causal-seed0"}
        for run in world["facts"]["runs"]:
            dev, paraphrased, single = (world["scores"][key] for key in (run, f"{run}, paraphrased", f"{run}, single"))
            assert dev["total"] == 75 and paraphrased["total"] + single["total"] == 75
            assert dev["correct"] == paraphrased["correct"] + single["correct"]
        assert world["seconds"]["demo"] >= world["seconds"]["run_experiments"]


def _json_numbers(value) -> set[float]:
    """Every number in a JSON value, rounded to one decimal, as the documentation prints accuracies."""
    if isinstance(value, dict):
        return set().union(*map(_json_numbers, value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*map(_json_numbers, value)) if value else set()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {round(float(value), 1)}
    return set()


def orphan_numbers(prose: str, known: set[float]) -> list[str]:
    """Accuracies (12.3%), means (12.3 ± ...) and spreads (± 1.2) in `prose` that are no number of `known`."""
    found = re.finditer(r"(\d+\.\d)(?=%| ±)|(?<=± )(\d+\.\d)", prose)
    return [m[0] for m in found if float(m[1] or m[2]) not in known]


def test_prose_accuracies_have_a_home_in_the_json():
    """Outside the generated tables an accuracy may be quoted only if results/*.json holds it, or a generated table
    shows it (a mean or a spread: computed from the records, not stored beside them)."""
    known = set().union(*(_json_numbers(json.loads(p.read_text())) for p in RESULTS.glob("*.json")))
    shown = " ".join(m["body"] for path in DOCS for m in BLOCK.finditer(path.read_text()))  # fresh: tested above
    known |= {float(m[1] or m[2]) for m in re.finditer(r"(\d+\.\d)(?=%| ±)|(?<=± )(\d+\.\d)", shown)}
    # the matcher itself, on a known set of its own (the real JSON may hold any number, a run's 5.5 s say)
    assert orphan_numbers("rope 30.8% (29.8 ± 1.1%), vanilla 77.7% or 66.6 ± 5.5", {30.8, 29.8, 1.1}) == [
        "77.7", "66.6", "5.5"]
    orphans = {path.name: orphan_numbers(BLOCK.sub("", path.read_text()), known) for path in DOCS}
    assert not any(orphans.values()), f"numbers typed by hand, with no home in results/*.json: {orphans}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose_sentences(markdown: str) -> list[list[str]]:
    """The words of each prose sentence of a Markdown page: code blocks, tables, headings, images and comments left
    out, links read as their text, a list item a paragraph of its own."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    paragraphs, current = [], []
    for line in text.splitlines():
        if not line.strip() or line.startswith(("#", "|")) or line.lstrip().startswith("- "):
            paragraphs.append(" ".join(current))
            current = [line.lstrip()[2:]] if line.lstrip().startswith("- ") else []
        else:
            current.append(line.strip())
    paragraphs.append(" ".join(current))
    sentences = [s for p in paragraphs for s in re.split(r"(?<=[.!?:])\s+(?=[A-Z`*(])", p) if s.strip()]
    return [s.split() for s in sentences]


def test_prose_sentences_are_counted_as_a_reader_meets_them():
    page = ("# Title\n\nOne two three. Four [five six](x.md#y) seven!\n\n```bash\nnot. prose here\n```\n"
            "| a | b |\n- An item, two words more.\n  Still the item.\n<!-- table:x -->\n")
    assert prose_sentences(page) == [["One", "two", "three."], ["Four", "five", "six", "seven!"],
                                     ["An", "item,", "two", "words", "more."], ["Still", "the", "item."]]


def test_the_readme_is_a_front_page_and_its_links_resolve():
    """The README a student reads in five minutes: at most 150 lines, plain sentences (median at most 15 words, at
    most one in ten over 30), table rows under 200 characters, one headline table of at most 6 rows and 5 columns."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    lengths = sorted(len(words) for words in prose_sentences(readme))
    assert len(lengths) >= 20 and lengths[len(lengths) // 2] <= 15, lengths
    assert sum(n > 30 for n in lengths) <= len(lengths) / 10, lengths
    rows = [line for line in readme.splitlines() if line.startswith("|")]
    assert rows and max(len(line) for line in rows) < 200
    front = TABLES["front"](Results()).splitlines()
    assert len(front) - 2 <= 6 and front[0].count("|") - 1 <= 5 and front[2] in readme
    for path in DOCS:
        for target, anchor in re.findall(r"\]\(((?:docs/)?[\w/.-]*\.(?:md|png))(?:#([\w-]+))?\)", path.read_text()):
            linked = (path.parent / target).resolve()
            assert linked.is_file(), f"{path.name}: a link to {target}, which does not exist"
            if anchor:
                headings = {_slug(h) for h in re.findall(r"^#+ (.+)$", linked.read_text(), re.M)}
                assert anchor in headings, f"{path.name}: a link to {target}#{anchor}, no such heading"


def span_records(variant: str) -> tuple[dict, dict[int, dict]]:
    """cpu_fp32_span_answers.json and its 150-epoch records of one position variant by seed."""
    data = json.loads((RESULTS / "cpu_fp32_span_answers.json").read_text())
    return data, {rec["seeds"][0]: rec for rec in data["records"]
                  if rec["variant"] == variant and rec["facts"]["epochs"] == 150}


def test_the_span_answers_row_gives_each_seed_and_names_its_machines(tmp_path):
    """README's span-answers row: the continuation's dev score of every rope seed, each seed's own pretraining time,
    and '(2 machines)' once a seed's run names a machine of its own."""

    def span_row(results: Results) -> dict:
        return next(r for r in headline_rows(results) if "span of the recitation" in r["recipe"])

    data, rope = span_records("rope")
    row = span_row(Results())
    for rec in rope.values():
        assert f"{rec['scores']['dev']['accuracy']:.1f}" in row["dev"]
        assert f"{rec['seconds']['pretrain'] / 60:.1f}" in row["wall"]
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    for rec in rope.values():
        rec["hardware"] = data["hardware"]  # every seed on the study's machine
    (tmp_path / "results" / "cpu_fp32_span_answers.json").write_text(json.dumps(data))
    assert span_row(Results(tmp_path / "results"))["hardware"] == "2 AMD EPYC cores, no AMX, fp32"
    rope[0]["hardware"] = "2 cores of a Xeon with AMX"
    rope[0]["scores"]["dev"]["accuracy"] = 12.3
    (tmp_path / "results" / "cpu_fp32_span_answers.json").write_text(json.dumps(data))
    row = span_row(Results(tmp_path / "results"))
    assert row["hardware"].endswith("(2 machines)") and "12.3" in row["dev"]


def test_the_chosen_row_scores_the_model_each_seed_chose(tmp_path):
    """The CHOOSE=1 row: per seed that chargpt.recipes.choose_final_questions ran on, the dev score of the held-out
    model when it chose the mixed questions, of the final model when it chose all; 'on every seed' only while the seeds
    agree."""

    def chosen_row(results: Results, variant: str = "rope") -> dict:
        return next(r for r in headline_rows(results)
                    if "CHOOSE=1" in r["recipe"] and r["variant"].startswith(f"{variant}, "))

    def chose(rec: dict) -> dict:
        return rec["scores"]["dev, held-out model" if rec["facts"]["final_questions"]["choice"] == "mixed" else "dev"]

    for variant in ("rope", "learned"):
        found = {seed: rec for seed, rec in span_records(variant)[1].items() if "final_questions" in rec["facts"]}
        row = chosen_row(Results(), variant)
        assert ("on every seed" in row["recipe"]) == (
            len({rec["facts"]["final_questions"]["choice"] for rec in found.values()}) == 1)
        assert row["dev"].endswith("seeds " + ", ".join(map(str, sorted(found))))
        assert all(f"{chose(rec)['accuracy']:.1f}" in row["dev"] for rec in found.values())
    data, rope = span_records("rope")
    first = rope[min(seed for seed, rec in rope.items() if "final_questions" in rec["facts"])]
    first["scores"]["dev"]["accuracy"] = 12.3
    first["scores"]["dev, held-out model"]["accuracy"] = 45.6
    first["facts"]["final_questions"]["choice"] = "all"
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    (tmp_path / "results" / "cpu_fp32_span_answers.json").write_text(json.dumps(data))
    row = chosen_row(Results(tmp_path / "results"))
    assert "12.3" in row["dev"] and "45.6" not in row["dev"]
    assert "on every seed" not in row["recipe"]


def test_the_learned_span_row_takes_a_seeds_pretraining_from_its_own_run_or_the_frontier_run_it_reevaluated():
    """Learned seeds re-evaluated with span answers keep their pretraining time where it was measured (the frontier
    run, cpu_fp32_mixed_frontier.json); a seed made by make recite SPAN=1 brings its own."""
    FRONTIER_150_LEARNED = plotting.FRONTIER_150_LEARNED
    recitation_source = plotting.recitation_source

    results = Results()
    row = next(r for r in headline_rows(results) if "span of the recitation" in r["recipe"]
               and r["variant"].startswith("learned"))
    learned = span_records("learned")[1]
    minutes = []
    for seed, rec in sorted(learned.items()):
        if "pretrain" in rec["seconds"]:
            minutes.append(rec["seconds"]["pretrain"] / 60)
        else:
            run = plotting.recitation_runs(results)[FRONTIER_150_LEARNED[seed]]
            minutes.append(recitation_source(results, run)["pretrain_seconds"] / 60)
    assert row["wall"] == "pretraining " + " / ".join(f"{m:.1f}" for m in minutes) + " min"
    assert all(f"{rec['scores']['dev']['accuracy']:.1f}" in row["dev"] for rec in learned.values())


def test_the_reference_size_rows_come_from_their_own_json_seeds_of_one_budget_in_one_row(tmp_path):

    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    data = json.loads((RESULTS / "cpu_fp32_reference_size.json").read_text())
    epyc = next(run for run in data["records"] if "AMD EPYC" in run["hardware"])

    def run(seed: int, minutes: float, rate: float, correct: int, epochs: int = 50, **fields: object) -> dict:
        return dict(epyc, name=f"seed {seed}, {epochs} epochs", seeds=[seed], seconds={"pretrain": 60 * minutes},
                    scores={"dev": {"correct": correct, "total": 500, "accuracy": correct / 5}},
                    facts={**epyc["facts"], "learning_rate": rate, "epochs": epochs}, **fields)

    data["records"] = [run(0, 10, 7.5e-5, 61), run(1, 20, 1.5e-4, 71, hardware="2 cores of an Intel Xeon (AMX)"),
                       run(2, 10, 7.5e-5, 61, epochs=60)]
    (tmp_path / "results" / "cpu_fp32_reference_size.json").write_text(json.dumps(data))
    edited = Results(tmp_path / "results")
    sized = [r for r in headline_rows(edited) if "the reference size" in r["variant"]]
    rows = [r for r in sized if r["how"] not in ("--preset-best", "make-best-best-fast")]  # best_fast_cpu.json's own
    best_rows = [r for r in sized if r["how"] == "--preset-best"]  # best_cpu.json's, a row per positions
    assert [r["dev"] for r in rows] == ["13.2 ± 1.4% (12.2 / 14.2)", "12.2% (61/500), seed 2"]
    assert [r["wall"] for r in rows] == ["pretraining 10.0 / 20.0 min", "pretraining 10.0 min"]
    assert [r["hardware"] for r in rows] == ["2 AMD EPYC cores, no AMX, fp32 (2 machines)",
                                             "2 AMD EPYC cores, no AMX, fp32"]  # each seed on its own machine
    assert "(lr 7.5e-5, 1.5e-4, chosen" in rows[0]["recipe"] and "(60 epochs)" in rows[1]["recipe"]
    # --preset best now pretrains in block 160: these block-128 runs are not the preset, best_cpu.json's are
    assert not any("preset" in r["recipe"] for r in rows)
    assert all(r["recipe"].startswith("**`--preset best`**") for r in best_rows) and BEST_SHAPE[3] == 160
    assert [r["how"] for r in rows] == ["uncorrupted-documents-recitation-rows-in-pretraining"] * 2
    assert BEST_SHAPE[:2] == (ModelArguments.n_layer, ModelArguments.n_embd)  # the model --preset best trains
    best = [line for line in front_rows(edited) if line.startswith("| [`--preset best`]")]  # on the front page
    groups: dict[tuple[str, int], list[float]] = {}
    for rec in json.loads((RESULTS / "best_cpu.json").read_text())["records"]:  # a group per positions and budget
        groups.setdefault((rec["variant"], rec["facts"]["epochs"]), []).append(rec["scores"]["dev"]["accuracy"])

    def dev(seeds: list[float]) -> str:
        return docs_tables.spread(seeds) + f", {len(seeds)} seeds" if len(seeds) > 1 else f"{seeds[0]:.1f}%, 1 seed"

    # the front page: rope at the preset's 50 epochs (make best's rows stand for learned positions); docs/results.md:
    # every group, the JSON's order
    link = "| [`--preset best`](docs/reproduce.md#--preset-best)"
    flops = {rec["name"]: rec["facts"]["pretrain_flops"]
             for rec in json.loads((RESULTS / "pretraining_flops.json").read_text())["records"]}
    assert [line.split(" | ")[:3] for line in best] == [
        [f"{link}, {variant}, {epochs} epochs", dev(groups[variant, epochs]),
         f"{flops[f'--preset best, {variant}, {epochs} epochs']:.2g}"] for variant, epochs in (("rope", 50),)]
    assert [(r["variant"], re.search(r"\((\d+) epochs", r["recipe"])[1]) for r in best_rows] == [
        (f"{variant}, 4 layers × 256 dims (**the reference size**)", str(epochs)) for variant, epochs in groups]
    assert all(r["dev"].startswith(dev(seeds).split(", ")[0])
               for r, seeds in zip(best_rows, groups.values(), strict=True))
    table = TABLES["reference-size"](edited)
    assert "| rope, 4 × 256 (reference), seed 1 | 50 | 2 CPU cores, AMX |" in table
    assert "| rope, 4 × 256 (reference), seed 2 | 60 |" in table
    assert sorted(stale(DOCS, edited)) == ["docs/results-recitation.md: table recitation-chars-reference",
                                           "docs/results-recitation.md: table reference-size",
                                           "docs/results.md: table summary"]  # the 112 cut's table shows seed 0


def test_the_front_page_shows_make_best_per_positions_within_the_compute_it_claims():
    """make best's rows: rope and learned positions, each at its recipe's epochs (best-fast.yaml, learned positions
    by pretrain_by_position) with the records' mean; rope in a third of --preset best's pretraining FLOPs, learned
    within them."""
    fast = [r for r in json.loads((RESULTS / "best_fast_cpu.json").read_text())["records"]
            if r["facts"]["block_size"] == 160]
    recipe = recipes.load("best-fast")
    epochs = {"rope": recipe["pretrain"]["num_train_epochs"],
              "learned": recipe["pretrain_by_position"]["learned"]["num_train_epochs"]}
    flops = {rec["name"]: rec["facts"]["pretrain_flops"]
             for rec in json.loads((RESULTS / "pretraining_flops.json").read_text())["records"]}
    preset_best = flops["--preset best, rope, 50 epochs"]
    rows = [line.split(" | ") for line in front_rows(Results()) if line.startswith("| [`make best`")]
    cost = {}
    assert [row[0].rsplit(", ", 2)[1:] for row in rows] == [[v, f"{e} epochs"] for v, e in epochs.items()]
    for row, (variant, want) in zip(rows, epochs.items(), strict=True):
        seeds = [r for r in fast if r["variant"] == variant and r["facts"]["epochs"] == want]
        dev = [r["scores"]["dev"]["accuracy"] for r in seeds]
        assert row[1] == f"{docs_tables.spread(dev)}, {len(dev)} seeds"
        assert {f"{r['facts']['pretrain_flops']:.2g}" for r in seeds} == {row[2]}
        cost[variant] = max(r["facts"]["pretrain_flops"] for r in seeds)
    assert cost["rope"] <= preset_best / 3 and cost["learned"] <= preset_best


def test_the_presets_table_shows_what_best_needs_and_how_its_models_answer():
    presets = TABLES["presets"]

    lines = presets(Results(RESULTS)).splitlines()
    best = next(line for line in lines if line.startswith("| [`best`](../chargpt/recipes/best.yaml) |"))
    assert "needs `--mixed_qa_corpus_path` (the training questions it recites" in best
    assert best.endswith("| `--answer_from_recitation True`; `--continue_recitation True`; `--recitation_beams 4`; "
                         "`--skip_name_words True`; `--first_of_pair True`; `--birth_before_death True` |")
    assert "`--block_size 160`; `--recitation_chars 144`; with learned positions `--num_train_epochs 100`" in best
    assert "with learned positions" not in best.split(" | ")[2]  # a finetuning loads its model's encoding
    assert next(line for line in lines if line.startswith("| [`cpu-fast`]")).endswith("| as the assignment |")
    assert [line.split("`")[1] for line in lines[2:] if line.startswith("| [`")] == list(recipes.names())


def span_record(rec: dict, variant: str, epochs: int, seed: int, minutes: float, stored: int, final: float,
                reference: float | None = None, rate: float | None = None) -> dict:
    """A copy of a span-corruption-then-recite record with its seed, pretraining, stored places and the final
    reciting model's dev score (and the reference finetuning's dev score, the chosen rate) replaced."""
    rec = json.loads(json.dumps(rec))
    rec.update(name=f"{variant}, {epochs} epochs, seed {seed}", variant=variant, seeds=[seed])
    rec["seconds"]["pretrain"] = 60 * minutes
    rec["facts"]["epochs"] = epochs
    rec["facts"]["pretraining"].update(seed=seed, stored=stored)
    rec["scores"]["dev"]["accuracy"] = final
    if reference is not None:
        rec["scores"]["dev, reference finetuning"]["accuracy"] = reference
    if rate is not None:
        rec["facts"]["recite"]["chosen_learning_rate"] = rate
    return rec


def test_span_corruption_then_recite_shows_each_seed_and_their_mean(tmp_path):
    """Each seed of confidence_cpu_span.json is a record: the per-seed table and the summary row read them all,
    the final models' dev scores side by side."""

    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    path = tmp_path / "results" / "confidence_cpu_span.json"
    data = json.loads(path.read_text())
    first = data["records"][0]
    data["records"] = [span_record(first, "rope", 290, 0, first["seconds"]["pretrain"] / 60,
                                   first["facts"]["pretraining"]["stored"], 81.0),
                       span_record(first, "rope", 290, 1, 10.0, 400, 71.0, reference=11.0, rate=1.5e-4)]
    path.write_text(json.dumps(data))
    edited = Results(tmp_path / "results")
    lines = TABLES["span-recite"](edited).splitlines()
    assert lines[3].startswith("| 1 | 10.0 min | 400 of ") and "| 11.0% |" in lines[3] and "(lr 1.5e-4)" in lines[3]
    assert lines[4].startswith("| mean ± sd |") and "**76.0 ± 7.1%**" in lines[4]
    row = next(r for r in headline_rows(edited) if r["how"] == "span-corruption-then-recite")
    assert row["dev"] == "76.0 ± 7.1% (81.0 / 71.0)" and row["wall"].endswith(" / 10.0 min")
    assert "(lr 7.5e-5, 1.5e-4, chosen on held-out)" in row["recipe"]
    summary = [line for line in TABLES["summary"](edited).splitlines() if "**span corruption**" in line]
    assert len(summary) == 2 and "76.0 ± 7.1% (81.0 / 71.0)" in summary[0]  # rope's row, then learned's


def test_span_corruption_epochs_table_puts_each_pretraining_length_on_one_row(tmp_path):
    """The span-corruption records of both studies: one row per variant and length, rope first, shortest first,
    each seed's figures side by side."""
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    long = json.loads((RESULTS / "confidence_cpu_span.json").read_text())["records"]
    path = tmp_path / "results" / "span_recite_epochs_cpu.json"
    study = json.loads(path.read_text())
    shorter = [span_record(long[0], "rope", 100, seed, 20.0 + seed, stored, final)
               for seed, (stored, final) in enumerate([(300, 61.0), (320, 65.0)])]
    for rec in shorter:
        final = rec["scores"]["dev"]["accuracy"]
        rec["facts"]["reached"] = {way: {"recalled": {"accuracy": final + 10 * k}}
                                   for k, way in enumerate(("reference", "recite"))}
    study["records"] = [*shorter, span_record(shorter[1], "learned", 220, 0, 21.0, 320, 65.0)]
    path.write_text(json.dumps(study))
    lines = TABLES["span-recite-epochs"](Results(tmp_path / "results")).splitlines()
    assert lines[2].startswith("| rope, 100 | 0, 1 | 20.0 / 21.0 min | 300 / 320 of ")
    assert lines[2].endswith("| **63.0 ± 2.8% (61.0 / 65.0)** | 63.0 ± 2.8% (61.0 / 65.0) "
                             "| 73.0 ± 2.8% (71.0 / 75.0) |")
    finals = [rec["scores"]["dev"]["accuracy"] for rec in sorted(long, key=lambda r: r["seeds"])]
    assert lines[3].startswith("| rope, 290 | " + ", ".join(str(rec["seeds"][0]) for rec in long) + " |")
    assert " / ".join(f"{v:.1f}" for v in finals) in lines[3] and len(lines) == 5
    # learned positions after every rope row, one seed: its own figures, no spread
    assert lines[4].startswith("| learned, 220 | 0 | 21.0 min | 320 of ") and lines[4].endswith(
        "| **65.0%** | 65.0% | 75.0% |")

    (row,) = [r for r in headline_rows(Results(tmp_path / "results"))
              if r["variant"].startswith("learned") and r["recipe"].startswith("**span corruption**")]
    assert "220 epochs" in row["recipe"] and row["dev"].startswith("65.0% (") and row["dev"].endswith(", seed 0")
    assert row["wall"] == "pretraining 21.0 min" and "220 epochs" not in TABLES["front"](Results(tmp_path / "results"))


def test_the_fast_path_run_gives_the_readme_its_recite_row_and_its_measured_pretraining(tmp_path):
    """faithful_h100_fast_path.json: the summary's recite-after-faithful-pretraining row, the results table's stages
    (the chosen rate in bold) and the GPU table's measured whole pretraining follow the JSON; the benchmark table
    names each call's GPU."""

    def fast_rows(results: Results) -> list[dict]:
        return [r for r in headline_rows(results) if r["how"] == "the-faithful-recipe-on-the-fast-path-then-recite"]

    reference, recite = fast_rows(Results())
    assert recite["hardware"] == "1 H100, fp32"
    assert recite["dev"] == "**81.0% (405/500)**, seed 0"  # the summary's recite row (no longer on the front page,
    assert not [line for line in front_rows(Results()) if "then recite" in line]  # which make best's row took)
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    data = json.loads((RESULTS / "faithful_h100_fast_path.json").read_text())
    stage = {rec["facts"]["part"]: rec for rec in data["records"]}  # the chosen point's own record moves too
    stage["recite"]["scores"]["dev"] = {"correct": 444, "total": 500, "accuracy": 88.8}
    stage["recite"]["facts"]["learning_rate"] = 1.5e-4
    stage["pretraining"]["seconds"]["loop"] = 299
    (tmp_path / "results" / "faithful_h100_fast_path.json").write_text(json.dumps(data))
    edited = Results(tmp_path / "results")
    reference, recite = fast_rows(edited)
    assert recite["dev"] == "**88.8% (444/500)**, seed 0" and "lr 1.5e-4" in recite["recipe"]
    assert recite["wall"].startswith("5.0 + ") and reference["wall"].startswith("5.0 + ")
    stages = TABLES["faithful-fast-path"](edited)
    assert "| **59.0% (236/400)** (chosen) |" in stages and "**76.8% (307/400)** (chosen)" not in stages
    assert "**299 s** in the loop" in TABLES["readme-gpu"](edited)
    bench = TABLES["bench-gpu"](edited).splitlines()[2:]
    assert [row.split(" | ")[1] for row in bench] == ["H200"] * 5 + ["H100"] * 3


def test_the_faithful_models_confidence_table_reads_both_question_sets(tmp_path):
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    data = json.loads((RESULTS / "faithful_h100_fast_path.json").read_text())
    conf = next(rec for rec in data["records"] if rec["facts"]["part"] == "confidence")["facts"]
    conf["dev"]["at_threshold"].update(precision=66.6, coverage=12.5, right=50, answered=75)
    conf["threshold"] = 0.5
    (tmp_path / "results" / "faithful_h100_fast_path.json").write_text(json.dumps(data))
    held_out, dev = TABLES["confidence-faithful-h100"](Results(tmp_path / "results")).splitlines()[2:]
    assert held_out.startswith("| held-out (400 training questions) | 32.8% |") and "80.0% / 8.8% (28/35)" in held_out
    assert dev.endswith("| 66.6% / 12.5% (50/75) |") and "0.478 (0.325, 0.688)" in dev
    assert "threshold 0.500" in TABLES["confidence-faithful-h100"](Results(tmp_path / "results"))


def test_the_learned_stand_ins_confidence_reads_its_own_held_out_models_and_names_an_empty_threshold(tmp_path):
    """The learned stand-in's held-out models sit in its span_recite_epochs_cpu.json record (`confidence`); a
    threshold under which no dev question is answered reads 'none answered', not a 0.0% precision."""
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    path = tmp_path / "results" / "span_recite_epochs_cpu.json"
    data = json.loads(path.read_text())
    (learned,) = [rec for rec in data["records"] if rec["name"] == "learned, 220 epochs, seed 0"]
    rates = learned["facts"]["confidence"]["rates"]
    rates["0.0006"]["dev_at_threshold"].update(answered=0, right=0, coverage=0.0, precision=0.0)
    rates["0.0006"]["holdout"]["answers"]["accuracy"] = 42.4
    path.write_text(json.dumps(data))
    row = next(line for line in TABLES["confidence-span-learned"](Results(tmp_path / "results")).splitlines()
               if line.startswith("| held-out model, lr 6e-4 |"))
    assert "| 42.4% |" in row and "| **none answered** |" in row


def test_the_gpu_flops_table_scales_the_counted_step_by_the_rows_and_prices_the_goals(tmp_path):
    """gpu-flops: a step's FLOPs per packed row (counted on a CPU) times the H100 run's rows and steps per second,
    against the card's peaks; the goal rows need the run's steps in 60 s, and nine pretrainings (the three variants'
    mean step) in 600 s, whatever the run measured."""
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    ops = json.loads((RESULTS / "step_ops_cpu.json").read_text())
    rope, learned, synthesizer = [r for r in ops["records"] if r["facts"]["part"] == "flops"]
    assert "rope" in rope["flags"] and "synthesizer" in synthesizer["flags"]
    rope["facts"].update(total_gflop_per_step=200.0, packed_rows=100)  # 2 GFLOP a row
    learned["facts"].update(total_gflop_per_step=50.0, packed_rows=10)  # 5
    synthesizer["facts"].update(total_gflop_per_step=20.0, packed_rows=10)  # 2
    ops["gpu_peaks"]["H100 SXM"].update(fp32_tflops=50.0, tf32_tensor_dense_tflops=500.0)
    (tmp_path / "results" / "step_ops_cpu.json").write_text(json.dumps(ops))
    fast = json.loads((RESULTS / "faithful_h100_fast_path.json").read_text())
    made = next(rec for rec in fast["records"] if rec["facts"]["part"] == "pretraining")
    made["facts"].update(steps=12000, packed_rows=90, packed_rows_needed_at_most=75)
    made["seconds"]["loop"] = 120
    (tmp_path / "results" / "faithful_h100_fast_path.json").write_text(json.dumps(fast))
    cpu = json.loads((RESULTS / "bench_fast_path_cpu.json").read_text())
    (batch128,) = [r for r in cpu["records"] if r["facts"].get("batch_size") == 128]
    batch128["facts"]["mean_rows_used"] = 60.5
    (tmp_path / "results" / "bench_fast_path_cpu.json").write_text(json.dumps(cpu))
    bench = json.loads((RESULTS / "bench_gpu_h100.json").read_text())
    (compiled,) = [r for r in bench["records"] if r["facts"]["bench_variant"] == "fast_compiled_all"]
    compiled["facts"].update(steps_timed=200, steps_per_s=50.0, rows_per_step_mean=80.0)  # one that counted its rows
    (tmp_path / "results" / "bench_gpu_h100.json").write_text(json.dumps(bench))
    benchmark, whole, goal, needed, unpadded, reproduce = TABLES["gpu-flops"](
        Results(tmp_path / "results")).splitlines()[2:]
    assert benchmark.endswith("the benchmark's 200 timed steps | 80 | 160.0 | 50.0 | 8.0 | 16% | 2% |")
    # 90 rows x 2 GFLOP = 180 GFLOP a step; 100 steps/s = 18 TFLOP/s = 36% of 50 and 4% of 500
    assert whole == "| the whole rope pretraining, 12,000 steps in 120 s | 90 | 180.0 | 100.0 | 18.0 | 36% | 4% |"
    assert goal == "| goal: those steps in 60 s | 90 | 180.0 | 200.0 | 36.0 | 72% | 7% |"
    assert needed.startswith("| goal, in the rows the batches needed at most | 75 | 150.0 | 200.0 | 30.0 | 60% |")
    assert unpadded.endswith("| 60.5 | 121.0 | 200.0 | 24.2 | 48% | 5% |")
    # nine pretrainings of 12,000 steps in 600 s: 180 steps/s of a mean (2 + 5 + 2) / 3 = 3 GFLOP a row, 90 rows
    assert reproduce.endswith("| 90 | 270.0 | 180.0 | 48.6 | 97% | 10% |")


def test_cpu_projections_give_one_row_per_cpu_from_todays_loop_only(tmp_path):
    """timings: each CPU of bench_fast_path_cpu.json gets the range of its runs' projected faithful pretraining, from
    today's loop's rows (the fast path's are left out), each run on the CPU its records name."""
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("predictions"))
    path = tmp_path / "results" / "bench_fast_path_cpu.json"
    bench = json.loads(path.read_text())
    first = next(rec for rec in bench["records"] if rec["facts"]["part"] == "timing")
    epyc = first["hardware"]

    def rec(run: int, variant: str, hours: float, cpu: str = "Zen 4", hardware: str = epyc) -> dict:
        return {**first, "name": f"run {run}: {variant}", "hardware": hardware, "facts": {
            **first["facts"], "run": run, "bench_variant": variant, "cpu": cpu,
            "projected_full_pretraining_s": 3600 * hours}}

    bench["records"] = [rec(1, "today", 2.0), rec(1, "fast", 0.1), rec(2, "today_again", 2.5),
                        rec(3, "today", 10.0, "Other CPU", "2 Intel Xeon cores (more)")]
    path.write_text(json.dumps(bench))
    rows = [line for line in TABLES["timings"](Results(tmp_path / "results")).splitlines() if "on a CPU" in line]
    assert [line.split(" | ")[2:4] for line in rows] == [["2 AMD EPYC cores, Zen 4, fp32", "2.0–2.5 h"],
                                                         ["2 Intel Xeon cores, Other CPU, fp32", "10.0 h"]]


def test_the_project_speaks_of_itself_alone():
    """No tracker's issue numbers in code, docs or results: say what the code does, not which ticket asked for it."""
    import re
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert len(files) > 100
    pattern = re.compile(r"\b[Ii]ssues? #?\d+")
    found = [f"{name}: {m.group(0)}" for name in files if not name.endswith((".png", ".safetensors"))
             for m in [pattern.search((ROOT / name).read_text(encoding="utf-8", errors="replace"))] if m]
    assert not found, found

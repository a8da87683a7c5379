"""The error-analysis page in a real browser: headless Chromium (Debian's package, scripts/install_chromium.sh, which
CI runs before pytest) opens the file, runs its script, and the test reads the DOM it rendered: the rows, the
highlights, and the filter and sort chosen by the URL hash. No network. Without Chromium the test FAILS."""

from __future__ import annotations

import math
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from chargpt.evaluation.records import build_records
from chargpt.evaluation.report_html import highlight, render_report, write_report
from modeling_chargpt.answering import AnswerScore
from modeling_chargpt.grounding import WikiIndex

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

WIKI = "\n".join([
    "Ann Ab. Ann Ab was born in New York City and lived in Paris .",
    "Bob Cd. Bob Cd was born in Leeds <b>not bold</b> .",
    "Cy Ef. Cy Ef came from Rome .",
    "Di Gh. Di Gh was born in Oslo .",
    "",
])
QUESTIONS = [f"Where was {name} born?" for name in ("Ann Ab", "Bob Cd", "Cy Ef", "Di Gh", "Ed Ij")]
GOLD = ["New York City", "Leeds", "Rome", "Oslo", "Lima"]
ANSWERS = ["York", "Leeds", "Paris", "Oslo", "Rome"]
CONFIDENCE = [0.4, 0.9, 0.7, 0.2, 0.05]


def dump_dom(page: Path, fragment: str, tmp_path: Path) -> str:
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install_chromium.sh (Debian's chromium package; CI runs it "
                    "before pytest) so the page can be checked in a real browser")
    profile = tmp_path / "chromium-profile"
    proc = subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                           page.resolve().as_uri() + fragment], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "</html>" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


class Rendered(HTMLParser):
    """The table rows (attributes, cell texts, marks) and the '#shown' text of a dumped DOM."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.rows: list[dict] = []
        self.shown = ""
        self._in_shown = False
        self._mark: str | None = None
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-line" in attrs:
            self.rows.append({**attrs, "cells": [], "marks": []})
        elif tag == "td" and self.rows:
            self.rows[-1]["cells"].append("")
        elif tag == "mark" and self.rows:
            self._mark = attrs["class"]
            self.rows[-1]["marks"].append([self._mark, ""])
        elif attrs.get("id") == "shown":
            self._in_shown = True

    def handle_endtag(self, tag):
        if tag == "mark":
            self._mark = None
        elif tag == "span":
            self._in_shown = False

    def handle_data(self, data):
        if self._in_shown:
            self.shown += data
        elif self.rows and self.rows[-1]["cells"]:
            self.rows[-1]["cells"][-1] += data
            if self._mark:
                self.rows[-1]["marks"][-1][1] += data

    def visible(self) -> list[str]:
        return [r["data-line"] for r in self.rows if "hidden" not in r]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    scores = [AnswerScore(math.log(c), c) for c in CONFIDENCE]
    records = build_records(QUESTIONS, GOLD, ANSWERS, scores, WikiIndex(WIKI), abstain_below=0.1)
    path = tmp_path_factory.mktemp("page") / "dev.predictions.html"
    write_report(path, records, "tiny <model> on dev", {"records": "dev.predictions.records.jsonl"})
    return path


def test_the_browser_renders_every_question_with_its_highlights(page, tmp_path):
    dom = Rendered(dump_dom(page, "", tmp_path))
    assert dom.visible() == ["1", "2", "3", "4", "5"] and dom.shown == "5 of 5 questions shown"
    by_line = {r["data-line"]: r for r in dom.rows}
    assert [by_line[n]["data-outcome"] for n in "12345"] == ["wrong", "correct", "wrong", "correct", "wrong"]
    # gold "New York City" with the answer "York" inside it; a correct answer is marked as both
    assert by_line["1"]["marks"] == [["gold", "New "], ["gold pred", "York"], ["gold", " City"]]
    assert by_line["2"]["marks"] == [["gold pred", "Leeds"]]
    assert by_line["3"]["marks"] == [["gold", "Rome"]]  # Paris is not in Cy Ef's line: made up, not grounded
    assert [by_line[n]["data-grounded"] for n in "12345"] == ["1", "1", "0", "1", "0"]
    assert by_line["2"]["cells"][7].endswith("Bob Cd was born in Leeds <b>not bold</b> .")  # wiki text, escaped
    assert by_line["5"]["cells"][3] == "Rome abstained" and "person not in wiki.txt" in by_line["5"]["cells"][7]
    assert by_line["2"]["cells"][4] == "90.0%"


def test_the_hash_filters_and_sorts_what_the_browser_shows(page, tmp_path):
    dom = Rendered(dump_dom(page, "#filter=wrong&sort=confidence-desc", tmp_path))
    assert dom.visible() == ["3", "1", "5"] and dom.shown == "3 of 5 questions shown"  # 0.7, 0.4, 0.05
    assert [r["data-line"] for r in dom.rows] == ["2", "3", "1", "4", "5"]  # all rows sorted, the right ones hidden
    dom = Rendered(dump_dom(page, "#filter=ungrounded&sort=confidence-asc", tmp_path))
    assert dom.visible() == ["5", "3"] and dom.shown == "2 of 5 questions shown"


def test_highlight_escapes_and_marks_whole_words_only():
    assert highlight("York & Yorkshire <York>", "Yorkshire", "York") == (
        '<mark class="pred">York</mark> &amp; <mark class="gold">Yorkshire</mark> &lt;<mark class="pred">York'
        "</mark>&gt;")
    assert highlight("no place here", "", None) == "no place here"


def test_a_reciting_models_page_shows_what_it_recited_with_the_places_marked():
    records = build_records(QUESTIONS[:2], GOLD[:2], ANSWERS[:2], [AnswerScore(-0.5, 0.9)] * 2, WikiIndex(WIKI),
                            recitations=["Ann Ab. Ann Ab was born in York", "Bob Cd. Bob Cd was born in Leeds"],
                            recitation_scores=[AnswerScore(-1.0, 0.5)] * 2)
    rows = Rendered(render_report(records, "reciting model")).rows
    assert rows[0]["cells"][1] == "Where was Ann Ab born?recited: Ann Ab. Ann Ab was born in York"
    assert rows[0]["marks"][0] == ["pred", "York"] and rows[1]["marks"][0] == ["gold pred", "Leeds"]
    assert rows[0]["data-confidence"] == f"{math.exp(-1.5):.6g}"  # the recitation's and the answer's together

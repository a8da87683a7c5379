"""One self-contained HTML page per evaluation for error analysis: every question with its prediction, gold place,
confidence, grounded flag and the person's wiki.txt line(s), the gold place and the answer highlighted in them.

No server and no network: the CSS and the small script are inline. The page filters (all / correct / wrong /
abstained / grounded / not grounded) and sorts (question order / most / least confident first); the URL hash holds
the choice (``page.html#filter=wrong&sort=confidence-desc``), so a link opens a view. The line ``N of M questions
shown`` counts the rows the browser actually lays out.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chargpt.training import atomic_write_text
from modeling_chargpt.grounding import whole_word_spans

from .confidence import describe, summarize

__all__ = ["highlight", "render_report", "report_path_for", "write_report"]

GOLD, PREDICTION = 1, 2
_MARK_CLASS = {GOLD: "gold", PREDICTION: "pred", GOLD | PREDICTION: "gold pred"}

FILTERS = {"all": "all questions", "correct": "correct answers", "wrong": "wrong answers",
           "abstained": "abstained", "grounded": "grounded (answer in the person's line)",
           "ungrounded": "not grounded"}
SORTS = {"line": "question order", "confidence-desc": "most confident first",
         "confidence-asc": "least confident first"}

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; }
.meta, #shown { color: #555; font-size: 0.9em; }
#controls { margin: 1em 0; }
table { border-collapse: collapse; width: 100%; font-size: 0.85em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.3em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; position: sticky; top: 0; }
tr.correct td.answer { color: #1a7f37; font-weight: bold; }
tr.wrong td.answer { color: #b3261e; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.abstained { font-style: italic; color: #777; }
mark.gold { background: #b7f0c0; }
mark.pred { background: #ffd6a5; }
mark.gold.pred { background: #9be7ff; }
.wiki { font-size: 0.95em; color: #333; }
.recited { font-size: 0.9em; color: #555; }
.wiki .n { color: #999; margin-right: 0.4em; }
.legend mark { padding: 0 0.3em; }
"""

_SCRIPT = """
(function () {
  const body = document.querySelector('#records tbody');
  const rows = Array.from(body.rows);
  const filterEl = document.getElementById('filter');
  const sortEl = document.getElementById('sort');
  const keep = {
    all: r => true,
    correct: r => r.dataset.outcome === 'correct',
    wrong: r => r.dataset.outcome === 'wrong',
    abstained: r => r.dataset.abstained === '1',
    grounded: r => r.dataset.grounded === '1',
    ungrounded: r => r.dataset.grounded === '0',
  };
  const line = r => Number(r.dataset.line);
  const conf = r => (r.dataset.confidence === '' ? -1 : Number(r.dataset.confidence));
  const order = {
    line: (a, b) => line(a) - line(b),
    'confidence-desc': (a, b) => conf(b) - conf(a) || line(a) - line(b),
    'confidence-asc': (a, b) => conf(a) - conf(b) || line(a) - line(b),
  };
  function readHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    if (Object.hasOwn(keep, params.get('filter'))) filterEl.value = params.get('filter');
    if (Object.hasOwn(order, params.get('sort'))) sortEl.value = params.get('sort');
  }
  function apply() {
    const shows = keep[filterEl.value];
    rows.slice().sort(order[sortEl.value]).forEach(r => { r.hidden = !shows(r); body.appendChild(r); });
    const laidOut = rows.filter(r => r.getClientRects().length > 0).length;
    document.getElementById('shown').textContent = laidOut + ' of ' + rows.length + ' questions shown';
  }
  function choose() {
    history.replaceState(null, '', '#filter=' + filterEl.value + '&sort=' + sortEl.value);
    apply();
  }
  filterEl.addEventListener('change', choose);
  sortEl.addEventListener('change', choose);
  window.addEventListener('hashchange', () => { readHash(); apply(); });
  readHash();
  apply();
})();
"""


def highlight(text: str, gold: str | None, prediction: str | None) -> str:
    """`text` as HTML with whole-word occurrences of the gold place and of the prediction in <mark> elements
    (class ``gold``, ``pred``, or both where they overlap, e.g. a correct answer)."""
    flags = [0] * len(text)
    for phrase, flag in ((gold, GOLD), (prediction, PREDICTION)):
        for start, end in whole_word_spans(text, phrase or ""):
            for i in range(start, end):
                flags[i] |= flag
    out, start = [], 0
    for i in range(1, len(text) + 1):
        if i == len(text) or flags[i] != flags[start]:
            piece = html.escape(text[start:i])
            out.append(f'<mark class="{_MARK_CLASS[flags[start]]}">{piece}</mark>' if flags[start] else piece)
            start = i
    return "".join(out)


def _flag(value: bool | None) -> str:
    return "" if value is None else ("1" if value else "0")


def _row(record: Mapping[str, Any]) -> str:
    e = html.escape
    correct, conf = record["correct"], record.get("confidence")
    outcome = "unknown" if correct is None else ("correct" if correct else "wrong")
    answer = e(record["answer"]) if record["answer"] else '<span class="abstained">(empty)</span>'
    if record["abstained"]:
        answer += ' <span class="abstained">abstained</span>'
    grounded = {None: "", True: "yes", False: "no"}[record.get("grounded")]
    min_char = record.get("min_char_prob")
    wiki = "<br>".join(
        f'<span class="n">{w["line"]}</span>{highlight(w["text"], record["gold"], record["answer"])}'
        for w in record.get("wiki_lines") or []
    ) or ('<span class="abstained">person not in wiki.txt</span>' if record.get("person_in_wiki") is False else "")
    recited = (f'<div class="recited">recited: {highlight(record["recitation"], record["gold"], record["answer"])}'
               '</div>' if record.get("recitation") is not None else "")
    return (
        f'<tr id="q{record["line"]}" class="{outcome}" data-line="{record["line"]}" data-outcome="{outcome}" '
        f'data-abstained="{_flag(record["abstained"])}" data-grounded="{_flag(record.get("grounded"))}" '
        f'data-confidence="{"" if conf is None else f"{conf:.6g}"}">'
        f'<td class="num">{record["line"]}</td><td>{e(record["question"])}{recited}</td>'
        f'<td>{e(record["gold"] or "")}</td><td class="answer">{answer}</td>'
        f'<td class="num">{"" if conf is None else f"{100 * conf:.1f}%"}</td>'
        f'<td class="num">{"" if min_char is None else f"{100 * min_char:.1f}%"}</td>'
        f'<td>{grounded}</td><td class="wiki">{wiki}</td></tr>'
    )


def _select(element_id: str, options: Mapping[str, str]) -> str:
    items = "".join(f'<option value="{value}">{html.escape(label)}</option>' for value, label in options.items())
    return f'<select id="{element_id}">{items}</select>'


def report_path_for(predictions_path: str | os.PathLike) -> Path:
    """Where an evaluation's page lives by default: beside its predictions file."""
    path = Path(predictions_path)
    return path.with_name(path.name + ".html")


def render_report(records: Sequence[Mapping[str, Any]], title: str, meta: Mapping[str, Any] | None = None) -> str:
    """The page as one HTML string; `meta` (e.g. the files behind it) is listed under the title, None values left
    out; the summary (accuracy, grounded split, AURC, ECE) comes from the records themselves."""
    e = html.escape
    meta_html = "".join(f"<div>{e(k)}: {e(str(v))}</div>" for k, v in (meta or {}).items() if v is not None)
    summary = summarize(records)
    summary_lines = describe(summary) if summary["with_gold"] else ["no gold places: test inputs"]
    summary_html = "".join(f"<li>{e(line)}</li>" for line in summary_lines)
    rows = "\n".join(_row(r) for r in records)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title><style>{_STYLE}</style></head>
<body>
<h1>{e(title)}</h1>
<div class="meta">{meta_html}</div>
<ul id="summary">{summary_html}</ul>
<p class="legend">In the wiki.txt lines: <mark class="gold">gold place</mark> <mark class="pred">prediction</mark>
<mark class="gold pred">both</mark>. Confidence: the model's probability of its whole answer (a reciting
model's: of what it recited and the answer together); min char p: of its least likely character. Grounded: the
answer occurs in the person's wiki.txt line.</p>
<div id="controls">Show {_select("filter", FILTERS)} sorted by {_select("sort", SORTS)} <span id="shown"></span></div>
<table id="records"><thead><tr><th>#</th><th>question</th><th>gold</th><th>prediction</th><th>confidence</th>
<th>min char p</th><th>grounded</th><th>wiki.txt line</th></tr></thead>
<tbody>
{rows}
</tbody></table>
<script>{_SCRIPT}</script>
</body></html>
"""


def write_report(path: str | os.PathLike, records: Sequence[Mapping[str, Any]], title: str,
                 meta: Mapping[str, Any] | None = None) -> None:
    """`render_report`, written atomically."""
    atomic_write_text(path, render_report(records, title, meta))

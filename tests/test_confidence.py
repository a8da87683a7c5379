"""Records of an evaluation (the answer's probability, grounding in wiki.txt), the confidence measures, the abstention
threshold chosen on held-out questions, and the bad input around them. Tiny models, handmade records: seconds."""

from __future__ import annotations

import importlib
import json
import math
import shutil
from pathlib import Path

import pytest
import torch

import evaluate_birthplace
from chargpt.evaluation import abstention
from chargpt.evaluation.confidence import (
    apply_threshold,
    aurc,
    aurc_optimal,
    choose_threshold,
    ece,
    reliability,
    scored,
    scored_grounded,
    selection_curve,
    summarize,
)
from chargpt.evaluation.record_files import (
    as_line,
    check_records_match,
    file_lines,
    read_records,
    records_path_for,
    write_records,
)
from chargpt.evaluation.records import build_records
from chargpt.training import run_cli
from data_scripts import DataFileError, load_qa_tsv, write_synthetic_corpus
from modeling_chargpt import MASK_CHAR, CharGPTConfig, CharGPTForCausalLM, CharTokenizer, answering
from modeling_chargpt.answering import AnswerScore, score_answers
from modeling_chargpt.grounding import WikiIndex

MAX_NEW = 8


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    write_synthetic_corpus(out, n_people=30, n_train=10, n_dev=8, n_test=4, seed=1)
    return out


@pytest.fixture(scope="module")
def tokenizer(world) -> CharTokenizer:
    return CharTokenizer.from_corpus((world / "wiki.txt").read_text(encoding="utf-8"))


def _model(tokenizer: CharTokenizer, position: str) -> CharGPTForCausalLM:
    torch.manual_seed(0)
    config = CharGPTConfig(vocab_size=tokenizer.vocab_size, n_layer=1, n_head=2, n_embd=32, block_size=64,
                           position_embedding_type=position)
    return CharGPTForCausalLM(config).eval()


def _teacher_forced(model, tokenizer, question: str, answer: str, closing_mask: bool) -> list[float]:
    """log p of each answer character (and the closing MASK), from ONE unpadded sequence: the definition."""
    ids = tokenizer.encode_text(question + MASK_CHAR + answer) + ([tokenizer.mask_token_id] if closing_mask else [])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids[:-1]]), use_cache=False).logits[0]
    logprobs = torch.log_softmax(logits.double(), -1)
    return [float(logprobs[t - 1, ids[t]]) for t in range(len(question) + 1, len(ids))]


@pytest.mark.parametrize("position", ["learned", "rope"])
def test_scores_are_the_teacher_forced_log_probabilities_of_each_answer(world, tokenizer, position):
    """Batched and right-padded, every row scores as if alone: sum and min over the answer and its closing MASK
    (no MASK after an answer cut off at max_new_tokens); answers of every length, the empty one included."""
    model = _model(tokenizer, position)
    rows = [line.split("\t") for line in (world / "birth_dev.tsv").read_text().splitlines()][:5]
    questions = [q for q, _ in rows]
    answers = ["", rows[1][1][:2], rows[2][1][: MAX_NEW - 1], "a" * MAX_NEW, rows[4][1][:5]]
    scores = score_answers(model, tokenizer, questions, answers, MAX_NEW, batch_size=3, show_progress=False)
    for question, answer, score in zip(questions, answers, scores, strict=True):
        chars = _teacher_forced(model, tokenizer, question, answer, closing_mask=len(answer) < MAX_NEW)
        assert len(chars) == len(answer) + (len(answer) < MAX_NEW)
        assert score.logprob == pytest.approx(sum(chars), abs=1e-4)
        assert score.min_char_prob == pytest.approx(math.exp(min(chars)), rel=1e-4)
        assert score.confidence == pytest.approx(math.exp(sum(chars)), rel=1e-4)


def test_the_greedy_answer_scores_what_generation_saw(world, tokenizer):
    """The record's probability of a greedy answer is the product of the probabilities `generate` chose it with."""
    model = _model(tokenizer, "rope")
    question = (world / "birth_dev.tsv").read_text().splitlines()[0].split("\t")[0]
    enc = tokenizer([question + MASK_CHAR], return_tensors="pt")
    out = model.generate(**enc, max_new_tokens=MAX_NEW, do_sample=False, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.mask_token_id, output_logits=True, return_dict_in_generate=True)
    new = out.sequences[0, enc["input_ids"].shape[1]:].tolist()
    end = new.index(tokenizer.mask_token_id) if tokenizer.mask_token_id in new else len(new)
    steps = min(end + 1, len(new))  # the answer's characters, and the MASK that ended it if one did
    answer = "".join(tokenizer.itos[t] for t in new[:end])
    seen = [float(torch.log_softmax(out.logits[i][0].double(), -1)[new[i]]) for i in range(steps)]
    (score,) = score_answers(model, tokenizer, [question], [answer], MAX_NEW, show_progress=False)
    assert score.logprob == pytest.approx(sum(seen), abs=1e-4)


WIKI = "\n".join([
    "Ann Ab. Ann Ab was born in New York City and lived in Paris .",
    "Bob Cd. Bob Cd was born in Yorkshire ; he met Ann Ab in Rome .",
    "Cy Ely. Cy Ely of Kelly was a poet \u2028.",  # a line separator inside a line stays inside its record
    "",
])


def test_grounding_against_a_handmade_wiki(tmp_path):
    wiki = WikiIndex(WIKI)
    assert wiki.lines_with("Ann Ab") == (1, 2) and wiki.lines_with("York") == (1,) and wiki.lines_with("Ely") == (3,)
    questions = ["Where was Ann Ab born?", "Where was Bob Cd born?", "Where was Bob Cd born?", "Where was Di Ef born?",
                 "Who is Cy Ely?", "Where was Cy Ely born?"]
    gold = ["New York City", "Yorkshire", "Yorkshire", "Oslo", "Kelly", ""]
    answers = ["York", "York", "Rome", "Paris", "Kelly", "Ely"]
    scores = [AnswerScore(math.log(p), p) for p in (0.9, 0.2, 0.6, 0.3, 0.5, 0.7)]
    records = build_records(questions, gold, answers, scores, wiki, abstain_below=0.55)
    got = [(r["grounded"], r["gold_grounded"], r["place_in_wiki"], r["person_in_wiki"]) for r in records]
    assert got == [
        (True, True, True, True),  # "York" inside "New York City", a whole word
        (False, True, True, True),  # not inside "Yorkshire"; "York" is elsewhere in wiki.txt
        (True, True, True, True),  # Rome is in Bob's line (Ann is mentioned there too: her lines are 1 and 2)
        (False, False, True, False),  # nobody called Di Ef: nothing is grounded
        (None, None, None, None),  # not a "Where was NAME born?" question
        (True, None, True, True),  # no gold (test input); "Ely" is the name itself, a whole word of the line
    ]
    assert [len(r["wiki_lines"]) for r in records] == [2, 1, 1, 0, 0, 1]
    assert records[0]["wiki_lines"][1] == {"line": 2, "text": WIKI.splitlines()[1]}
    assert [r["correct"] for r in records] == [False, False, False, False, True, None]
    assert [r["abstained"] for r in records] == [False, True, False, True, True, False]  # below 0.55
    assert [r["prediction"] for r in records] == ["York", "", "Rome", "", "", "Ely"]
    assert records[4]["answer"] == "Kelly" and records[4]["correct"]  # right, but not given
    assert records[0]["confidence"] == pytest.approx(0.9) and records[0]["logprob"] == pytest.approx(math.log(0.9))
    write_records(tmp_path / "r.jsonl", records)
    assert read_records(tmp_path / "r.jsonl") == records
    unchecked = build_records(questions, gold, answers, scores, wiki, abstain_ungrounded=True)
    assert [r["abstained"] for r in unchecked] == [False, True, False, True, False, False]  # unknown: given


def test_the_baseline_can_abstain_where_london_is_not_in_the_line(world, tmp_path, capsys):
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("Where was Ann Ab born?\tLondon\nWhere was Bob Cd born?\tLeeds\n", encoding="utf-8")
    argv = ["--baseline", "london", "--eval_corpus_path", str(tsv), "--outputs_path", str(tmp_path / "p"),
            "--abstain_ungrounded", "True"]
    assert run_cli(evaluate_birthplace.main, argv) == 1
    assert _one_error_line(capsys) == (f"error: --abstain_ungrounded needs wiki.txt: none beside {tsv}; give "
                                       "--wiki_path")
    (tmp_path / "wiki.txt").write_text("Ann Ab. Ann Ab was born in London .\nBob Cd. Bob Cd visited London .\n")
    (tmp_path / "other.txt").write_text("Ann Ab. Ann Ab was born in Leeds .\n")
    assert run_cli(evaluate_birthplace.main, argv) == 0
    assert (tmp_path / "p").read_text() == "London\nLondon\n"  # both lines name London: nothing to abstain on
    assert run_cli(evaluate_birthplace.main, [*argv, "--wiki_path", str(tmp_path / "other.txt")]) == 0
    assert (tmp_path / "p").read_text() == "\n\n"  # Ann's line has no London, Bob has no line
    assert "Correct: 0 out of 2: 0.0%" in capsys.readouterr().out


def _handmade(confidences: list[float], correct: list[bool]) -> list[dict]:
    questions = [f"Where was P{i} born?" for i in range(len(confidences))]
    gold = [f"G{i}" for i in range(len(confidences))]
    answers = [g if ok else "Elsewhere" for g, ok in zip(gold, correct, strict=True)]
    return build_records(questions, gold, answers, [AnswerScore(math.log(c), c) for c in confidences])


def test_threshold_selection_aurc_and_ece_on_handmade_records():
    held = scored(_handmade([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [True, True, False, True, False, False]))
    assert [round(p.precision, 3) for p in selection_curve(held)] == [1, 1, 0.667, 0.75, 0.6, 0.5]
    chosen = choose_threshold(held, 0.75)  # the most coverage at >= 75%: answer the 4 most confident
    assert (chosen.threshold, chosen.answered, chosen.right, chosen.coverage) == (0.6, 4, 3, 4 / 6)
    assert choose_threshold(held, 0.76).threshold == 0.8
    assert choose_threshold(scored(_handmade([0.9, 0.8], [False, False])), 0.5) is None
    dev = scored(_handmade([0.95, 0.65, 0.6, 0.59, 0.1], [True, False, True, True, False]))
    at = apply_threshold(dev, chosen.threshold)  # >= 0.6 answers 3 (0.59 abstains)
    assert (at.answered, at.right, at.total, at.precision, at.coverage) == (3, 2, 5, 2 / 3, 3 / 5)
    assert aurc(held) == pytest.approx((0 + 0 + 1 / 3 + 1 / 4 + 2 / 5 + 3 / 6) / 6)
    assert aurc_optimal(held) == pytest.approx((0 + 0 + 0 + 1 / 4 + 2 / 5 + 3 / 6) / 6)
    tie = scored(_handmade([0.5, 0.5], [True, False]))
    assert aurc(tie) == pytest.approx(0.5)  # a tie counts in random order: 0.5 errors at k=1, 1 of 2 at k=2
    calib = scored(_handmade([0.95, 0.95, 0.15, 0.15], [True, False, False, False]))
    assert ece(calib) == pytest.approx(0.5 * 0.45 + 0.5 * 0.15)
    bins = reliability(calib)
    assert (bins[9]["count"], bins[9]["accuracy"], bins[1]["count"]) == (2, 0.5, 2)
    assert reliability(scored(_handmade([1.0], [True])))[9]["count"] == 1  # 1.0 lands in the last bin


def test_a_reciting_models_summary_also_ranks_by_the_answer_alone():
    """Confidence is the recitation's and the answer's probability together; the summary also says how the answer's
    probability given the recitation would have ranked: here confidently copied out of a doubtful recitation."""
    answer_p, recitation_p, correct = [0.99, 0.98, 0.6], [0.1, 0.9, 0.8], [False, True, True]
    records = build_records([f"Where was P{i} born?" for i in range(3)], ["G0", "G1", "G2"],
                            ["G" + str(i) if ok else "X" for i, ok in enumerate(correct)],
                            [AnswerScore(math.log(p), p) for p in answer_p],
                            recitations=["P0 recited", "P1 recited", "P2 recited"],
                            recitation_scores=[AnswerScore(math.log(p), p) for p in recitation_p])
    assert [r["confidence"] for r in records] == pytest.approx([0.099, 0.882, 0.48])
    assert [r["min_char_prob"] for r in records] == pytest.approx([0.1, 0.9, 0.6])
    summary = summarize(records)
    assert summary["aurc"] == pytest.approx(aurc_optimal(scored(records)))  # the wrong answer ranks last
    assert summary["aurc_answer_alone"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)  # ... first, by the answer alone
    assert summary["ece_answer_alone"] == pytest.approx(ece(list(zip(answer_p, correct, strict=True))))
    assert "aurc_answer_alone" not in summarize(_handmade([0.9, 0.2], [True, False]))


def _write_eval(tmp_path: Path, name: str, records: list[dict]) -> Path:
    predictions = tmp_path / f"{name}.predictions"
    predictions.write_text("".join(r["prediction"] + "\n" for r in records), encoding="utf-8")
    write_records(records_path_for(predictions), records)
    return predictions


def test_the_abstention_command_chooses_on_held_out_and_applies_to_dev(tmp_path, capsys):
    held = _write_eval(tmp_path, "held", _handmade([0.9, 0.8, 0.7, 0.6, 0.5, 0.4],
                                                   [True, True, False, True, False, False]))
    dev = _write_eval(tmp_path, "dev", _handmade([0.95, 0.65, 0.6, 0.59, 0.1], [True, False, True, True, False]))
    out = tmp_path / "abstain"
    argv = ["--holdout", str(held), "--dev", str(dev), "--target_precision", "0.75", "--out_dir", str(out)]
    assert run_cli(abstention.main, argv) == 0
    printed = capsys.readouterr().out
    assert "threshold 0.6 (answer when the record's confidence >= it): precision 75.0% (3/4), coverage 66.7%" \
        in printed
    assert "at the held-out threshold 0.6: precision 66.7% (2/3), coverage 60.0% (3/5)" in printed
    result = json.loads((out / "abstention.json").read_text())
    assert result["threshold"] == 0.6 and result["dev"]["at_threshold"]["answered"] == 3
    assert result["dev"]["summary"]["answers"] == {"right": 3, "total": 5, "accuracy": 0.6}
    for png in ("coverage_accuracy.png", "reliability.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _grounded(records: list[dict], grounded: list[bool | None]) -> list[dict]:
    return [{**r, "grounded": g} for r, g in zip(records, grounded, strict=True)]


def test_the_grounded_only_rule_chooses_among_grounded_answers_and_counts_every_question(tmp_path, capsys):
    """--grounded_only never answers an ungrounded answer (one that cannot be checked is answered, as
    evaluate_birthplace.py --abstain_ungrounded does) and still divides by every question."""
    held = _grounded(_handmade([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [True, True, False, True, False, False]),
                     [True, False, True, True, True, False])
    dev = _grounded(_handmade([0.95, 0.65, 0.6, 0.59, 0.1], [True, False, True, True, False]),
                    [True, True, False, True, None])
    points, total = scored_grounded(dev)
    assert total == 5 and [c for _, c in points] == [True, False, True, False]
    assert [p for p, _ in points] == pytest.approx([0.95, 0.65, 0.59, 0.1])
    held_path, dev_path = _write_eval(tmp_path, "held", held), _write_eval(tmp_path, "dev", dev)
    argv = ["--holdout", str(held_path), "--dev", str(dev_path), "--target_precision", "0.6"]
    assert run_cli(abstention.main, [*argv, "--out_dir", str(tmp_path / "all")]) == 0
    assert json.loads((tmp_path / "all" / "abstention.json").read_text())["threshold"] == 0.5  # 3 of 5 right
    assert run_cli(abstention.main, [*argv, "--out_dir", str(tmp_path / "g"), "--grounded_only"]) == 0
    printed = capsys.readouterr().out
    # grounded held-out answers: 0.9 right, 0.7 wrong, 0.6 right, 0.5 wrong; >= 0.6 gives 2 of 3 over 6 questions
    assert ("threshold 0.6 (answer when the record's confidence >= it, grounded answers only): precision 66.7% "
            "(2/3), coverage 50.0% (3/6)") in printed
    # dev: 0.95 and 0.65 answered; 0.6 is not grounded, 0.59 and the unchecked 0.1 fall below
    assert "at the held-out threshold 0.6: precision 50.0% (1/2), coverage 40.0% (2/5)" in printed
    assert "evaluate_birthplace.py ... --abstain_ungrounded --abstain_below 0.6" in printed
    result = json.loads((tmp_path / "g" / "abstention.json").read_text())
    assert result["grounded_only"] and result["dev"]["at_threshold"]["total"] == 5
    assert (tmp_path / "g" / "coverage_accuracy.png").read_bytes()[:4] == b"\x89PNG"
    ungrounded = _write_eval(tmp_path, "plain", _handmade([0.9, 0.2], [True, False]))
    assert run_cli(abstention.main, ["--dev", str(ungrounded), "--out_dir", str(tmp_path / "x"),
                                     "--grounded_only"]) == 1
    assert _one_error_line(capsys) == (f"error: {records_path_for(ungrounded)}: no record says whether its answer is "
                                       "grounded (evaluated without wiki.txt?): --grounded_only needs it")


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_records_of_another_predictions_file_are_one_line(tmp_path, capsys):
    records = _handmade([0.9, 0.4, 0.3], [True, False, False])
    dev = _write_eval(tmp_path, "dev", records)
    other = tmp_path / "other.predictions"
    other.write_text("G0\nNowhere\nElsewhere\n")
    argv = ["--dev", str(other), "--dev_records", str(records_path_for(dev)), "--out_dir", str(tmp_path / "o")]
    assert run_cli(abstention.main, argv) == 1
    assert _one_error_line(capsys) == (f"error: {records_path_for(dev)}:2: prediction 'Elsewhere' but {other}:2 is "
                                       "'Nowhere': records of another evaluation?")
    other.write_text("G0\nElsewhere\n")
    with pytest.raises(DataFileError, match=r"3 records but .* has 2 predictions: records of another evaluation"):
        check_records_match(records_path_for(dev), read_records(records_path_for(dev)), other)
    records_path_for(dev).write_text('{"line": 1}\n')
    with pytest.raises(DataFileError, match=r"records.jsonl:1: not an evaluation record \(no question, gold"):
        read_records(records_path_for(dev))
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, tokenizer) -> Path:
    out = tmp_path_factory.mktemp("model")
    _model(tokenizer, "rope").save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.2"])
def test_a_threshold_outside_0_1_is_one_line(value, world, tiny_model, tmp_path, capsys):
    argv = ["--model_name_or_path", str(tiny_model), "--eval_corpus_path", str(world / "birth_dev.tsv"),
            "--outputs_path", str(tmp_path / "p" / "dev.predictions"), "--abstain_below", value]
    assert run_cli(evaluate_birthplace.main, argv) == 1
    assert _one_error_line(capsys) == (f"error: --abstain_below {float(value)}: must be a probability between 0 and 1 "
                                       "(exclusive)")
    assert not (tmp_path / "p").exists()
    argv = ["--dev", "x.predictions", "--out_dir", str(tmp_path / "p"), "--target_precision", value]
    if float(value) != 1:  # a target precision of 1 is a valid target
        assert run_cli(abstention.main, argv) == 1
        assert _one_error_line(capsys) == f"error: --target_precision {float(value)}: must be in (0, 1]"


def test_continue_recitation_without_span_answers_is_one_line(world, tiny_model, tmp_path, capsys):
    argv = ["--model_name_or_path", str(tiny_model), "--eval_corpus_path", str(world / "birth_dev.tsv"),
            "--outputs_path", str(tmp_path / "p" / "dev.predictions"), "--continue_recitation", "True"]
    assert run_cli(evaluate_birthplace.main, argv) == 1
    assert _one_error_line(capsys) == ("error: --continue_recitation True only changes --answer_from_recitation True; "
                                       "give both")
    assert not (tmp_path / "p").exists()


def test_a_model_without_a_vocabulary_is_one_line(world, tiny_model, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    (model / "vocab.json").unlink()
    argv = ["--model_name_or_path", str(model), "--eval_corpus_path", str(world / "birth_dev.tsv"),
            "--outputs_path", str(tmp_path / "p" / "dev.predictions")]
    assert run_cli(evaluate_birthplace.main, argv) == 1
    assert _one_error_line(capsys) == (f"error: {model}: no vocab.json (the tokenizer's vocabulary); was saving "
                                       "interrupted?")
    assert not (tmp_path / "p").exists()


def test_an_evaluation_writes_records_and_page_beside_its_predictions(world, tiny_model, tmp_path, capsys):
    """Records (grounded against the world's wiki.txt, found beside the TSV) and the page by default; with
    --abstain_below the predictions are "" below it, scored as wrong, and reported apart."""
    preds = tmp_path / "dev.predictions"
    argv = ["--model_name_or_path", str(tiny_model), "--eval_corpus_path", str(world / "birth_dev.tsv"),
            "--outputs_path", str(preds), "--results_path", str(tmp_path / "dev.json"), "--max_new_tokens",
            str(MAX_NEW)]
    assert run_cli(evaluate_birthplace.main, argv) == 0
    records = read_records(records_path_for(preds))
    check_records_match(records_path_for(preds), records, preds)
    assert len(records) == 8 and all(r["person_in_wiki"] and r["wiki_lines"] for r in records)
    assert all(r["gold_grounded"] for r in records)  # the synthetic world names every birthplace
    assert (tmp_path / "dev.predictions.html").read_text().count('<tr id="q') == 8
    threshold = sorted(r["confidence"] for r in records)[4]  # the 4 least confident fall below
    assert run_cli(evaluate_birthplace.main, [*argv, "--abstain_below", repr(threshold)]) == 0
    again = read_records(records_path_for(preds))
    assert [r["answer"] for r in again] == [r["answer"] for r in records]
    assert [r["confidence"] for r in again] == pytest.approx([r["confidence"] for r in records])
    assert sum(r["abstained"] for r in again) == 4
    assert preds.read_text().splitlines() == [r["prediction"] for r in again]
    assert all(r["prediction"] == "" for r in again if r["abstained"])
    results = json.loads((tmp_path / "dev.json").read_text())
    assert results["analysis"]["abstained"] == 4 and results["analysis"]["answered"]["total"] == 4
    assert results["analysis"] == summarize(again)
    assert "abstained on 4; answered 4 (50.0% coverage)" in capsys.readouterr().out


def test_a_generated_line_break_keeps_one_prediction_per_line(world, tiny_model, tmp_path, monkeypatch, capsys):
    """wiki.txt's vocabulary holds the newline, so an undertrained model can generate one inside an answer: the
    predictions file stays one line per question (a space there), the records keep the answer, the score is the
    answer's own, and the dev groups of chargpt.recipes.reproduce read the file."""
    questions = load_qa_tsv(world / "birth_dev.tsv")
    first, second = questions["answer"][:2]
    broken = [first[:3] + "\n" + first[3:], "\n" + second, *questions["answer"][2:]]  # two broken, the rest right
    answer_of = dict(zip(questions["question"], broken, strict=True))  # whatever order the questions come in
    monkeypatch.setattr(answering, "predict_birthplaces", lambda model, tok, asked, *a, **kw: [answer_of[q]
                                                                                             for q in asked])
    preds = tmp_path / "dev.predictions"
    argv = ["--model_name_or_path", str(tiny_model), "--eval_corpus_path", str(world / "birth_dev.tsv"),
            "--outputs_path", str(preds), "--results_path", str(tmp_path / "dev.json")]
    assert run_cli(evaluate_birthplace.main, argv) == 0
    lines = file_lines(preds.read_text(encoding="utf-8"))
    assert lines == [first[:3] + " " + first[3:], " " + second, *questions["answer"][2:]]
    assert as_line("a\r\nb") == "a  b"
    records = read_records(records_path_for(preds))
    assert [r["prediction"] for r in records[:2]] == broken[:2]
    check_records_match(records_path_for(preds), records, preds)
    assert json.loads((tmp_path / "dev.json").read_text())["correct"] == len(broken) - 2
    experiments = importlib.import_module("chargpt.recipes.reproduce")
    half = tmp_path / "half.tsv"
    pairs = list(zip(questions["question"], questions["answer"], strict=True))[:4]
    half.write_text("".join(f"{q}\t{a}\n" for q, a in pairs))
    assert experiments.group_scores(preds, world / "birth_dev.tsv", {"half": half})["half"]["correct"] == 2


def test_the_held_out_threshold_travels_with_the_model(tmp_path, world, tiny_model, capsys):
    """chargpt.evaluation.abstention --save_to writes the threshold and its provenance into the model folder; the
    birthplace-qa pipeline then abstains below it without being told."""
    import shutil

    from transformers import pipeline

    from chargpt.training.hub import write_model_card
    from modeling_chargpt import TASK, BirthplaceQAPipeline

    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    write_model_card(model / "README.md", {"title": "tiny"})  # as a training run leaves it
    held = _write_eval(tmp_path, "held", _handmade([0.9, 0.8, 0.7, 0.6, 0.5, 0.4],
                                                   [True, True, False, True, False, False]))
    dev = _write_eval(tmp_path, "dev", _handmade([0.95, 0.65, 0.6, 0.59, 0.1], [True, False, True, True, False]))
    argv = ["--holdout", str(held), "--dev", str(dev), "--target_precision", "0.75", "--out_dir",
            str(tmp_path / "a"), "--save_to", str(model)]
    assert run_cli(abstention.main, argv) == 0
    answering = json.loads((model / "config.json").read_text())["answering"]
    assert answering["abstain_below"] == 0.6
    assert answering["abstention"] == {"target_precision": 0.75, "holdout_precision": 0.75,
                                       "holdout_coverage": pytest.approx(4 / 6), "holdout": str(held)}
    card = (model / "README.md").read_text()  # whoever downloads it reads the threshold in its card
    assert card.count("## How it answers") == 1 and ('Below a confidence of 0.6 it says "I don\'t know", a threshold '
                                                     "chosen for 75% precision on held-out training questions (there "
                                                     "it answered 66.7% of them, 75.0% right).") in card
    ask = pipeline(TASK, model=str(model), pipeline_class=BirthplaceQAPipeline, device="cpu")
    assert ask.settings.abstain_below == 0.6
    question = (world / "birth_dev.tsv").read_text(encoding="utf-8").split("\t")[0]
    result = ask(question)
    assert result["abstained"] == (result["probability"] < 0.6)
    assert ask(question, abstain_below=None)["abstained"] is False  # turned off by the caller
    capsys.readouterr()
    assert run_cli(abstention.main, [*argv[:-2], "--save_to", str(model), "--grounded_only"]) == 1
    assert "--save_to needs --holdout" in capsys.readouterr().err

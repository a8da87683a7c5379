"""Knowing whom it read about: questions as people type them, people no corpus mentions, the calibrated confidence
saved with a model and used by the pipeline and chargpt-ask, and outputs that never overwrite an input."""

from __future__ import annotations

import itertools
import json
import random
import types
from pathlib import Path

import pytest
from test_pipeline import finetune, world  # noqa: F401  (the module's fixtures)

import evaluate_birthplace
from chargpt.evaluation import ask as ask_cli
from chargpt.evaluation.calibrate import (
    choose_keep_threshold,
    choose_precision_threshold,
    fit_logistic,
    fit_on,
    refused_share,
    refusing_threshold,
    save_calibration,
)
from chargpt.evaluation.known_unknown import auroc, known_unknown_summary
from chargpt.training import run_cli
from data_scripts.unknown_people import invented_names, other_world_names, recombined_names, unknown_questions
from data_scripts.unknown_people import main as unknown_main
from modeling_chargpt import TASK, BirthplaceQAPipeline
from modeling_chargpt.answering import AnsweringSettings, QuestionError, name_casings, typed_question
from modeling_chargpt.calibration import Calibration

# ---------------------------------------------------------------------------------------------------------------
# questions as people type them
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("typed", ["where was ann lee born", "WHERE WAS Ann Lee BORN?",
                                   "  Where  was Ann   Lee born ? ", "Ann Lee", "Ann Lee?", " Ann  Lee "])
def test_typed_questions_become_the_one_question(typed):
    assert typed_question(typed) in {"Where was Ann Lee born?", "Where was ann lee born?"}
    assert typed_question(typed).replace("ann lee", "Ann Lee") == "Where was Ann Lee born?"


def test_a_question_in_the_exact_form_is_kept_as_it_is():
    """The evaluation files are read as the reference reads them, odd names included."""
    for question in ("Where was MWF born?", "Where was ann  lee born?"):
        assert typed_question(question) == question


@pytest.mark.parametrize("other", ["What is the capital of Teasmouth?", "Who was Ann Lee?", "when was Ann Lee born",
                                   "Is Ann Lee alive?", "How old is Ann Lee"])
def test_another_kind_of_question_is_one_line_saying_what_the_model_answers(other):
    with pytest.raises(QuestionError, match="another kind of question: this model answers only 'Where was NAME born"):
        typed_question(other)


def test_empty_questions_are_refused():
    for empty in ("", "   ", "?"):
        with pytest.raises(QuestionError):
            typed_question(empty)


def test_name_casings_offer_the_capitalized_forms():
    assert name_casings("charles de gaulle") == ["charles de gaulle", "Charles De Gaulle", "Charles de Gaulle"]
    assert name_casings("Ann Lee") == ["Ann Lee"]
    assert "Jean-Paul Sartre" in name_casings("jean-paul sartre")


# ---------------------------------------------------------------------------------------------------------------
# people no corpus mentions
# ---------------------------------------------------------------------------------------------------------------

NAMES = ["Ann Lee", "Khatchig Mouradian", "Bob Van Dyke", "Maria Callas", "Jean-Paul Sartre", "Wu Wei"]
CORPUS = "".join(f"{name}. a person.\n" for name in NAMES) + "Ann Callas was here.\n"


@pytest.mark.parametrize("make", [recombined_names, invented_names])
def test_made_up_names_are_nowhere_in_the_corpus_and_repeat_by_seed(make):
    names = make(NAMES, CORPUS, 8, seed=3)
    assert len(set(names)) == 8 and not any(name in CORPUS for name in names)
    assert make(NAMES, CORPUS, 8, seed=3) == names
    assert make(NAMES, CORPUS, 8, seed=4) != names
    avoided = make(NAMES, CORPUS, 4, seed=3, avoid=names)
    assert not set(avoided) & set(names)


def test_recombined_names_join_parts_of_two_people_and_invented_ones_keep_the_alphabet():
    firsts, lasts = {n.split()[0] for n in NAMES}, {n.split()[-1] for n in NAMES}
    for name in recombined_names(NAMES, CORPUS, 10, seed=0):
        assert name.split()[0] in firsts and name.split()[-1] in lasts and name not in NAMES
    letters = set("".join(NAMES))
    for name in invented_names(NAMES, CORPUS, 10, seed=0):
        assert set(name) <= letters
        assert sorted(len(w) for w in name.split()) in [sorted(len(w) for w in n.split()) for n in NAMES]


def test_other_world_people_are_not_the_corpus_worlds(world):  # noqa: F811
    corpus = (world / "wiki.txt").read_text(encoding="utf-8")
    names = other_world_names(7, corpus, 20)
    assert len(set(names)) == 20 and not any(name in corpus for name in names)


def test_unknown_questions_split_the_kinds_and_need_a_world_seed():
    questions = unknown_questions([f"Where was {n} born?" for n in NAMES], CORPUS, 7)
    assert len(questions) == 7 and all(q.startswith("Where was ") and q.endswith(" born?") for q in questions)
    with pytest.raises(ValueError, match="world seed"):
        unknown_questions([], CORPUS, 2, kinds=["other_world"])
    with pytest.raises(ValueError, match="not one of"):
        unknown_questions([], CORPUS, 2, kinds=["dev"])


def test_the_unknown_people_command_writes_questions_and_refuses_to_overwrite_its_input(world, tmp_path):  # noqa: F811
    out = tmp_path / "unknown.tsv"
    args = ["--wiki", str(world / "wiki.txt"), "--train", str(world / "birth_places_train.tsv")]
    assert unknown_main([*args, "--out", str(out), "--n", "6", "--kinds", "other_world", "--world_seed", "9"]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6 and all(line.startswith("Where was ") for line in lines)
    before = (world / "birth_places_train.tsv").read_bytes()
    with pytest.raises(SystemExit):
        unknown_main([*args, "--out", str(world / "birth_places_train.tsv")])
    assert (world / "birth_places_train.tsv").read_bytes() == before


# ---------------------------------------------------------------------------------------------------------------
# the calibration and its measures
# ---------------------------------------------------------------------------------------------------------------

def test_auroc_is_the_share_of_pairs_ranked_right():
    rng = random.Random(0)
    pos, neg = [rng.choice(range(6)) for _ in range(30)], [rng.choice(range(6)) for _ in range(25)]
    pairs = [(p > n) + 0.5 * (p == n) for p, n in itertools.product(pos, neg)]
    assert auroc(pos, neg) == pytest.approx(sum(pairs) / len(pairs))
    assert auroc([2, 3], [0, 1]) == 1.0 and auroc([0], [1]) == 0.0 and auroc([], [1]) is None


def test_a_fitted_calibration_follows_the_data_and_survives_its_round_trip():
    rng = random.Random(1)
    rows, labels = [], []
    for _ in range(300):
        known = rng.random() < 0.6
        name = rng.gauss(-0.3 if known else -2.5, 0.3)
        output = rng.gauss(-1.0, 1.0)
        right = known and rng.random() < 1 / (1 + 2.718 ** (-2 * (output + 1)))
        rows.append((name, output))
        labels.append(right)
    cal = fit_logistic(rows, labels)
    assert cal.probability(name_logprob=-2.5, output_logprob=0.0) < 0.05  # an unknown name: almost never right
    assert cal.probability(name_logprob=-0.3, output_logprob=1.0) > cal.probability(name_logprob=-0.3,
                                                                                   output_logprob=-3.0)
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal
    with pytest.raises(ValueError, match="both right and wrong"):
        fit_logistic(rows, [False] * len(rows))
    with pytest.raises(ValueError, match="not one of"):
        Calibration((1.0,), 0.0, (0.0,), (1.0,), ("grounded",))


def test_the_gated_calibration_orders_the_answers_about_people_it_read_by_their_output_alone():
    """fit_on(gated=True): P(read about | name), from held-out against unknown people, times P(right | output), from the
    held-out answers. A known name's familiarity then leaves the order of its answers to the output; an unknown name
    stays near zero however sure the output; the default is the one regression on both."""
    rng = random.Random(2)
    held, gold, unknown = [], [], []
    for _ in range(200):
        output = rng.gauss(-1.0, 1.0)
        right = rng.random() < 1 / (1 + 2.718 ** (-2 * (output + 1)))
        held.append({"answer": "A" if right else "B", "name_score": rng.gauss(-0.3, 0.3),
                     "answer_score": types.SimpleNamespace(logprob=output), "recitation_score": None})
        gold.append("A")
        unknown.append({"answer": "C", "name_score": rng.gauss(-2.5, 0.3),
                        "answer_score": types.SimpleNamespace(logprob=rng.gauss(-1.0, 1.0)), "recitation_score": None})
    cal = fit_on(held, gold, unknown, gated=True)
    assert cal.features == ("output_logprob",) and cal.gate["features"] == ["name_logprob"]
    sure, unsure = (cal.probability(name_logprob=name, output_logprob=1.0) for name in (-0.3, -2.5))
    assert sure > 0.8 and unsure < 0.05
    gate = Calibration.from_dict(cal.gate).probability(name_logprob=-0.1)
    answers = Calibration(cal.weights, cal.bias, cal.mean, cal.scale, cal.features)
    assert cal.probability(name_logprob=-0.1, output_logprob=-2.0) == pytest.approx(
        gate * answers.probability(output_logprob=-2.0))
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal
    assert fit_on(held, gold, unknown).gate is None


def test_the_threshold_keeps_the_share_of_right_answers_asked_for():
    probabilities = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05]
    assert choose_keep_threshold(probabilities, 0.9) == 0.1
    assert choose_keep_threshold(probabilities, 0.5) == 0.5
    assert choose_keep_threshold(probabilities, 1.0) == 0.05
    assert choose_keep_threshold([], 0.9) is None
    kept = choose_keep_threshold(probabilities, 0.73)
    assert sum(p >= kept for p in probabilities) / len(probabilities) >= 0.73


def test_the_precision_threshold_is_the_lowest_that_reaches_the_precision_asked_for():
    probabilities = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05]
    right = [True, True, False, True, True, True, True, False, False, True]
    # from the top: 1/1, 2/2, 2/3, 3/4, 4/5, 5/6, 6/7, 6/8, 6/9, 7/10 right
    assert choose_precision_threshold(probabilities, right, 0.85) == 0.3  # 6/7: the lowest at or above 85%
    assert choose_precision_threshold(probabilities, right, 0.7) == 0.05  # all ten: 70%
    assert choose_precision_threshold(probabilities, right, 0.99) == 0.8  # 2/2, not 1/1: the most answers
    assert choose_precision_threshold(probabilities, [False] * 10, 0.9) == 0.05  # none right: all equally bad
    assert choose_precision_threshold([], [], 0.9) is None
    # a threshold lets through every answer of its probability: a tie is one step
    assert choose_precision_threshold([0.9, 0.5, 0.5], [True, True, False], 0.7) == 0.9


def test_the_card_says_which_rule_chose_the_threshold():
    from chargpt.training.hub import describe_answering

    answering = {"abstain_below": 0.8, "calibration": {"fitted_on": {"unknown_questions": 400}},
                 "abstention": {"rule": "precision", "precision": 0.95, "holdout_precision": 0.951,
                                "unknown_questions": 400, "unknown_answered": 2}}
    text = describe_answering({"answer_format": "recite", "answering": answering})
    assert "at least 95% right (95.1% there)" in text and "answered 2 of 400 people it never read" in text


def test_the_unknown_people_can_raise_the_threshold():
    unknown = [0.01, 0.02, 0.3, 0.6, 0.05, 0.04, 0.03, 0.02, 0.01, 0.2]
    assert refused_share(unknown, 0.25) == 0.8
    raised = refusing_threshold(unknown, 0.9)
    assert refused_share(unknown, raised) >= 0.9 and raised <= 0.6 + 1e-9 and raised > 0.3
    assert refused_share(unknown, refusing_threshold(unknown, 1.0)) == 1.0


def test_the_known_unknown_summary_counts_what_a_person_sees():
    def result(answer, abstained, confidence, name):
        return {"answer": answer, "abstained": abstained, "confidence": confidence, "probability": 0.9,
                "name_score": name}
    known = [result("Paris", False, 0.9, -0.1), result("Rome", False, 0.6, -0.2), result("Oslo", True, 0.1, -0.3)]
    unknown = [result("Paris", True, 0.01, -3.0), result("Rome", False, 0.7, -0.5)]
    summary = known_unknown_summary(known, ["Paris", "Lima", "Oslo"], unknown)
    assert summary["known"]["answered"] == 2 and summary["known"]["right_answered"] == 1
    assert summary["known"]["precision"] == 0.5 and summary["known"]["right_kept"] == 0.5
    assert summary["unknown"]["dont_know_share"] == 0.5
    assert summary["auroc_name_score"] == 1.0 and summary["auroc_raw_probability"] == 0.5


# ---------------------------------------------------------------------------------------------------------------
# saved with the model, used by the pipeline and chargpt-ask
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def calibrated(world, tmp_path_factory):  # noqa: F811
    """A tiny finetuned model with a calibration saved the way `chargpt.evaluation.calibrate` saves it: p(right) rises
    with the name's familiarity, and the threshold sits between what the world's own dev names and invented ones get."""
    folder = finetune(world, tmp_path_factory.mktemp("calibrated") / "model")
    cal = Calibration((4.0, 0.0), 0.0, (-2.0, 0.0), (0.5, 1.0), fitted_on={"test": True})
    save_calibration(folder, cal.to_dict(), 0.5, {"rule": "keep_right", "keep_right": 0.95})
    return folder


def test_the_calibration_is_a_declared_config_field_saved_through_save_pretrained(calibrated):
    from modeling_chargpt import CharGPTConfig

    saved = json.loads((calibrated / "config.json").read_text(encoding="utf-8"))
    assert saved["answering"]["calibration"]["weights"] == [4.0, 0.0]
    assert saved["answering"]["abstain_below"] == 0.5
    assert "answering" in CharGPTConfig.__init__.__code__.co_varnames  # declared, not set after construction
    with pytest.raises(ValueError, match="must be a dict"):
        CharGPTConfig(answering="yes")


def test_the_pipeline_shows_the_calibrated_confidence_and_abstains_by_it(calibrated, world):  # noqa: F811
    from chargpt.training import load_chargpt

    model, tokenizer = load_chargpt(calibrated)
    ask = BirthplaceQAPipeline(model=model, tokenizer=tokenizer, task=TASK)
    dev = [line.split("\t")[0] for line in (world / "birth_dev.tsv").read_text(encoding="utf-8").splitlines()]
    cal = Calibration.from_dict(model.config.answering["calibration"])
    stranger = other_world_names(5, (world / "wiki.txt").read_text(encoding="utf-8"), 1)[0]
    for result in ask(dev[:4] + [stranger]):
        expected = cal.probability(name_logprob=result["name_score"], output_logprob=0.0)
        assert result["confidence"] == pytest.approx(expected)
        assert result["abstained"] == (result["confidence"] < 0.5)
        assert 0 < result["probability"] <= 1  # the raw probability, beside it
    with pytest.raises(QuestionError, match="the saved calibration cannot be read"):
        BirthplaceQAPipeline(model=model, tokenizer=tokenizer, task=TASK,
                             settings=AnsweringSettings(calibration={"weights": [1.0]}))("Ann Lee")


def test_chargpt_ask_answers_the_good_questions_and_names_each_bad_one(calibrated, world, capsys):  # noqa: F811
    dev = (world / "birth_dev.tsv").read_text(encoding="utf-8").splitlines()[0].split("\t")[0]
    typed = "where was " + dev[len("Where was "):-len("?")]  # the name's own case: the only casing offered
    status = run_cli(ask_cli.main, [str(calibrated), typed, "What is the capital of Rome?", "Where was Ann € born?",
                                    dev])
    out, err = capsys.readouterr()
    assert status == 1
    assert out.count(dev) == 2 and "raw probability" in out  # the calibrated confidence, with the raw one
    assert "error: question 2: 'What is the capital of Rome?' is another kind of question" in err
    assert "error: question 3:" in err and "not in the vocabulary" in err


def test_evaluate_records_keep_the_signals(calibrated, world, tmp_path):  # noqa: F811
    out = tmp_path / "dev.predictions"
    assert run_cli(evaluate_birthplace.main, ["--model_name_or_path", str(calibrated), "--eval_corpus_path",
                                             str(world / "birth_dev.tsv"), "--outputs_path", str(out)]) == 0
    records = [json.loads(line) for line in Path(f"{out}.records.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(r["name_score"] < 0 and 0 <= r["right_probability"] <= 1 for r in records)
    # --abstain_below applies to the calibrated probability, as the pipeline's threshold does
    cut = sorted(r["right_probability"] for r in records)[len(records) // 2]
    assert run_cli(evaluate_birthplace.main, ["--model_name_or_path", str(calibrated), "--eval_corpus_path",
                                             str(world / "birth_dev.tsv"), "--outputs_path", str(out),
                                             "--abstain_below", str(cut)]) == 0
    records = [json.loads(line) for line in Path(f"{out}.records.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["abstained"] for r in records] == [r["right_probability"] < cut for r in records]


# ---------------------------------------------------------------------------------------------------------------
# no output over an input
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--outputs_path", "--results_path", "--records_path", "--html_path"])
def test_evaluate_refuses_an_output_that_is_its_questions_file(flag, world, tmp_path, capsys):  # noqa: F811
    questions = tmp_path / "dev.tsv"
    questions.write_bytes((world / "birth_dev.tsv").read_bytes())
    before = questions.read_bytes()
    argv = ["--baseline", "london", "--eval_corpus_path", str(questions), flag, str(questions)]
    assert run_cli(evaluate_birthplace.main, argv) == 1
    assert f"{flag} {questions} is --eval_corpus_path" in capsys.readouterr().err
    assert questions.read_bytes() == before


def test_evaluate_refuses_an_output_inside_the_model_folder(calibrated, world, capsys):  # noqa: F811
    argv = ["--model_name_or_path", str(calibrated), "--eval_corpus_path", str(world / "birth_dev.tsv"),
            "--outputs_path", str(calibrated / "dev.predictions")]
    assert run_cli(evaluate_birthplace.main, argv) == 1
    assert "is inside --model_name_or_path" in capsys.readouterr().err
    assert not (calibrated / "dev.predictions").exists()


def test_a_training_run_refuses_an_output_dir_inside_the_model_it_reads(calibrated, world, capsys):  # noqa: F811
    import train_finetune

    argv = ["--pretrain_corpus_path", str(world / "wiki.txt"), "--finetune_corpus_path",
            str(world / "birth_places_train.tsv"), "--model_name_or_path", str(calibrated), "--output_dir",
            str(calibrated / "again"), "--max_steps", "1"]
    assert run_cli(train_finetune.main, argv) == 1
    assert f"--output_dir {calibrated / 'again'} is inside --model_name_or_path" in capsys.readouterr().err
    assert not (calibrated / "again").exists()
    argv[argv.index("--output_dir") + 1] = str(world / "wiki.txt")
    assert run_cli(train_finetune.main, argv) == 1
    assert "is --pretrain_corpus_path" in capsys.readouterr().err


@pytest.mark.parametrize("driver", ["chargpt.recipes.reproduce", "chargpt.recipes.select_finetune_lr"])
def test_the_recipe_drivers_refuse_an_out_dir_that_is_their_data(driver, world, monkeypatch, capsys):  # noqa: F811
    import importlib

    module = importlib.import_module(driver)
    with pytest.raises(SystemExit, match=f"error: --out_dir {world} is --data_dir"):
        module.main(["--data_dir", str(world), "--out_dir", str(world), "--split_only"]
                    if driver == "select_finetune_lr" else ["--data_dir", str(world), "--out_dir", str(world)])


def test_evaluate_refuses_to_write_over_the_wiki_it_finds_beside_the_questions(world, tmp_path, capsys):  # noqa: F811
    (tmp_path / "dev.tsv").write_bytes((world / "birth_dev.tsv").read_bytes())
    wiki = tmp_path / "wiki.txt"
    wiki.write_bytes((world / "wiki.txt").read_bytes())
    argv = ["--baseline", "london", "--eval_corpus_path", str(tmp_path / "dev.tsv"), "--html_path", str(wiki)]
    assert run_cli(evaluate_birthplace.main, argv) == 1
    assert f"--html_path {wiki} is --wiki_path" in capsys.readouterr().err
    assert wiki.read_bytes() == (world / "wiki.txt").read_bytes()


def test_the_known_unknown_command_writes_its_record_and_plot(calibrated, world, tmp_path, capsys):  # noqa: F811
    from chargpt.evaluation import known_unknown

    unknown = tmp_path / "unknown.tsv"
    assert unknown_main(["--wiki", str(world / "wiki.txt"), "--train", str(world / "birth_places_train.tsv"),
                         "--out", str(unknown), "--n", "8", "--kinds", "other_world", "--world_seed", "4"]) == 0
    argv = ["--model_name_or_path", str(calibrated), "--known", str(world / "birth_dev.tsv"), "--unknown",
            str(unknown), "--results_path", str(tmp_path / "r.json"), "--reliability_plot", str(tmp_path / "r.png")]
    assert run_cli(known_unknown.main, argv) == 0
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["unknown"]["questions"] == 8 and record["known"]["questions"] == 10
    assert record["known"]["calibrated"] is True and record["saved_setting"]["abstain_below"] == 0.5
    assert record["command"].startswith("python -m chargpt.evaluation.known_unknown --model_name_or_path")
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert "AUROC known vs unknown" in capsys.readouterr().out
    argv[argv.index("--results_path") + 1] = str(unknown)
    assert run_cli(known_unknown.main, argv) == 1
    assert "--results_path" in capsys.readouterr().err and len(unknown.read_text().splitlines()) == 8


def test_known_and_held_out_answers_read_from_an_evaluations_records_are_the_ones_asked_again(
        calibrated, world, tmp_path):  # noqa: F811
    """known_unknown --known_records and calibrate --holdout_records read the answers an evaluation of the same model
    wrote instead of asking again (make best saves minutes so): every number they write is the same."""
    from chargpt.evaluation import calibrate, known_unknown

    dev = world / "birth_dev.tsv"
    records = tmp_path / "dev.predictions.records.jsonl"
    assert run_cli(evaluate_birthplace.main, ["--model_name_or_path", str(calibrated), "--eval_corpus_path", str(dev),
                                             "--outputs_path", str(tmp_path / "dev.predictions")]) == 0
    unknown = tmp_path / "unknown.tsv"
    assert unknown_main(["--wiki", str(world / "wiki.txt"), "--train", str(world / "birth_places_train.tsv"),
                         "--out", str(unknown), "--n", "6", "--kinds", "other_world", "--world_seed", "4"]) == 0
    measured = {}
    for way, more in (("asked", []), ("read", ["--known_records", str(records)])):
        argv = ["--model_name_or_path", str(calibrated), "--known", str(dev), "--unknown", str(unknown),
                "--results_path", str(tmp_path / f"{way}.json"), *more]
        assert run_cli(known_unknown.main, argv) == 0
        measured[way] = json.loads((tmp_path / f"{way}.json").read_text())
    for key in ("known", "unknown", "auroc_shown", "auroc_raw_probability", "auroc_name_score"):
        assert measured["read"][key] == measured["asked"][key], key
    assert measured["read"]["known"]["calibrated"] is True  # the saved calibration, not the raw probability
    # held-out questions some of which it answers right: dev's, every other place set to the model's own answer
    fitted, held = {}, tmp_path / "held.tsv"
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    held.write_text("".join(f"{r['question']}\t{r['answer'] if i % 2 and r['answer'].strip() else r['gold']}\n"
                            for i, r in enumerate(rows)), encoding="utf-8")
    assert run_cli(evaluate_birthplace.main, ["--model_name_or_path", str(calibrated), "--eval_corpus_path", str(held),
                                             "--outputs_path", str(tmp_path / "held.predictions")]) == 0
    for way, more in (("asked", []), ("read", ["--holdout_records", str(tmp_path / "held.predictions.records.jsonl")])):
        argv = ["--model_name_or_path", str(calibrated), "--holdout", str(held), "--unknown", str(unknown),
                "--results_path", str(tmp_path / f"fit-{way}.json"), *more]
        assert run_cli(calibrate.main, argv) == 0
        fitted[way] = json.loads((tmp_path / f"fit-{way}.json").read_text())
    assert fitted["read"]["calibration"] is not None
    assert {k: v for k, v in fitted["read"].items() if k != "command"} == {
        k: v for k, v in fitted["asked"].items() if k != "command"}
    other = tmp_path / "other.jsonl"  # records of other questions are refused, naming the file and the line
    lines = records.read_text().splitlines()
    other.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")
    argv = ["--model_name_or_path", str(calibrated), "--known", str(dev), "--unknown", str(unknown), "--known_records",
            str(other)]
    assert run_cli(known_unknown.main, argv) == 1

"""The birthplace-qa pipeline answers like evaluate_birthplace.py in every answer format, reads how to answer from the
model folder, and works where the package is not installed (trust_remote_code=True)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from processes import ask_without_the_package
from transformers import pipeline

import evaluate_birthplace
import train_finetune
from chargpt.training import run_cli
from data_scripts import write_synthetic_corpus
from modeling_chargpt import TASK, BirthplaceQAPipeline
from modeling_chargpt.answering import QuestionError

TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "32", "--report_to", "none", "--disable_tqdm", "True"]
FORMATS = {  # evaluate_birthplace.py flags of each answer format the project trains
    "reference": [],
    "recite": [],
    "span": ["--answer_from_recitation", "True"],
    "span, continued": ["--answer_from_recitation", "True", "--continue_recitation", "True"],
}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    write_synthetic_corpus(out, n_people=40, n_train=20, n_dev=10, n_test=10, seed=1)
    return out


def finetune(world: Path, out: Path, *extra: str) -> Path:
    argv = ["--pretrain_corpus_path", str(world / "wiki.txt"), "--finetune_corpus_path",
            str(world / "birth_places_train.tsv"), "--output_dir", str(out), *TINY, "--max_steps", "12",
            "--per_device_train_batch_size", "4", "--learning_rate", "3e-3", *extra]
    assert run_cli(train_finetune.main, argv) == 0
    return out


@pytest.fixture(scope="module")
def models(world, tmp_path_factory) -> dict[str, Path]:
    """A model that answers the reference way and one that recites first (tiny, a few steps: answers are poor but
    deterministic, which is what the comparison needs)."""
    root = tmp_path_factory.mktemp("models")
    return {"direct": finetune(world, root / "direct"), "recite": finetune(world, root / "recite", "--recite", "True")}


def questions(world: Path) -> list[str]:
    return [line.split("\t")[0] for line in (world / "birth_dev.tsv").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_pipeline_answers_as_the_evaluation_does(fmt, world, models, tmp_path):
    model = models["direct" if fmt == "reference" else "recite"]
    preds = tmp_path / "dev.predictions"
    argv = ["--model_name_or_path", str(model), "--eval_corpus_path", str(world / "birth_dev.tsv"), "--outputs_path",
            str(preds), "--batch_size", "4", *FORMATS[fmt]]
    assert run_cli(evaluate_birthplace.main, argv) == 0
    records = [json.loads(line) for line in Path(f"{preds}.records.jsonl").read_text().splitlines()]
    overrides = {"answer_from_recitation": "span" in fmt, "continue_recitation": "continued" in fmt}
    ask = pipeline(TASK, model=str(model), pipeline_class=BirthplaceQAPipeline, device="cpu")
    answered = ask(questions(world), batch_size=3, **overrides)
    assert [a["answer"] for a in answered] == [r["answer"] for r in records]
    assert [a["recitation"] for a in answered] == [r["recitation"] for r in records]
    for a, r in zip(answered, records, strict=True):
        assert a["probability"] == pytest.approx(r["confidence"], rel=1e-4)
    one = ask(questions(world)[0], **overrides)  # one question, no batching: the same answer
    assert one["answer"] == records[0]["answer"] and one["abstained"] is False


def test_a_finetuned_folder_says_how_it_answers_and_abstains(world, models, tmp_path):
    config = json.loads((models["recite"] / "config.json").read_text())
    assert config["answer_format"] == "recite"
    assert config["answering"]["answer_from_recitation"] is False and config["answering"]["abstain_below"] is None
    assert config["custom_pipelines"][TASK]["impl"] == "pipeline_chargpt.BirthplaceQAPipeline"
    assert {"pipeline_chargpt.py", "answering.py", "grounding.py"} <= {p.name for p in models["recite"].iterdir()}
    ask = pipeline(TASK, model=str(models["direct"]), pipeline_class=BirthplaceQAPipeline, device="cpu")
    first = ask(questions(world)[0], abstain_below=0.999999)
    assert first["abstained"] is True
    name = questions(world)[0][len("Where was "):-len(" born?")]
    bare = ask(name, documents=str(world / "wiki.txt"))  # a bare name, with the documents
    assert bare["question"] == questions(world)[0] and bare["answer"] == first["answer"]
    assert bare["line"] is not None and name in bare["line"] and isinstance(bare["grounded"], bool)


@pytest.mark.parametrize("bad,expected", [
    ("", "an empty question"),
    ("Where was Zoë born?", "character 'ë' (U+00EB)"),
])
def test_bad_questions_are_one_line(bad, expected, models):
    ask = pipeline(TASK, model=str(models["direct"]), pipeline_class=BirthplaceQAPipeline, device="cpu")
    with pytest.raises(QuestionError, match=re.escape(expected)):
        ask(bad)
    recite = pipeline(TASK, model=str(models["recite"]), pipeline_class=BirthplaceQAPipeline, device="cpu")
    with pytest.raises(QuestionError, match="another kind of question: this model answers only 'Where was NAME born"):
        recite("Who is Ann?")
    with pytest.raises(QuestionError, match="must be a probability between 0 and 1"):
        recite("Ann", abstain_below=1.5)


def test_a_fresh_environment_answers_through_remote_code(world, models, tmp_path):
    """No package on the path: the folder's own code answers, as the package does."""
    model = models["recite"]
    expected = pipeline(TASK, model=str(model), pipeline_class=BirthplaceQAPipeline, device="cpu")(
        questions(world)[:3], answer_from_recitation=True)
    result = ask_without_the_package(model, questions(world)[:3], tmp_path, answer_from_recitation=True)
    assert result["package_imported"] is False and result["pipeline"].startswith("transformers_modules.")
    assert [a["answer"] for a in result["answers"]] == [a["answer"] for a in expected]
    assert [a["recitation"] for a in result["answers"]] == [a["recitation"] for a in expected]


def test_chargpt_ask_prints_what_a_person_reads(world, models, capsys, monkeypatch):
    from chargpt.evaluation import ask

    question = questions(world)[0]
    name = question[len("Where was "):-len(" born?")]
    assert run_cli(ask.main, [str(models["direct"]), question, name, "--wiki", str(world / "wiki.txt")]) == 0
    out = capsys.readouterr().out.splitlines()
    answer = pipeline(TASK, model=str(models["direct"]), pipeline_class=BirthplaceQAPipeline, device="cpu")(
        question)["answer"]
    assert out[0].startswith(f"{question}  ->  {answer}  (") and out[0].endswith(" sure)")
    assert out[1].startswith("    wiki.txt (the answer is") and name in out[1]
    assert out[2] == out[0] and len(out) == 4  # the bare name is the same question
    assert run_cli(ask.main, [str(models["direct"]), question, "--abstain_below", "0.999999"]) == 0
    assert capsys.readouterr().out.startswith(f"{question}  ->  I don't know (its best guess")
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{question}\n\nWhere was Zoë born?\n"))
    assert run_cli(ask.main, [str(models["recite"])]) == 1  # questions from standard input; one is bad
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert err[-1].startswith("error: question 2: character 'ë' (U+00EB)") and "Traceback" not in "\n".join(err)
    assert captured.out.startswith(f"{question}  ->  ")  # the good one is still answered
    assert run_cli(ask.main, [str(world)]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(f"error: {world}: no config.json")


def test_a_best_preset_model_is_evaluated_as_it_saved_without_flags(world, tmp_path):
    """Finetuning with --preset best saves its span answers in the folder; evaluate_birthplace.py then answers that
    way with no flag (as the pipeline does), and a flag still wins."""
    model = finetune(world, tmp_path / "best", "--preset", "best", "--max_steps", "4")
    answering = json.loads((model / "config.json").read_text())["answering"]
    assert (answering["answer_from_recitation"], answering["continue_recitation"]) == (True, True)

    def evaluate(name: str, *flags: str) -> list[str]:
        preds = tmp_path / f"{name}.predictions"
        argv = ["--model_name_or_path", str(model), "--eval_corpus_path", str(world / "birth_dev.tsv"),
                "--outputs_path", str(preds), *flags]
        assert run_cli(evaluate_birthplace.main, argv) == 0
        return [json.loads(line)["answer"] for line in Path(f"{preds}.records.jsonl").read_text().splitlines()]

    assert (answering["recitation_beams"], answering["skip_name_words"], answering["first_of_pair"],
            answering["birth_before_death"]) == (4, True, True, True)
    saved = evaluate("saved")
    assert saved == evaluate("flags", "--answer_from_recitation", "True", "--continue_recitation", "True")
    # span answers off turns off what only changes them (continued recitations, the three rules): one flag, not five
    plain = evaluate("plain", "--answer_from_recitation", "False")
    assert plain == evaluate("all-off", "--answer_from_recitation", "False", "--continue_recitation", "False",
                             "--skip_name_words", "False", "--first_of_pair", "False", "--birth_before_death", "False")
    ask = pipeline(TASK, model=str(model), pipeline_class=BirthplaceQAPipeline, device="cpu")
    assert [a["answer"] for a in ask(questions(world), batch_size=4, abstain_below=None)] == saved
    assert [a["answer"] for a in ask(questions(world), answer_from_recitation=False)] == plain


def test_finetuning_flags_save_span_answers_without_a_preset(world, tmp_path, capsys):
    """--answer_from_recitation / --continue_recitation save the choice with a reciting model (what the recipe
    script's models need); flags the model's format cannot answer with are one line before anything is read."""
    model = finetune(world, tmp_path / "spans", "--recite", "True", "--answer_from_recitation", "True",
                     "--max_steps", "2")
    answering = json.loads((model / "config.json").read_text())["answering"]
    assert (answering["answer_from_recitation"], answering["continue_recitation"]) == (True, False)
    best = finetune(world, tmp_path / "best-no-continue", "--preset", "best", "--continue_recitation", "False",
                    "--max_steps", "2")  # a flag wins over the preset's choice
    answering = json.loads((best / "config.json").read_text())["answering"]
    assert (answering["answer_from_recitation"], answering["continue_recitation"]) == (True, False)
    bad = {("--answer_from_recitation", "True"): "error: --answer_from_recitation True needs --recite True",
           ("--recitation_beams", "4"): "error: --recitation_beams 4 needs --recite True",
           ("--recite", "True", "--recitation_beams", "0"): "error: recitation_beams 0: at least 1",
           ("--recite", "True", "--continue_recitation", "True"):
               "error: --continue_recitation True only changes --answer_from_recitation True"}
    for flags, line in bad.items():
        argv = ["--pretrain_corpus_path", str(tmp_path / "absent.txt"), "--finetune_corpus_path",
                str(world / "birth_places_train.tsv"), "--output_dir", str(tmp_path / "never"), *flags]
        assert run_cli(train_finetune.main, argv) == 1
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith(line)
        assert not (tmp_path / "never").exists()


def test_chargpt_ask_shows_a_reciting_model_s_tiny_threshold_as_it_is():
    """A reciting model's threshold is a probability of its whole recitation, often far below 1%: "I don't know"
    names it and the guess's probability exactly, not both as "<1%"."""
    from chargpt.evaluation.ask import describe

    result = {"question": "Where was Ann Lee born?", "answer": "Ann", "probability": 3.14e-9, "abstained": True}
    assert describe(result, 1.034e-7) == ["Where was Ann Lee born?  ->  I don't know (its best guess, 'Ann', has "
                                          "3.1e-09; it answers from 1e-07)"]
    assert describe({**result, "probability": 0.7, "abstained": False}, 1.034e-7) == [
        "Where was Ann Lee born?  ->  Ann  (70% sure)"]


def test_a_folder_without_answering_settings_answers_the_reference_way_and_says_so(world, models, tmp_path, caplog):
    import shutil

    folder = tmp_path / "older"
    shutil.copytree(models["direct"], folder)
    config = json.loads((folder / "config.json").read_text())
    del config["answering"]
    (folder / "config.json").write_text(json.dumps(config))
    with caplog.at_level("WARNING", logger="modeling_chargpt.pipeline_chargpt"):
        ask = pipeline(TASK, model=str(folder), pipeline_class=BirthplaceQAPipeline, device="cpu")
    said = [r.getMessage() for r in caplog.records if r.name == "modeling_chargpt.pipeline_chargpt"]
    assert len(said) == 1 and "holds no answering settings" in said[0] and "'direct'" in said[0]
    assert ask.settings.abstain_below is None and ask.settings.answer_format == "direct"
    reference = pipeline(TASK, model=str(models["direct"]), pipeline_class=BirthplaceQAPipeline, device="cpu")
    assert ask(questions(world)[0])["answer"] == reference(questions(world)[0])["answer"]


def test_a_decoding_choice_is_declared_once_in_answering_and_every_entry_point_offers_it():
    """answering.py's decoding choices (fields of AnsweringSettings) are options of train_finetune.py and
    evaluate_birthplace.py with the field's help, and arguments of the pipeline, and none of the three names one
    itself: a new way to decode is a field and its branch of `answer_questions`, in one file."""
    from modeling_chargpt import answering, pipeline_chargpt

    assert answering.DECODING_CHOICES == ("answer_from_recitation", "continue_recitation", "recitation_beams",
                                          "first_of_pair", "skip_name_words", "birth_before_death", "after_born")
    root = Path(__file__).resolve().parents[1]
    for script in (train_finetune, evaluate_birthplace):
        actions = {a.dest: a for a in script.build_parser()._actions}
        for name in answering.DECODING_CHOICES:
            assert actions[name].default is None, (script.__name__, name)  # None: as saved, or the preset's
            assert answering.AnsweringSettings.__dataclass_fields__[name].metadata["help"] in actions[name].help
        assert "continue_recitation" not in (root / f"{script.__name__}.py").read_text()
    assert set(answering.DECODING_CHOICES) <= set(pipeline_chargpt._OVERRIDES)
    assert "continue_recitation" not in Path(pipeline_chargpt.__file__).read_text()

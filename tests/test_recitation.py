"""Recite, then answer (`train_finetune.py --recite True`): the rows, the two-stage decoding, the scripts end to end."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from test_training_scripts import QUIET, TINY, world  # noqa: F401  (world: a fixture)

import evaluate_birthplace
import train_finetune
import train_pretrain
from chargpt.evaluation.predict import check_questions
from chargpt.evaluation.records import build_records
from chargpt.training import run_cli
from data_scripts import DataFileError, load_qa_tsv, recitation_dataset, recitation_example, recitation_limit
from modeling_chargpt import IGNORE_INDEX, MASK_CHAR, PAD_CHAR, CharGPTConfig, CharGPTForCausalLM, CharTokenizer
from modeling_chargpt.answering import (
    answer_from_recitation,
    birth_place_at,
    continue_recitations,
    death_mark,
    greedy_until_mask,
    pair_first,
    recitation_spans,
    recitation_text,
    recite,
    recite_on,
    score_answers,
    score_recitations,
)

DOCS = ["Paris Hilton. Paris Hilton was born in New York City and lives in Paris or Rome .",
        "Ann Lee. Ann Lee is a painter .",
        "Bo Ek. " + "Bo Ek wrote many books about boats " * 4 + "and was born in Oslo ."]
TOKENIZER = CharTokenizer.from_corpus("\n".join(DOCS))


def test_the_row_recites_up_to_the_answer_after_the_name_then_answers():
    text = recitation_text("Paris Hilton", DOCS[0], "New York City", 128)
    assert text.rstrip(PAD_CHAR) == "Paris Hilton. Paris Hilton was born in New York City" + MASK_CHAR + \
        "New York City" + MASK_CHAR
    assert len(text) == 128
    # an answer the name contains is looked for outside the name's mentions
    assert recitation_text("Paris Hilton", DOCS[0], "Paris", 128).startswith(
        DOCS[0][: DOCS[0].index(" or Rome")] + MASK_CHAR + "Paris" + MASK_CHAR)
    # an answer not in the document: the whole document is recited
    assert recitation_text("Ann Lee", DOCS[1], "Rome", 128).rstrip(PAD_CHAR) == DOCS[1] + MASK_CHAR + "Rome" + MASK_CHAR
    # never more than three quarters of the block, even when the answer comes later
    late = recitation_text("Bo Ek", DOCS[2], "Oslo", 128)
    assert late.index(MASK_CHAR) == recitation_limit(128) == 96 and late[96:].startswith(MASK_CHAR + "Oslo" + MASK_CHAR)
    with pytest.raises(ValueError, match="no room for the name"):
        recitation_text("Bo Ek", DOCS[2], "x" * 30, 36)


def test_recitation_chars_moves_the_cut_for_rows_and_for_the_model_that_learned_them(world, tmp_path, capsys):  # noqa: F811
    """--recitation_chars N: rows cut at N characters instead of 96 (never where the answer would not fit), saved
    in the config, and the model recites up to N at evaluation; without --recite it is a one-line error."""
    assert recitation_text("Bo Ek", DOCS[2], "Oslo", 128, limit=110).index(MASK_CHAR) == 110
    assert recitation_text("Bo Ek", DOCS[2], "Oslo", 128, limit=126).index(MASK_CHAR) == 128 - 2 - len("Oslo")
    row = recitation_example("Bo Ek", DOCS[2], "Oslo", TOKENIZER, 128, limit=110)
    assert row["input_ids"][110] == TOKENIZER.mask_token_id
    fin = tmp_path / "fin"
    argv = ["--pretrain_corpus_path", str(world / "wiki.txt"), "--finetune_corpus_path",
            str(world / "birth_places_train.tsv"), "--output_dir", str(fin), *TINY, *QUIET, "--max_steps", "1",
            "--per_device_train_batch_size", "8", "--position_embedding_type", "rope", "--recitation_chars", "100"]
    assert run_cli(train_finetune.main, argv) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --recitation_chars 100: a positive number of characters, with --recite True")
    assert run_cli(train_finetune.main, [*argv, "--recite", "True"]) == 0
    model = CharGPTForCausalLM.from_pretrained(fin)
    assert model.config.recitation_chars == 100 and "| recitation_chars | 100 |" in (fin / "README.md").read_text()
    tokenizer = CharTokenizer.from_pretrained(fin)
    long_name = next(c for c in tokenizer.get_vocab() if c.isalpha()) * 98  # the default 96 would cut the name
    assert 98 <= len(recite(model, tokenizer, [long_name], show_progress=False)[0]) <= 100
    # pretraining's recitation rows take the same cut, and a finetuning without the flag keeps the model's
    pre, again = tmp_path / "pre", tmp_path / "again"
    pretrain = ["--pretrain_corpus_path", str(world / "wiki.txt"), "--output_dir", str(pre), *TINY, *QUIET,
                "--max_steps", "1", "--per_device_train_batch_size", "8", "--position_embedding_type", "rope",
                "--objective", "language_modeling", "--recitation_chars", "104"]
    assert run_cli(train_pretrain.main, pretrain) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --recitation_chars 104: a positive number of characters, with --mixed_qa_format recite")
    assert run_cli(train_pretrain.main, [*pretrain, "--mixed_qa_corpus_path", str(world / "birth_places_train.tsv"),
                                         "--mixed_qa_format", "recite"]) == 0
    assert json.loads((pre / "config.json").read_text())["recitation_chars"] == 104
    assert run_cli(train_finetune.main, [*argv[:4], "--model_name_or_path", str(pre), "--output_dir", str(again),
                                         *QUIET, "--max_steps", "1", "--per_device_train_batch_size", "8",
                                         "--recite", "True"]) == 0
    assert json.loads((again / "config.json").read_text())["recitation_chars"] == 104


def test_labels_skip_the_name_and_the_padding():
    row = recitation_example("Ann Lee", DOCS[1], "Rome", TOKENIZER, 64)
    n = len(DOCS[1]) + len("Rome") + 2
    assert row["labels"][:7] == [IGNORE_INDEX] * 7
    assert row["labels"][7:n] == row["input_ids"][7:n]
    assert row["labels"][n:] == [IGNORE_INDEX] * (64 - n) and len(row["input_ids"]) == 64


def test_dataset_matches_each_question_to_its_document_and_names_bad_lines(tmp_path):
    tsv = tmp_path / "train.tsv"
    tsv.write_text("Where was Ann Lee born?\tRome\nWhere was Paris Hilton born?\tNew York City\n")
    rows = recitation_dataset(load_qa_tsv(tsv), DOCS, TOKENIZER, 128, tsv)
    texts = ["".join(TOKENIZER.itos[i] for i in ids).rstrip(PAD_CHAR) for ids in rows["input_ids"]]
    assert texts[0].startswith("Ann Lee. Ann Lee") and texts[1].endswith(MASK_CHAR + "New York City" + MASK_CHAR)
    tsv.write_text("Where was Ann Lee born?\tRome\nWhere was Zed Q born?\tRome\n")
    with pytest.raises(DataFileError, match=r"train.tsv:2: no document .*'Zed Q': --recite True needs"):
        recitation_dataset(load_qa_tsv(tsv), DOCS, TOKENIZER, 128, tsv)
    tsv.write_text("Where was Ann Lee born?\tR\u00f8me\n")  # a character wiki.txt never has
    with pytest.raises(DataFileError, match=r"train.tsv:1: .*not in the vocabulary"):
        recitation_dataset(load_qa_tsv(tsv), DOCS, TOKENIZER, 128, tsv)


def one_by_one(model, names: list[str]) -> tuple[list[str], list[str]]:
    """The two stages decoded for one name at a time, without the batched helpers: recitation, then answer."""
    limit, mask = recitation_limit(model.config.block_size), TOKENIZER.mask_token_id
    contexts, answers = [], []
    for name in names:
        ids = torch.tensor([TOKENIZER.encode_text(name)])
        out = model.generate(ids, max_new_tokens=limit - len(name), do_sample=False, eos_token_id=mask,
                             pad_token_id=TOKENIZER.pad_token_id)[0, ids.shape[1]:].tolist()
        context = name + "".join(TOKENIZER.itos[t] for t in out[: out.index(mask) if mask in out else len(out)])
        ids = torch.tensor([TOKENIZER.encode_text(context + MASK_CHAR)])
        out = model.generate(ids, max_new_tokens=8, do_sample=False, eos_token_id=mask,
                             pad_token_id=TOKENIZER.pad_token_id)[0, ids.shape[1]:].tolist()
        contexts.append(context)
        answers.append("".join(TOKENIZER.itos[t] for t in out[: out.index(mask) if mask in out else len(out)]))
    return contexts, answers


def mask_prone_model() -> CharGPTForCausalLM:
    """A random reciting model (block 32) that says MASK often: some recitations stop early, some run to the limit."""
    torch.manual_seed(0)
    config = CharGPTConfig(vocab_size=TOKENIZER.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=16,
                           position_embedding_type="rope", answer_format="recite")
    model = CharGPTForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight[TOKENIZER.mask_token_id] += 0.4 * model.lm_head.weight.std() * torch.randn(16)
    return model


def test_evaluation_asks_generate_not_to_compile(monkeypatch):
    """On a GPU generate() would compile the forward for the static cache in every evaluation process (longer than
    the eager evaluation): the flag that stops it reaches the place where transformers decides."""
    seen = []

    def criteria(self, model_kwargs, generation_config):
        seen.append(generation_config.disable_compile)
        return False

    monkeypatch.setattr(CharGPTForCausalLM, "_valid_auto_compile_criteria", criteria)
    greedy_until_mask(mask_prone_model(), TOKENIZER, ["Ann Lee", "Bo Ek"], 2, 4, show_progress=False)
    assert seen and all(seen)

def test_batched_recitation_and_answer_equal_decoding_each_name_alone():
    model = mask_prone_model()
    names = ["Ann Lee", "Bo Ek", "Paris Hilton", "Ann", "Ann L", "Ek Bo"]  # some of one length: batched together
    contexts = recite(model, TOKENIZER, names, batch_size=3, show_progress=False)
    answers = greedy_until_mask(model, TOKENIZER, [c + MASK_CHAR for c in contexts], 3, 8, show_progress=False)
    expected_contexts, expected_answers = one_by_one(model, names)
    assert contexts == expected_contexts and answers == expected_answers
    assert all(len(c) <= recitation_limit(32) and c.startswith(n) for c, n in zip(contexts, names, strict=True))


def test_beam_recitations_are_each_names_best_beam_and_a_decoding_choice():
    """--recitation_beams K: each recitation is the best of K beams for the name decoded alone (what `generate`
    returns first), which is not always the greedy one; 1 is greedy, and a setting below 1 or on a model that does
    not recite is a one-line error."""
    from modeling_chargpt.answering import AnsweringSettings, QuestionError

    model = mask_prone_model()
    names = ["Ann Lee", "Bo Ek", "Paris Hilton", "Ann", "Ann L", "Ek Bo"]
    beams = recite(model, TOKENIZER, names, batch_size=3, show_progress=False, num_beams=3)
    limit, mask = recitation_limit(32), TOKENIZER.mask_token_id
    for name, recitation in zip(names, beams, strict=True):
        ids = torch.tensor([TOKENIZER.encode_text(name)])
        out = model.generate(ids, max_new_tokens=limit - len(name), do_sample=False, num_beams=3, eos_token_id=mask,
                             pad_token_id=TOKENIZER.pad_token_id)[0, ids.shape[1]:].tolist()
        alone = out[: out.index(mask)] if mask in out else out
        assert recitation == name + "".join(TOKENIZER.itos[t] for t in alone)
    assert beams != recite(model, TOKENIZER, names, batch_size=3, show_progress=False)  # not the greedy ones
    assert recite(model, TOKENIZER, names, show_progress=False, num_beams=1) == one_by_one(model, names)[0]
    with pytest.raises(QuestionError, match="recitation_beams 0: at least 1"):
        AnsweringSettings(answer_format="recite", recitation_beams=0).check()
    with pytest.raises(QuestionError, match="recitation_beams needs a model finetuned to recite"):
        AnsweringSettings(recitation_beams=2).check()


def test_a_reciting_models_confidence_is_that_of_its_whole_greedy_output():
    """Records of a reciting model score everything it generated: the recitation after the name, the MASK that ended
    it (not the one appended after a recitation cut at the limit), the answer and its closing MASK, each as one
    unpadded teacher-forced sequence gives it; `recitation_logprob` is the recitation's part."""
    torch.manual_seed(0)
    config = CharGPTConfig(vocab_size=TOKENIZER.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=16,
                           position_embedding_type="rope", answer_format="recite")
    model = CharGPTForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight[TOKENIZER.mask_token_id] += 0.4 * model.lm_head.weight.std() * torch.randn(16)
    names = ["Ann Lee", "Bo Ek", "Paris Hilton", "Ann", "Ann L", "Ek Bo"]
    limit, max_new, mask = recitation_limit(32), 8, TOKENIZER.mask_token_id
    contexts = recite(model, TOKENIZER, names, batch_size=4, show_progress=False)
    answers = greedy_until_mask(model, TOKENIZER, [c + MASK_CHAR for c in contexts], 4, max_new, show_progress=False)
    assert {len(c) < limit for c in contexts} == {True, False}  # some stopped with a MASK, some ran to the limit
    records = build_records([f"Where was {n} born?" for n in names], [""] * len(names), answers,
                            score_answers(model, TOKENIZER, contexts, answers, max_new, 4, show_progress=False),
                            recitations=contexts,
                            recitation_scores=score_recitations(model, TOKENIZER, names, contexts, 4, False))
    for name, context, answer, record in zip(names, contexts, answers, records, strict=True):
        ids = TOKENIZER.encode_text(context) + [mask] + TOKENIZER.encode_text(answer) + [mask] * (len(answer) < max_new)
        with torch.no_grad():
            logprobs = torch.log_softmax(model(input_ids=torch.tensor([ids[:-1]])).logits[0].double(), -1)
        generated = [t for t in range(len(name), len(ids)) if t != len(context) or len(context) < limit]
        chars = [float(logprobs[t - 1, ids[t]]) for t in generated]
        recited = [float(logprobs[t - 1, ids[t]]) for t in generated if t <= len(context)]
        assert record["logprob"] == pytest.approx(sum(chars), abs=1e-4)
        assert record["recitation_logprob"] == pytest.approx(sum(recited), abs=1e-4)
        assert record["confidence"] == pytest.approx(torch.tensor(sum(chars)).exp().item(), rel=1e-4)
        assert record["min_char_prob"] == pytest.approx(torch.tensor(min(chars)).exp().item(), rel=1e-4)


def test_a_reciting_model_refuses_other_questions_and_fits_its_block(tmp_path):
    config = CharGPTConfig(vocab_size=TOKENIZER.vocab_size, block_size=64, position_embedding_type="learned",
                           answer_format="recite")
    with pytest.raises(DataFileError, match=r"q.tsv:2: .*not 'Where was NAME born\?'"):
        check_questions(tmp_path / "q.tsv", ["Where was Ann Lee born?", "Who is Ann Lee?"], TOKENIZER, config, 16)
    # learned positions: after a recitation of 48 characters, decoding has 16 of the 64 positions left, not 32
    check_questions(tmp_path / "q.tsv", ["Where was Ann Lee born?"], TOKENIZER, config, 32)
    direct = CharGPTConfig(vocab_size=TOKENIZER.vocab_size, block_size=64, position_embedding_type="learned")
    with pytest.raises(DataFileError, match="question \\+ MASK is 8 characters; with max_new_tokens=60"):
        check_questions(tmp_path / "q.tsv", ["Ann Lee"], TOKENIZER, direct, 60)
    check_questions(tmp_path / "q.tsv", ["Ann Lee"], TOKENIZER, CharGPTConfig(vocab_size=9), 16)  # direct: any text
    with pytest.raises(ValueError, match="answer_format='quoted' is not one of"):
        CharGPTConfig(answer_format="quoted")


def test_finetune_with_recite_then_evaluate(world, tmp_path, capsys):  # noqa: F811  (the fixture)
    pre, fin = tmp_path / "pre", tmp_path / "fin"
    # everything runs in this process, through the scripts' own `run_cli` (a launch would add seconds of imports)
    assert run_cli(train_pretrain.main, ["--pretrain_corpus_path", str(world / "wiki.txt"), "--output_dir", str(pre),
                                         *TINY, *QUIET, "--per_device_train_batch_size", "8", "--max_steps", "2",
                                         "--position_embedding_type", "rope"]) == 0
    assert run_cli(train_finetune.main, ["--pretrain_corpus_path", str(world / "wiki.txt"), "--finetune_corpus_path",
                                         str(world / "birth_places_train.tsv"), "--model_name_or_path", str(pre),
                                         "--output_dir", str(fin), *QUIET, "--max_steps", "2",
                                         "--per_device_train_batch_size", "8", "--recite", "True"]) == 0
    assert json.loads((fin / "config.json").read_text())["answer_format"] == "recite"
    assert "| answer_format | recite |" in (fin / "README.md").read_text()
    preds = tmp_path / "dev.predictions"

    def evaluate(model: Path, *flags: str) -> int:
        """evaluate_birthplace.py on dev, as its command line runs it."""
        return run_cli(evaluate_birthplace.main, ["--model_name_or_path", str(model), "--eval_corpus_path",
                                                  str(world / "birth_dev.tsv"), *flags])

    capsys.readouterr()
    assert evaluate(fin, "--outputs_path", str(preds)) == 0
    assert " out of 20: " in capsys.readouterr().out
    assert len(preds.read_text().splitlines()) == 20
    # --answer_from_recitation: each answer is a span its recitation ends with. Two steps of finetuning recite only
    # spaces; the same model with its weights scrambled recites words to choose from.
    scrambled = tmp_path / "scrambled"
    model = CharGPTForCausalLM.from_pretrained(fin)
    torch.manual_seed(0)
    with torch.no_grad():
        for weight in model.parameters():
            weight.add_(torch.randn_like(weight))
    model.save_pretrained(scrambled)
    CharTokenizer.from_pretrained(fin).save_pretrained(scrambled)
    spans = tmp_path / "spans.predictions"
    assert evaluate(scrambled, "--outputs_path", str(spans), "--answer_from_recitation", "True") == 0
    chosen = 0
    lines = spans.with_name(spans.name + ".records.jsonl").read_text().splitlines()
    for record in map(json.loads, lines):
        name, recited = record["question"][len("Where was "):-len(" born?")], record["recitation"]
        candidates = [(span, end) for span, end in recitation_spans(name, recited) if len(span) < 32]
        assert recited.startswith(name) and record["confidence"] is not None
        if candidates:  # the recitation ends right after its answer; otherwise it was answered the usual way
            assert (record["answer"], len(recited)) in candidates
            chosen += 1
    assert chosen > 10
    # --continue_recitation: recitations cut at the limit may answer with a word of what follows the cut
    assert evaluate(scrambled, "--outputs_path", str(spans), "--answer_from_recitation", "True",
                    "--continue_recitation", "True") == 0
    beyond = 0
    for record in map(json.loads, spans.with_name(spans.name + ".records.jsonl").read_text().splitlines()):
        name, recited = record["question"][len("Where was "):-len(" born?")], record["recitation"]
        candidates = recitation_spans(name, recited)
        if (record["answer"], len(recited)) in candidates:
            continue
        if len(recited) < recitation_limit(64):
            assert not candidates  # no span to choose: answered the usual way
        else:
            beyond += 1  # kept whole: the span reached past the cut
    assert beyond > 0
    capsys.readouterr()
    assert evaluate(pre, "--answer_from_recitation", "True") == 1
    plain = capsys.readouterr().err
    assert plain.strip().count("\n") == 0 and "does not recite (answer_format=" in plain
    records = [json.loads(line) for line in preds.with_name(preds.name + ".records.jsonl").read_text().splitlines()]
    assert len(records) == 20
    for record in records:  # each answer follows the model's own recitation about the person asked
        name = record["question"][len("Where was "):-len(" born?")]
        assert record["recitation"].startswith(name) and len(record["recitation"]) <= recitation_limit(64)
        assert record["confidence"] is not None  # of the recitation and the answer together
        assert record["recitation_logprob"] is not None and record["logprob"] <= record["recitation_logprob"]


def test_span_candidates_are_word_runs_of_the_recitation_after_the_name():
    recitation = "Ann Lee. Ann Lee (1950) was born in New York City, USA, and in Aix-en-Provence ."
    spans = recitation_spans("Ann Lee", recitation, max_words=3)
    assert all(recitation[:end].endswith(span) for span, end in spans)
    found = {span for span, _ in spans}
    assert {"New York City", "York City", "USA", "Aix-en-Provence", "1950", "Ann Lee"} <= found
    assert "City USA" not in found and "City, USA" not in found  # a comma ends a span
    assert "Ann Lee. Ann" not in found and "New York City USA" not in found  # after the name; at most 3 words
    assert not any(span.startswith("Ann Lee.") for span, _ in spans)  # the name (the prompt) is not recited
    assert recitation_spans("Ann Lee", "Ann Lee") == []


def whole_output_logprob(model, name: str, prefix: str, span: str) -> float:
    """log P(``prefix MASK span MASK`` after `name`), one unpadded sequence scored alone."""
    mask = TOKENIZER.mask_token_id
    ids = TOKENIZER.encode_text(prefix) + [mask] + TOKENIZER.encode_text(span) + [mask]
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=torch.tensor([ids[:-1]])).logits[0].double(), -1)
    return sum(float(logprobs[t - 1, ids[t]]) for t in range(len(name), len(ids)))


def test_the_chosen_span_is_the_most_probable_whole_output():
    """answer_from_recitation picks, among the spans, the one whose ``recitation[:end] MASK span MASK`` the model gives
    the highest probability (each sequence scored alone here, unbatched), and cuts the recitation after it."""
    torch.manual_seed(0)
    config = CharGPTConfig(vocab_size=TOKENIZER.vocab_size, block_size=96, n_layer=1, n_head=2, n_embd=16,
                           position_embedding_type="rope", answer_format="recite")
    model = CharGPTForCausalLM(config).eval()
    names = ["Paris Hilton", "Ann Lee", "Bo Ek"]
    recitations = [DOCS[0][:70], DOCS[1], "Bo Ek."]  # the last has no word after the name
    cut, chosen = answer_from_recitation(model, TOKENIZER, names, recitations, batch_size=2, show_progress=False)
    for name, recitation, kept, span in zip(names, recitations, cut, chosen, strict=True):
        candidates = recitation_spans(name, recitation)
        if not candidates:
            assert span is None and kept == recitation
            continue
        best = max(candidates, key=lambda c: whole_output_logprob(model, name, recitation[:c[1]], c[0]))  # noqa: B023
        assert (span, kept) == (best[0], recitation[:best[1]])
    _, [short] = answer_from_recitation(model, TOKENIZER, names[:1], recitations[:1], max_chars=4, show_progress=False)
    assert short is not None and len(short) < 4  # --max_new_tokens bounds the span as it bounds a decoded answer


def test_a_recitation_stopped_early_is_recited_on_without_mask_to_the_limit():
    """recite_on: each recitation shorter than the limit goes on as generating it alone with MASK forbidden would, to
    the limit exactly; one at the limit is left as it is."""
    model = mask_prone_model()
    recitations = recite(model, TOKENIZER, ["Ann Lee", "Bo Ek", "Paris Hilton", "Ann", "Ek Bo"], show_progress=False)
    limit, mask = recitation_limit(32), TOKENIZER.mask_token_id
    assert {len(r) == limit for r in recitations} == {True, False}  # both kinds are here
    for recitation, longer in zip(recitations, recite_on(model, TOKENIZER, recitations, 2, False), strict=True):
        assert len(longer) == limit and longer.startswith(recitation)
        if len(recitation) < limit:
            ids = torch.tensor([TOKENIZER.encode_text(recitation)])
            out = model.generate(ids, max_new_tokens=limit - len(recitation), do_sample=False, eos_token_id=mask,
                                 suppress_tokens=[mask], pad_token_id=TOKENIZER.pad_token_id)[0, ids.shape[1]:]
            assert longer == recitation + "".join(TOKENIZER.itos[t] for t in out.tolist())
        else:
            assert longer == recitation


def test_skip_name_words_never_answers_with_the_name_and_recites_on_where_only_the_name_was_recited(monkeypatch):
    """--skip_name_words: no span made only of the asked name's words competes (the best of the others wins); a
    recitation that then has no span, as one that stopped at a mention of the name, is recited on (`recite_on`) and
    answered from that text; without the flag the name is the answer. It needs --answer_from_recitation."""
    from modeling_chargpt import answering
    from modeling_chargpt.answering import AnsweringSettings, QuestionError, answer_questions

    torch.manual_seed(0)
    config = CharGPTConfig(vocab_size=TOKENIZER.vocab_size, block_size=96, n_layer=1, n_head=2, n_embd=16,
                           position_embedding_type="rope", answer_format="recite")
    model = CharGPTForCausalLM(config).eval()
    recitation = "Ann Lee. Ann Lee was born in Lee or Oslo"
    _, [plain] = answer_from_recitation(model, TOKENIZER, ["Ann Lee"], [recitation], show_progress=False)
    cut, [span] = answer_from_recitation(model, TOKENIZER, ["Ann Lee"], [recitation], show_progress=False,
                                         skip_name_words=True)
    others = [c for c in recitation_spans("Ann Lee", recitation) if not set(c[0].split()) <= {"Ann", "Lee"}]
    best = max(others, key=lambda c: whole_output_logprob(model, "Ann Lee", recitation[:c[1]], c[0]))
    assert (span, cut) == (best[0], [recitation[:best[1]]])
    candidates = recitation_spans("Ann Lee", recitation)
    assert plain == max(candidates, key=lambda c: whole_output_logprob(model, "Ann Lee", recitation[:c[1]], c[0]))[0]

    stopped = "Ann Lee. Ann Lee"  # what the model recites, MASK after the name
    monkeypatch.setattr(answering, "recite", lambda *args, **kwargs: [stopped])
    settings = AnsweringSettings(answer_format="recite", answer_from_recitation=True)
    question = ["Where was Ann Lee born?"]
    assert answer_questions(model, TOKENIZER, question, settings, show_progress=False).answers[0] in {"Ann", "Lee",
                                                                                                     "Ann Lee"}
    asked = answer_questions(model, TOKENIZER, question, replace(settings, skip_name_words=True), show_progress=False)
    [longer] = recite_on(model, TOKENIZER, [stopped], show_progress=False)
    cut, [span] = answer_from_recitation(model, TOKENIZER, ["Ann Lee"], [longer], show_progress=False,
                                         skip_name_words=True)
    assert len(longer) > len(stopped) and (asked.answers, asked.contexts) == ([span], cut)
    assert span is not None and not set(span.split()) <= {"Ann", "Lee"}
    with pytest.raises(QuestionError, match="--skip_name_words True only changes --answer_from_recitation True"):
        AnsweringSettings(answer_format="recite", skip_name_words=True).check()
    with pytest.raises(QuestionError, match="--first_of_pair True only changes --answer_from_recitation True"):
        AnsweringSettings(answer_format="recite", first_of_pair=True).check()


def test_first_of_pair_answers_the_first_of_a_comma_pair_of_capitalized_words(monkeypatch):
    """--first_of_pair: the chosen span, where it is the second (or third) of capitalized words joined by commas,
    gives way to the first, and the recitation is cut after it; anything else, a name word under --skip_name_words,
    or a pair that starts inside the name, stays."""
    text = "Ann Lee. Ann Lee (born 9 May 1905, Perth, Scotland, UK) lived in cambridge, Massachusetts"
    def at(span: str) -> tuple[str, int]:
        return span, text.index(span) + len(span)
    assert pair_first(text, *at("Scotland"), 7) == pair_first(text, *at("UK"), 7) == at("Perth")
    assert pair_first(text, *at("Perth"), 7) == at("Perth")  # "1905, Perth": not a pair of capitalized words
    assert pair_first(text, *at("Massachusetts"), 7) == at("Massachusetts")  # "cambridge" is not capitalized
    assert pair_first("Ann Lee. Lee, England", "England", 21, 7, {"Ann", "Lee"}) == ("England", 21)
    assert pair_first("Ann Lee, England", "England", 16, 7) == ("England", 16)  # the pair starts in the name

    from modeling_chargpt import answering
    from modeling_chargpt.answering import AnswerScore

    def longest_wins(model, tokenizer, rows, *args):  # a model that prefers the last span: "Norway" over "Oslo"
        return [AnswerScore(float(len(ids)), 1.0) for ids, _ in rows]

    monkeypatch.setattr(answering, "score_rows", longest_wins)
    tokenizer = CharTokenizer.from_corpus("\n".join(DOCS) + ",")
    model = CharGPTForCausalLM(CharGPTConfig(vocab_size=tokenizer.vocab_size, block_size=96, n_layer=1, n_head=2,
                                             n_embd=16, answer_format="recite"))
    recitations = ["Bo Ek. Bo Ek was born in Oslo, Norway", "Bo Ek. Oslo"]
    assert answer_from_recitation(model, tokenizer, ["Bo Ek"] * 2, recitations, show_progress=False) == (
        recitations, ["Norway", "Oslo"])
    assert answer_from_recitation(model, tokenizer, ["Bo Ek"] * 2, recitations, show_progress=False,
                                  first_of_pair=True) == (["Bo Ek. Bo Ek was born in Oslo", "Bo Ek. Oslo"],
                                                          ["Oslo", "Oslo"])


def last_span_wins(monkeypatch, name: str, recitations: list[str]):
    """`answer_from_recitation(**rules)` over `recitations` of `name` with a stand-in model whose scores prefer the
    span ending last, then the shortest: what each rule changes shows against a known choice."""
    from modeling_chargpt import answering
    from modeling_chargpt.answering import AnswerScore

    def last_wins(model, tokenizer, rows, *args):
        masks = [list(ids).index(tokenizer.mask_token_id) for ids, _ in rows]
        return [AnswerScore(at - (len(ids) - at) / 100, 1.0) for (ids, _), at in zip(rows, masks, strict=True)]

    monkeypatch.setattr(answering, "score_rows", last_wins)
    tokenizer = CharTokenizer.from_corpus("\n".join(recitations))
    model = CharGPTForCausalLM(CharGPTConfig(vocab_size=tokenizer.vocab_size, block_size=96, n_layer=1, n_head=2,
                                             n_embd=16, answer_format="recite"))
    return lambda **rules: answer_from_recitation(model, tokenizer, [name] * len(recitations), recitations,
                                                  show_progress=False, **rules)


def test_birth_before_death_answers_the_best_span_before_a_death_date(monkeypatch):
    """--birth_before_death: a chosen span after a death date (a capitalized word, then a dash, "died" or "d" and a
    date) gives way to the most probable span before that date; a month, "Born" or a word of the name is not such a
    word, a recitation with no span before the date keeps its choice, and --first_of_pair then applies."""
    def mark(text: str, name: str = "Ann Lee") -> str | None:
        at = death_mark(text, len(name), {"Ann", "Lee"})
        return None if at is None else text[:at].split()[-1]
    assert mark("Ann Lee. Ann Lee (4 April 1898 Kiev - 25 April 1931 Paris") == "Kiev"
    assert mark("Ann Lee. Ann Lee (born 1810 at Sheffield; died 1 December 1864 at Nottingham") == "Sheffield"
    assert mark("Ann Lee. Ann Lee (b. July 26, 1879, Lyon, d May 7, 1946, Paris") == "Lyon"
    assert mark("Ann Lee. Ann Lee (1870, Bordeaux, France -- died June 21, 1956, Lyon") == "France"
    assert mark("Ann Lee. Ann Lee (1766 Syracuse, New York \u2013 December 1839 Albany") == "York"
    for none in ("Ann Lee. Ann Lee (Born - October 4, 1934 in Winnipeg", "Ann Lee. Ann Lee (May 1900 - June 1980)",
                 "Ann Lee. He died in September 1972", "Ann Lee. Ann Lee - 1900", "Ann Lee. Ann Lee - 4 May 1900",
                 "Ann Lee. Ann Lee (Paris-1900)"):
        assert mark(none) is None, none

    from modeling_chargpt.answering import AnsweringSettings, QuestionError

    recitations = ["Bo Ek. Bo Ek (1898 Oslo, Norway - 25 May 1931 Paris", "Bo Ek. Bo Ek - 25 May 1931 Paris",
                   "Bo Ek. Bo Ek was born in Oslo"]
    answers = last_span_wins(monkeypatch, "Bo Ek", recitations)
    assert answers() == (recitations, ["Paris", "Paris", "Oslo"])
    assert answers(birth_before_death=True) == (["Bo Ek. Bo Ek (1898 Oslo, Norway", *recitations[1:]],
                                                ["Norway", "Paris", "Oslo"])
    assert answers(birth_before_death=True, first_of_pair=True)[1] == ["Oslo", "Paris", "Oslo"]
    with pytest.raises(QuestionError, match="--birth_before_death True only changes --answer_from_recitation True"):
        AnsweringSettings(answer_format="recite", birth_before_death=True).check()


def test_after_born_answers_the_best_span_right_after_a_birth_mark(monkeypatch):
    """--after_born: where the recitation has "born", "Born" or "b." followed by "in"/"at" or a date, the most probable
    span starting at the next word is the answer wherever the model would stop; no date and no "in" ("born Walter
    Stocker"), a lower-case word, a month or a word of the name is no such place, and --first_of_pair applies after."""
    def place(text: str, name: str = "Ann Lee") -> str | None:
        at = birth_place_at(text, len(name), {"Ann", "Lee"})
        return None if at is None else text[at:].split()[0].strip(",)")
    assert place("Ann Lee. Ann Lee (born 1975 in Thessaloniki) is a Greek actress") == "Thessaloniki"
    assert place("Ann Lee. Born in Chattanooga, Lee received a JD") == "Chattanooga"
    assert place("Ann Lee. Ann Lee (b. 8 August 1898, Algiers, French Algeria") == "Algiers"
    assert place("Ann Lee. Ann Lee (born 1965 Vietnam) is an American writer") == "Vietnam"
    assert place("Ann Lee. Ann Lee (born 3-11-1920 Honolulu, Hawaii") == "Honolulu"
    assert place("Ann Lee. Ann Lee was born on 5 May 1900 at Sheffield") == "Sheffield"
    assert place("Ann Lee. Ann Lee (born May 22, 1985 in Saint-Denis, France)") == "Saint-Denis"
    for none in ("Ann Lee. Ann Lee (born Walter Stocker, 27 March 1953, London", "Ann Lee. Ann Lee (born 1 May 1900)",
                 "Ann Lee. Ann Lee was born to a Slovene family in Belgrade", "Ann Lee. Ann Lee was born in 1900",
                 "Ann Lee. Ann Lee (born in Lee County", "Ann Lee. Ann Lee was a sailor", "Ann Lee. Jacob. 1900 Paris"):
        assert place(none) is None, none

    from modeling_chargpt.answering import AnsweringSettings, QuestionError

    recitations = ["Bo Ek. Bo Ek (born 1975 in Oslo) is a Norwegian", "Bo Ek. Bo Ek was born in New York, USA",
                   "Bo Ek. Bo Ek is a Norwegian painter"]
    answers = last_span_wins(monkeypatch, "Bo Ek", recitations)
    assert answers()[1] == ["Norwegian", "USA", "painter"]
    assert answers(first_of_pair=True)[1] == ["Norwegian", "York", "painter"]
    assert answers(after_born=True) == (["Bo Ek. Bo Ek (born 1975 in Oslo", "Bo Ek. Bo Ek was born in New York",
                                         recitations[2]], ["Oslo", "New York", "painter"])
    assert answers(after_born=True, first_of_pair=True)[1] == ["Oslo", "New York", "painter"]
    with pytest.raises(QuestionError, match="--after_born True only changes --answer_from_recitation True"):
        AnsweringSettings(answer_format="recite", after_born=True).check()


def test_a_cut_recitation_is_continued_without_mask_and_its_spans_compete():
    """--continue_recitation: only recitations cut at the limit are continued, MASK forbidden, as far as a span still
    fits (each equal to generating it alone); a span reaching into the continuation is scored as ``recitation MASK
    span MASK`` and keeps the recitation whole, and the most probable candidate of either kind wins."""
    model = mask_prone_model()
    names = ["Ann Lee", "Bo Ek", "Paris Hilton", "Ann", "Ann L", "Ek Bo"]
    recitations = recite(model, TOKENIZER, names, batch_size=3, show_progress=False)
    more = continue_recitations(model, TOKENIZER, recitations, batch_size=2, show_progress=False)
    limit, room, mask = recitation_limit(32), 32 - recitation_limit(32) - 2, TOKENIZER.mask_token_id
    assert {len(r) == limit for r in recitations} == {True, False}  # both kinds are here
    for recitation, text in zip(recitations, more, strict=True):
        if len(recitation) < limit:
            assert text == ""
            continue
        ids = torch.tensor([TOKENIZER.encode_text(recitation)])
        out = model.generate(ids, max_new_tokens=room, do_sample=False, eos_token_id=mask, suppress_tokens=[mask],
                             pad_token_id=TOKENIZER.pad_token_id)[0, ids.shape[1]:].tolist()
        assert text == "".join(TOKENIZER.itos[t] for t in out) and len(text) == room and MASK_CHAR not in text

    model = CharGPTForCausalLM(CharGPTConfig(**{**model.config.to_dict(), "block_size": 96})).eval()
    names, recitations, more = ["Bo Ek", "Bo Ek"], [DOCS[2][:72], "Bo Ek. . . ."], [DOCS[2][72:90], "Oslo ."]
    cut, chosen = answer_from_recitation(model, TOKENIZER, names, recitations, continuations=more,
                                         show_progress=False)
    assert (chosen[1], cut[1]) == ("Oslo", recitations[1])  # the only word is in the continuation

    def score(c: tuple[str, int]) -> float:
        return whole_output_logprob(model, names[0], recitations[0][:min(c[1], 72)], c[0])

    candidates = recitation_spans(names[0], recitations[0] + more[0])
    assert any(end > 72 for _, end in candidates)
    best = max(candidates, key=score)
    assert (chosen[0], cut[0]) == (best[0], recitations[0][:min(best[1], 72)])

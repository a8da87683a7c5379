"""Each stage's defaults: the reference values, then `--preset` over them, then what the user gave."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from test_readme_commands import load
from transformers import HfArgumentParser

import evaluate_birthplace
import train_finetune
import train_pretrain
from chargpt.training import ModelArguments, TrainingArguments, UsageError, build_optimizer, parse_args
from chargpt.training.presets import BY_POSITION, DEFAULTS, FROM_SCRATCH, PRESETS, REFERENCE, resolve
from data_scripts import DataFileError
from modeling_chargpt import POSITION_EMBEDDING_TYPES, CharGPTConfig, CharGPTForCausalLM


def parse(argv, stage="pretrain"):
    return parse_args(HfArgumentParser((ModelArguments, TrainingArguments)), argv, stage=stage)


def test_the_reference_sets_the_assignments_values_and_nothing_else():
    """The CS224N assignment's run.py: pretraining 650 epochs, batch 128, lr 6e-3; finetuning batch 256, lr 6e-4 for
    10 epochs from a pretrained model, 75 from scratch."""
    expected = {"pretrain": (650, 128, 6e-3), "finetune": (75, 256, 6e-4)}  # no --model_name_or_path: from scratch
    for stage, from_scratch in (("pretrain", {}), ("finetune", FROM_SCRATCH)):
        model, args = parse(["--output_dir", "x"], stage)
        assert model == ModelArguments()
        assert args == TrainingArguments(output_dir="x", **{**DEFAULTS[stage][REFERENCE], **from_scratch})
        assert (args.num_train_epochs, args.per_device_train_batch_size, args.learning_rate) == expected[stage]
    assert resolve("finetune", {"model_name_or_path": "m"})["num_train_epochs"] == 10


SCRIPTS = {"pretrain": train_pretrain, "finetune": train_finetune}
REQUIRED = {"pretrain": ["--pretrain_corpus_path", "w", "--output_dir", "x", "--mixed_qa_corpus_path", "q"],
            "finetune": ["--pretrain_corpus_path", "w", "--output_dir", "x", "--finetune_corpus_path", "t",
                         "--model_name_or_path", "m"]}


def parse_script(stage, argv):
    """A training script's own parser, so a preset may set its data flags (--objective, --recite) too."""
    return parse_args(SCRIPTS[stage].build_parser(), [*REQUIRED[stage], *argv], stage=stage)


@pytest.mark.parametrize("name", [n for n in PRESETS if n != REFERENCE])
@pytest.mark.parametrize("stage", ["pretrain", "finetune"])
@pytest.mark.parametrize("position", [None, *POSITION_EMBEDDING_TYPES])
def test_preset_sets_its_values(name, stage, position):
    """The preset's stage values, and for a pretraining its values for the position encoding named (or the model's
    default one, learned, when none is); a finetuning loads its model's encoding and takes none of them."""
    parsed = parse_script(stage, ["--preset", name, *(["--position_embedding_type", position] if position else [])])
    by_position = BY_POSITION[name].get(position or "learned", {}) if stage == "pretrain" else {}
    for field, value in {**DEFAULTS[stage][name], **by_position}.items():
        assert getattr(next(p for p in parsed if hasattr(p, field)), field) == value


def test_best_pretrains_learned_positions_twice_as_long_unless_told():
    """chargpt/recipes/best.yaml: 100 epochs for learned positions, 50 for rope; a flag given still wins over both."""
    def epochs(*flags):
        return next(p for p in parse_script("pretrain", ["--preset", "best", *flags]) if hasattr(p, "num_train_epochs")
                    ).num_train_epochs

    assert ModelArguments().position_embedding_type == "learned"  # what a run without the flag makes
    assert (epochs(), epochs("--position_embedding_type", "learned"), epochs("--position_embedding_type", "rope")) \
        == (100, 100, 50)
    assert epochs("--num_train_epochs", "7") == epochs("--position_embedding_type", "rope", "--num_train_epochs", "7") \
        == 7


def test_explicit_flags_win_over_the_preset():
    model, args = parse(["--output_dir", "x", "--preset", "cpu-fast", "--learning_rate=1e-3", "--dropout", "0.2"])
    assert args.learning_rate == 1e-3 and model.dropout == 0.2
    untouched = {k: v for k, v in DEFAULTS["pretrain"]["cpu-fast"].items() if k not in ("learning_rate", "dropout")}
    assert untouched, "the test needs a preset field that was not overridden"
    for field, value in untouched.items():
        assert getattr(model if hasattr(model, field) else args, field) == value


def test_preset_from_a_json_file_respects_its_keys(tmp_path):
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"output_dir": "x", "preset": "cpu-fast", "learning_rate": 5e-4}))
    model, args = parse([str(path)])
    assert args.learning_rate == 5e-4
    assert args.per_device_train_batch_size == DEFAULTS["pretrain"]["cpu-fast"]["per_device_train_batch_size"]


@pytest.mark.parametrize(("name", "text", "where"), [
    ("args.json", '{"output_dir": "x",\n "preset" "cpu-fast"}', ":2: not valid JSON"),
    ("args.yaml", "output_dir: x\npreset: cpu: fast\n", ":2: not valid YAML"),
    ("args.yml", "- output_dir\n- x\n", ": expected a mapping of flag names to values"),
])
def test_a_broken_argument_file_is_one_line_naming_it(tmp_path, name, text, where):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataFileError) as err:
        parse([str(path)])
    assert str(err.value).startswith(f"{path}{where}") and "\n" not in str(err.value)


def test_unknown_preset():
    with pytest.raises(UsageError, match="unknown"):
        resolve("pretrain", {"preset": "nope"})


@pytest.mark.parametrize("flag", [["--mixed_precision", "no"], ["--mixed_precision=no"], ["--mixed-precision", "no"],
                                  ["--mixed_prec", "no"]])
def test_a_flag_given_in_any_spelling_wins_over_the_preset(flag):
    """HfArgumentParser takes `--name=value`, `--name-with-dashes` and unambiguous abbreviations; each is the user's
    value, not the preset's (a scan of argv for `--name` missed the last two)."""
    _, args = parse(["--output_dir", "x", "--preset", "cpu-fast", *flag])
    assert args.mixed_precision == "no" and args.learning_rate == DEFAULTS["pretrain"]["cpu-fast"]["learning_rate"]


def test_dropout_is_reference_for_new_models_and_kept_for_loaded_ones_unless_given():
    from chargpt.training import build_model_config

    assert ModelArguments().dropout is None and ModelArguments().dropout_overrides() == {}
    cfg = build_model_config(ModelArguments(), vocab_size=40)
    assert (cfg.embd_pdrop, cfg.resid_pdrop, cfg.attn_pdrop) == (0.1, 0.1, 0.1)
    assert ModelArguments(dropout=0.2).dropout_overrides() == {"embd_pdrop": 0.2, "resid_pdrop": 0.2, "attn_pdrop": 0.2}
    assert ModelArguments(dropout=0.0, attn_dropout=0.3).dropout_overrides()["attn_pdrop"] == 0.3


def test_a_loaded_model_takes_the_overrides(tmp_path):
    from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM

    CharGPTForCausalLM(CharGPTConfig(vocab_size=40, block_size=16, n_layer=1, n_head=2, n_embd=16,
                                     embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0)).save_pretrained(tmp_path)
    model = CharGPTForCausalLM.from_pretrained(tmp_path, **ModelArguments(dropout=0.1).dropout_overrides())
    assert model.transformer.drop.p == 0.1 and model.transformer.blocks[0].attn.attn_pdrop == 0.1
    assert model.transformer.blocks[0].mlp[3].p == 0.1 and model.transformer.blocks[0].attn.resid_drop.p == 0.1


def test_fast_precision_is_bf16_only_where_the_hardware_runs_it_fast(monkeypatch):
    import chargpt.training.precision as precision

    assert isinstance(precision.cpu_has_fast_bf16(), bool)
    monkeypatch.setattr(precision.torch.cuda, "is_available", lambda: False)
    for amx, expected in ((True, "bf16"), (False, "no")):
        monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda amx=amx: amx)
        assert precision.resolve_precision("fast") == expected
        assert precision.resolve_precision("auto") == "no"  # the reference's fp32 on any CPU
        assert precision.resolve_precision("bf16") == "bf16" and precision.resolve_precision("no") == "no"


def test_fast_bf16_without_amx_follows_a_measured_matmul_speedup(monkeypatch):
    """avx512_bf16 is fast on some CPUs and slow on others, so 'fast' times a matmul there; it never times one
    on a CPU with AMX (always fast) or without avx512_bf16 (bf16 emulated: always slow)."""
    import chargpt.training.precision as precision

    assert precision.cpu_bf16_matmul_speedup(rows=64) > 0  # the real measurement runs on this CPU (fewer rows: an
    # AVX2 CPU, which emulates bf16, takes about 15 s for the 4096 of the real check, which it never makes)
    for amx, avx512_bf16, speedup, expected in ((True, False, None, True), (False, False, None, False),
                                                (False, True, 2.8, True), (False, True, 0.5, False)):
        def measure(speedup=speedup):
            assert speedup is not None, "timed a matmul where the CPU flags already decide"
            return speedup

        monkeypatch.setattr(precision.torch.cpu, "_is_amx_tile_supported", lambda amx=amx: amx, raising=False)
        monkeypatch.setattr(precision.torch.cpu, "_is_avx512_bf16_supported", lambda f=avx512_bf16: f,
                            raising=False)
        monkeypatch.setattr(precision, "cpu_bf16_matmul_speedup", measure)
        assert precision.cpu_has_fast_bf16() is expected


def test_default_precision_is_fp32_even_on_a_bf16_gpu(monkeypatch):
    """bf16 autocast made the reference recipe diverge on an H100 (docs/results.md), so fp32 is the default."""
    import chargpt.training.precision as precision

    monkeypatch.setattr(precision.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(precision.torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    for stage in ("pretrain", "finetune"):
        assert precision.resolve_precision(parse(["--output_dir", "x"], stage=stage)[1].mixed_precision) == "no"
    assert precision.resolve_precision("auto") == "bf16"  # still there, as an explicit opt-in


def settings(parsed):
    """Every value of parsed dataclasses but the preset's name."""
    return [{k: v for k, v in vars(p).items() if k != "preset"} for p in parsed]


def test_best_preset_is_the_recipe_measured_at_the_reference_size():
    """--preset best resolves to what chargpt/recipes/recite.py ran for results/best_cpu.json (a recorded
    command's stage flags, the chosen rate of a seed), and the evaluation answers as its final models were measured
    (results/birth_before_death_cpu.json: 4 beams and the three rules)."""
    recipe = load("chargpt/recipes/recite.py")
    found = Path(__file__).parents[1] / "results"
    runs = json.loads((found / "best_cpu.json").read_text())["records"]
    rate = DEFAULTS["finetune"]["best"]["learning_rate"]
    run = next(dict(r, **r["facts"]) for r in runs if r["facts"]["learning_rate"] == rate and r["command"])
    opts = recipe.build_parser().parse_args(shlex.split(run["command"])[2:])
    both, pretrain = (shlex.split(flags) for flags in recipe.stage_flags(opts))
    # chargpt.recipes.reproduce --pretrain_epochs
    epochs = ["--num_train_epochs", str(recipe.settled(opts).pretrain_epochs)]
    split = pretrain[pretrain.index("--mixed_qa_corpus_path") + 1]
    position = ["--position_embedding_type", opts.variant]  # as chargpt.recipes.reproduce --variants passes it
    ran = {"pretrain": [*epochs, *both, *pretrain, *position],
           "finetune": [*both, "--recite", "True", "--learning_rate", str(run["learning_rate"])]}
    for stage, flags in ran.items():
        best = parse_script(stage, ["--preset", "best", *(["--mixed_qa_corpus_path", split, *position]
                                                           if stage == "pretrain" else [])])
        measured = parse_script(stage, flags)
        assert settings(best) == settings(measured), stage
        if stage == "pretrain":
            assert next(part for part in best if hasattr(part, "block_size")).block_size == 160
    finals = [r["command"] for r in json.loads((found / "birth_before_death_cpu.json").read_text())["records"]
              if r["facts"]["model"] == "final"]
    assert len(finals) == sum(r["variant"] == "rope" for r in runs)  # the rope seeds answered again with the rule
    evaluation = evaluate_birthplace.build_parser()
    _, answers = parse_args(evaluation, ["--eval_corpus_path", "d", "--preset", "best"], stage="evaluate")
    for command in finals:
        _, measured = parse_args(evaluation, shlex.split(command)[2:], stage="evaluate")
        assert settings([answers]) == settings([measured]), command
    assert (answers.recitation_beams, answers.skip_name_words, answers.first_of_pair,
            answers.birth_before_death) == (4, True, True, True)


def test_best_preset_needs_the_questions_to_recite_and_leaves_other_presets_evaluation_as_the_assignments():
    with pytest.raises(UsageError, match=r"^--preset best needs --mixed_qa_corpus_path: the training questions"):
        parse_args(train_pretrain.build_parser(), ["--pretrain_corpus_path", "w", "--output_dir", "x", "--preset",
                                                   "best"], stage="pretrain")
    for name in PRESETS:
        _, answers = parse_args(evaluate_birthplace.build_parser(), ["--eval_corpus_path", "d", "--preset", name],
                                stage="evaluate")
        expected = True if name in ("best", "best-fast") else None  # None: as the evaluated model folder saved it
        assert answers.answer_from_recitation is expected and answers.continue_recitation is expected
    _, answers = parse_args(evaluate_birthplace.build_parser(), ["--eval_corpus_path", "d", "--preset", "best",
                                                                 "--continue_recitation", "False"], stage="evaluate")
    assert answers.answer_from_recitation and not answers.continue_recitation  # a flag given wins


def test_cpu_fast_with_more_weight_decay_reaches_the_optimizer():
    """README's CPU vanilla recipe is `--preset cpu-fast --weight_decay 0.3`: the decay must reach AdamW's decayed
    group while the preset's other values stay."""
    model_args, args = parse(["--output_dir", "x", "--preset", "cpu-fast", "--weight_decay", "0.3"])
    assert args.weight_decay == 0.3 and model_args.dropout == 0.0
    assert (args.per_device_train_batch_size, args.learning_rate) == (32, 2e-3)
    model = CharGPTForCausalLM(CharGPTConfig(vocab_size=40, block_size=32, n_layer=2, n_head=4, n_embd=64))
    opt = build_optimizer(model, args, lr=args.learning_rate)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.3, 0.0]
    assert TrainingArguments(output_dir="x").weight_decay == 0.1  # the reference's, without the flag


def test_a_recipe_file_with_an_unknown_section_is_refused(tmp_path, monkeypatch):
    """A typo in a recipe file's sections fails when it is read, naming the file, not as a silently ignored value."""
    from chargpt import recipes

    (tmp_path / "typo.yaml").write_text("purpose: x\npretrian:\n  num_train_epochs: 3\n")
    (tmp_path / "fine.yaml").write_text("purpose: y\npretrain:\n  num_train_epochs: 3\n")
    monkeypatch.setattr(recipes, "HERE", tmp_path)
    recipes.load.cache_clear()
    try:
        assert recipes.names() == ("reference", "fine", "typo")
        assert recipes.load("fine")["pretrain"] == {"num_train_epochs": 3} and recipes.load("fine")["needs"] == {}
        with pytest.raises(ValueError, match=r"typo.yaml: unknown section 'pretrian'"):
            recipes.load("typo")
    finally:
        recipes.load.cache_clear()

"""Finetune on `Where was <name> born?<TAB>place` (the reference's NameDataset), from scratch or pretrained.

    accelerate launch --config_file accelerate_config.yaml train_finetune.py \
        --pretrain_corpus_path DIR/wiki.txt --finetune_corpus_path DIR/birth_places_train.tsv \
        [--model_name_or_path out/rope-pretrain] --output_dir out/rope-finetune

Defaults reproduce the 2024 reference (chargpt/training/presets.py: epochs, batch size, learning rate, from scratch
or from a
pretrained model; `--preset` for named deviations); the cosine schedule spans 200 epochs of the pretraining corpus,
as the reference's does. The vocabulary always comes from wiki.txt.
One opt-in deviation: `--recite True` (answer after reciting the person's wiki.txt line: data_scripts/recitation.py).
`--seeds 0,1,2 --device_data True` finetunes several seeds in one process (chargpt/training/seeds.py), each from its own
pretrained model when `--model_name_or_path` is a `train_pretrain.py --seeds` folder (its seed-S subfolders).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import HfArgumentParser

from chargpt.training import (
    ModelArguments,
    TrainingArguments,
    UsageError,
    build_model_config,
    check_training,
    collate_for,
    device_batches,
    load_chargpt,
    make_accelerator,
    members_of,
    models_for,
    parse_args,
    parse_seeds,
    resolve_model_path,
    run_card,
    run_cli,
    seeds_card,
    train_stage,
)
from chargpt.training.presets import EVALUATION
from data_scripts import (
    EncodedExamples,
    load_pretrain_corpus,
    load_qa_tsv,
    name_prompt_dataset,
    recitation_dataset,
)
from modeling_chargpt import CharGPTForCausalLM, CharTokenizer
from modeling_chargpt.answering import DECODING_CHOICES, AnsweringSettings, QuestionError, decoding_arguments


@dataclass
class FinetuneDataArguments:
    pretrain_corpus_path: str = field(metadata={"help": "wiki.txt: defines the vocabulary and the schedule length."})
    finetune_corpus_path: str = field(metadata={"help": "TSV of `question<TAB>answer` lines."})
    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "A pretrained chargpt folder (or owner/name of one on the Hugging Face Hub, the local cache "
                  "first); without it the model starts from scratch. With --seeds, a "
                  "train_pretrain.py --seeds output folder gives each seed S its own model (FOLDER/seed-S); a plain "
                  "model folder starts every seed from that one model."},
    )
    device_data: bool = field(
        default=False,
        metadata={"help": "Build each step's batch with tensor operations on the training device "
                  "(data_scripts/device_batches.py: the same name-prompt rows in the same order, a fixed number of "
                  "packed rows per step) instead of the datasets path and a DataLoader. One process only."},
    )
    recite: bool = field(
        default=False,
        metadata={"help": "Recite, then answer (not in the reference): each training question becomes NAME + its "
                  "wiki.txt line up to the answer's first mention + MASK + answer (loss after the name), so the model "
                  "learns to recite what it read before naming the place; the saved config says "
                  "answer_format='recite' and the evaluation asks that way. Needs 'Where was NAME born?' questions."},
    )
    recitation_chars: int | None = field(
        default=None,
        metadata={"help": "With --recite True (not in the reference): the most characters a recitation may take, "
                  "name included, saved with the model (config.recitation_chars) so that it recites as far at "
                  "evaluation. Default: three quarters of block_size (96 of 128), which leaves room for a "
                  "32-character answer; a place ending past it is cut from every recitation row."},
    )



def load_model(data_args: FinetuneDataArguments, model_args: ModelArguments, corpus_tokenizer: CharTokenizer,
               path: str | None = None, fields: dict[str, Any] | None = None):
    """The model to finetune and its tokenizer: from scratch, or loaded from `path` (default: --model_name_or_path);
    `fields` are config values it is made with (how it will answer: `answer_fields`)."""
    path = data_args.model_name_or_path if path is None else path
    fields = fields or {}
    if path is None:
        config = build_model_config(model_args, corpus_tokenizer.vocab_size, **fields)
        return CharGPTForCausalLM(config), corpus_tokenizer
    model, tokenizer = load_chargpt(path, **model_args.dropout_overrides(), **fields)
    if tokenizer.get_vocab() != corpus_tokenizer.get_vocab():
        raise UsageError(
            f"the vocabulary of {path} differs from the one built from "
            f"{data_args.pretrain_corpus_path}; pretrain and finetune with the same wiki.txt"
        )
    return model, tokenizer


def member_paths(path: str | None, seeds: list[int] | None) -> list[str | None]:
    """Where each `--seeds` member starts: PATH/seed-S when PATH holds a seed-S folder (a `train_pretrain.py --seeds`
    output), each seed needing its own; else PATH itself (one model, or None: from scratch) for every seed; without
    --seeds, [PATH]."""
    if seeds is None or path is None or not any(Path(path).glob("seed-*")):
        return [path] * len(seeds or [None])
    missing = [seed for seed in seeds if not (Path(path) / f"seed-{seed}").is_dir()]
    if missing:
        found = ", ".join(sorted(p.name for p in Path(path).glob("seed-*")))
        raise UsageError(f"--model_name_or_path {path}: no seed-{missing[0]} folder for --seeds "
                         f"{','.join(map(str, seeds))} (it has {found})")
    return [str(Path(path) / f"seed-{seed}") for seed in seeds]


def load_members(data_args: FinetuneDataArguments, model_args: ModelArguments, corpus_tokenizer: CharTokenizer,
                 seeds: list[int] | None, paths: list[str | None],
                 fields: dict[str, Any] | None = None) -> tuple[Any, CharTokenizer]:
    """The model to finetune (`models_for`: with --seeds, a `SeedStack` whose member S is what a separate `--seed S`
    run finetunes, built after `set_seed(S)`) from scratch or from its folder in `paths` (`member_paths`)."""
    path_of, tokenizers = dict(zip(seeds or [None], paths, strict=True)), []

    def make_model(seed: int | None) -> CharGPTForCausalLM:
        model, tokenizer = load_model(data_args, model_args, corpus_tokenizer, path_of[seed], fields)
        tokenizers.append(tokenizer)
        return model

    return models_for(make_model, seeds), tokenizers[0]


def answer_fields(data_args: FinetuneDataArguments, choices: dict[str, bool | int]) -> dict[str, Any]:
    """The config values the finetuned model is made with, so that evaluate_birthplace.py and the birthplace-qa
    pipeline answer as it was trained to (its format, the preset's evaluation choices where it has them), and
    `--recitation_chars` where given (else a pretrained model keeps the length it recited to)."""
    answering = AnsweringSettings("recite" if data_args.recite else "direct", **choices)
    fields = {"answer_format": answering.answer_format, "answering": answering.to_config()}
    return {**fields, **({"recitation_chars": data_args.recitation_chars} if data_args.recitation_chars else {})}


def answering_choices(data_args: FinetuneDataArguments, decoding, preset: str) -> dict[str, bool | int]:
    """How the saved model answers beyond its format (answering.py's decoding choices): the flags given, else the
    preset's choice (a reciting model only). Refused in one line where the format cannot answer that way."""
    given = {name: value for name, value in vars(decoding).items() if value is not None}
    if not data_args.recite:
        changed = AnsweringSettings.departures(given)
        if changed:
            name, value = next(iter(changed.items()))
            raise UsageError(f"--{name} {value} needs --recite True: only a model that recites has a recitation to "
                             "answer from")
        return {}
    chosen = {**{k: v for k, v in EVALUATION.get(preset, {}).items() if k in DECODING_CHOICES}, **given}
    try:
        AnsweringSettings("recite").choosing(**chosen).check()
    except QuestionError as err:
        raise UsageError(str(err)) from None
    return chosen


DecodingArguments = decoding_arguments()  # saved with the model: how it answers (answering.py's choices)


def check_flags(data_args: FinetuneDataArguments, model_args: ModelArguments, args: TrainingArguments,
                decoding: Any) -> None:
    """Every check of this script's flags, in one place (`parse_args` runs it): each a one-line UsageError."""
    chars = data_args.recitation_chars
    if chars is not None and (not data_args.recite or chars < 1):
        raise UsageError(f"--recitation_chars {chars}: a positive number of characters, with --recite True")
    answering_choices(data_args, decoding, args.preset)
    check_training(args, device_data=data_args.device_data)


def build_parser() -> HfArgumentParser:
    parser = HfArgumentParser((FinetuneDataArguments, ModelArguments, TrainingArguments, DecodingArguments),
                              prog="train_finetune.py")
    parser.check = check_flags
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    data_args, model_args, args, decoding = parse_args(build_parser(), argv, stage="finetune")
    seeds = parse_seeds(args.seeds)
    given = data_args.model_name_or_path
    data_args.model_name_or_path = resolve_model_path(given)  # owner/name: the Hub's copy, from the local cache first
    pretrained = data_args.model_name_or_path is not None
    choices = answering_choices(data_args, decoding, args.preset)  # checked with the flags; the values here
    accelerator = make_accelerator(args)

    text, docs = load_pretrain_corpus(data_args.pretrain_corpus_path)
    initialised_from = given or "scratch"
    paths = member_paths(data_args.model_name_or_path, seeds)
    fields = answer_fields(data_args, choices)
    model, tokenizer = load_members(data_args, model_args, CharTokenizer.from_corpus(text), seeds, paths, fields)
    if paths[0] != data_args.model_name_or_path:
        initialised_from = f"{data_args.model_name_or_path}/seed-S"
    members = members_of(model)
    config = members[0].config
    block = config.block_size
    qa = load_qa_tsv(data_args.finetune_corpus_path, block_size=block)
    deviations = {}
    if data_args.recite:
        chars = config.recitation_chars  # the flag's, or the length the pretrained model recited to
        prompts = recitation_dataset(qa, docs["text"], tokenizer, block, source=data_args.finetune_corpus_path,
                                     limit=chars)
        deviations["answer_format"] = "recite"
        if chars:
            deviations["recitation_chars"] = chars
    else:
        prompts = name_prompt_dataset(qa, tokenizer, block, source=data_args.finetune_corpus_path)
    dataset, examples = prompts, len(prompts)
    if data_args.device_data:
        dataset = device_batches(EncodedExamples(tokenizer, block, prompts=prompts, device=accelerator.device), args,
                                 seeds)
        deviations["device_data"] = True
    deviations.update(seeds_card(seeds, args.stack_seeds))

    card = run_card(
        members[0], args,
        title=f"chargpt finetuned on birthplaces ({config.position_embedding_type} positions, "
              f"{config.attention_type} attention, {'pretrained' if pretrained else 'no pretraining'})",
        stage="finetuning (name prompts)", initialised_from=initialised_from,
        data=data_args.finetune_corpus_path, examples=examples, **deviations,
    )
    return train_stage(accelerator, model, tokenizer, dataset, collate_for(args.packing, block, tokenizer), args,
                       stage="finetune", seeds=seeds, final_tokens=200 * len(docs) * block,
                       tokens_per_example=block - 1, card=card)


def cli() -> int:
    """The installed `chargpt-finetune` command: like running this file, bad input ends as one line."""
    return run_cli(main)


if __name__ == "__main__":
    sys.exit(cli())

"""Pretrain a chargpt model with span corruption on wiki.txt (the reference's CharCorruptionDataset).

    accelerate launch --config_file accelerate_config.yaml train_pretrain.py \
        --pretrain_corpus_path DIR/wiki.txt --position_embedding_type rope --output_dir out/rope-pretrain

Defaults reproduce the 2024 reference (chargpt/training/presets.py: epochs, batch size, learning rate; `--preset`
for named
deviations); the cosine schedule spans every epoch's tokens.
`--mixed_qa_corpus_path` adds the finetuning questions to every epoch (mixed training; data_scripts/mixing.py);
`--mixed_qa_repeats` and `--mixed_qa_format` vary how; `--objective language_modeling` trains on the documents
uncorrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from transformers import HfArgumentParser

from chargpt.training import (
    ModelArguments,
    TrainingArguments,
    UsageError,
    build_model_config,
    check_training,
    collate_for,
    device_batches,
    make_accelerator,
    members_of,
    models_for,
    parse_args,
    parse_seeds,
    run_card,
    run_cli,
    seeds_card,
    train_stage,
)
from data_scripts import (
    CORRUPTION_SPECS,
    OBJECTIVES,
    EncodedExamples,
    InterleavedDataset,
    load_pretrain_corpus,
    load_qa_tsv,
    mixed_order,
    name_prompt_dataset,
    objective_named,
    question_documents,
    recitation_dataset,
    span_corruption_dataset,
)
from modeling_chargpt import CharGPTForCausalLM, CharTokenizer

MIXED_QA_FORMATS = ("prompt", "recite")  # --mixed_qa_format: a name prompt, or a recitation row (recitation.py)


@dataclass
class PretrainDataArguments:
    pretrain_corpus_path: str = field(
        metadata={"help": "wiki.txt: one document per line; also defines the vocabulary."}
    )
    mixed_qa_corpus_path: str | None = field(
        default=None,
        metadata={"help": "Mixed training (not in the reference): a question<TAB>answer TSV, normally the finetuning "
                  "set birth_places_train.tsv, whose name prompts join every pretraining epoch, spread evenly "
                  "among the corrupted documents. Never give it the dev or test questions."},
    )
    mixed_qa_repeats: int = field(
        default=1,
        metadata={"help": "With --mixed_qa_corpus_path: each name prompt appears this many times per mixed epoch "
                  "(the QA share of the epoch; Allen-Zhu & Li found a higher share better)."},
    )
    mixed_document_repeats: int = field(
        default=1,
        metadata={"help": "With --mixed_qa_corpus_path (not in the reference): each document appears this many times "
                  "per mixed epoch, the questions --mixed_qa_repeats times: more passes over the documents, which "
                  "alone teach the dev and test people, for the same passes over the questions."},
    )
    mixed_qa_format: str = field(
        default="prompt",
        metadata={"help": "With --mixed_qa_corpus_path: what each question becomes. 'prompt': the finetuning name "
                  "prompt; 'recite' (as train_finetune.py --recite True): the name, the person's wiki.txt line up to "
                  "the answer, then the answer, so the model learns to recite and answer while it stores the lines; "
                  "the saved config then says answer_format='recite'.",
                  "choices": list(MIXED_QA_FORMATS)},
    )
    recitation_chars: int | None = field(
        default=None,
        metadata={"help": "With --mixed_qa_format recite (not in the reference): the most characters a recitation "
                  "row may take, as train_finetune.py --recitation_chars, saved with the model. Default: three "
                  "quarters of block_size."},
    )
    skip_recited_documents: bool = field(
        default=False,
        metadata={"help": "With --mixed_qa_format recite (not in the reference): leave out of pretraining the "
                  "documents of the people whose question is a recitation row, whose row already holds their line "
                  "up to the answer. Every other document is trained as before; an epoch computes about 40%% fewer "
                  "positions on the real data."},
    )
    objective: str = field(
        default="span_corruption",
        metadata={"help": "What each document trains (data_scripts/objectives.py): "
                  + "; ".join(f"'{name}': {objective.help}" for name, objective in OBJECTIVES.items()) + ".",
                  "choices": list(OBJECTIVES)},
    )
    corruption_spec: str = field(
        default=CORRUPTION_SPECS[0],
        metadata={"help": "Which handout's CharCorruptionDataset: '2024' pads the masked string to block_size + 1, so "
                  "the reference's x and y hold block_size characters and its schedule counts block_size tokens per "
                  "example; '2021' pads to block_size (block_size - 1 characters and tokens). The rows trained are "
                  "the same (the last character is always PAD); the learning-rate schedule differs slightly.",
                  "choices": list(CORRUPTION_SPECS)},
    )
    device_data: bool = field(
        default=False,
        metadata={"help": "Build each step's batch with tensor operations on the training device "
                  "(data_scripts/device_batches.py: the same distribution of corruptions, packing and prompts, "
                  "other draws, a fixed number of packed rows per step) instead of the datasets path and a "
                  "DataLoader. One process only."},
    )


    def qa_options(self) -> dict[str, int | str]:
        """The options of mixed training set away from their defaults (for the checks and the model card)."""
        values = {"mixed_qa_repeats": self.mixed_qa_repeats, "mixed_document_repeats": self.mixed_document_repeats,
                  "mixed_qa_format": self.mixed_qa_format,
                  "recitation_chars": self.recitation_chars, "skip_recited_documents": self.skip_recited_documents}
        defaults = {f.name: f.default for f in fields(self) if f.name in values}
        return {name: value for name, value in values.items() if value != defaults[name]}


def check_flags(data_args: PretrainDataArguments, model_args: ModelArguments, args: TrainingArguments) -> None:
    """Every check of this script's flags, in one place (`parse_args` runs it): each a one-line UsageError."""
    for name in ("mixed_qa_repeats", "mixed_document_repeats"):
        if getattr(data_args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, got {getattr(data_args, name)}")
    if data_args.corruption_spec not in CORRUPTION_SPECS:
        raise UsageError(f"--corruption_spec {data_args.corruption_spec!r}: choose one of "
                         f"{', '.join(CORRUPTION_SPECS)}")
    if data_args.objective not in OBJECTIVES:
        raise UsageError(f"--objective {data_args.objective!r}: choose one of {', '.join(OBJECTIVES)}")
    if data_args.mixed_qa_format not in MIXED_QA_FORMATS:
        raise UsageError(f"--mixed_qa_format {data_args.mixed_qa_format!r}: choose one of "
                         f"{', '.join(MIXED_QA_FORMATS)}")
    chars = data_args.recitation_chars
    if chars is not None and (data_args.mixed_qa_format != "recite" or chars < 1):
        raise UsageError(f"--recitation_chars {chars}: a positive number of characters, with --mixed_qa_format recite")
    if data_args.skip_recited_documents and data_args.mixed_qa_format != "recite":
        raise UsageError("--skip_recited_documents True: with --mixed_qa_format recite (the rows that hold the lines)")
    changed = data_args.qa_options()
    if changed and data_args.mixed_qa_corpus_path is None:
        raise UsageError(f"--{next(iter(changed))} needs --mixed_qa_corpus_path (the questions to train on)")
    try:
        objective_named(data_args.objective).check_block(model_args.block_size)  # the smallest block it fits in
    except ValueError as err:
        raise UsageError(f"--block_size {model_args.block_size}: {err}") from None
    check_training(args, device_data=data_args.device_data)


def build_parser() -> HfArgumentParser:
    parser = HfArgumentParser((PretrainDataArguments, ModelArguments, TrainingArguments), prog="train_pretrain.py")
    parser.check = check_flags
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    data_args, model_args, args = parse_args(build_parser(), argv, stage="pretrain")
    objective = objective_named(data_args.objective)
    seeds = parse_seeds(args.seeds)
    accelerator = make_accelerator(args)

    text, docs = load_pretrain_corpus(data_args.pretrain_corpus_path)
    docs = objective.documents(docs)  # the same documents on either data path
    tokenizer = CharTokenizer.from_corpus(text)
    # a model that recited in pretraining is asked to recite by evaluate_birthplace.py, as far as its rows went
    recites = data_args.mixed_qa_corpus_path is not None and data_args.mixed_qa_format == "recite"
    config = build_model_config(model_args, tokenizer.vocab_size, **(
        {"answer_format": "recite", "recitation_chars": data_args.recitation_chars} if recites else {}))
    model = models_for(lambda _: CharGPTForCausalLM(config), seeds)
    block = config.block_size
    mixed, prompts, order = {}, None, None
    if data_args.mixed_qa_corpus_path is not None:
        path = data_args.mixed_qa_corpus_path
        qa = load_qa_tsv(path, block_size=block)
        if data_args.mixed_qa_format == "recite":
            prompts = recitation_dataset(qa, docs["text"], tokenizer, block, source=path,
                                         needed_by="--mixed_qa_format recite", limit=data_args.recitation_chars)
        else:
            prompts = name_prompt_dataset(qa, tokenizer, block, source=path)
        if data_args.skip_recited_documents:
            recited = set(question_documents(qa["question"], docs["text"], path, needed_by="--skip_recited_documents"))
            docs = docs.select([i for i in range(len(docs)) if i not in recited])
    dataset, corruption = span_corruption_dataset(docs, tokenizer, block, seed=args.seed,
                                                  objective=data_args.objective, spec=data_args.corruption_spec)
    if prompts is not None:
        order = mixed_order(len(dataset), len(prompts), data_args.mixed_qa_repeats, data_args.mixed_document_repeats)
        dataset = InterleavedDataset(dataset, prompts, order)
        mixed = {"mixed_qa": path, "mixed_name_prompts": len(prompts), **data_args.qa_options()}
    examples = len(dataset)
    if data_args.device_data:
        dataset = device_batches(EncodedExamples(tokenizer, block, documents=docs["text"], prompts=prompts, order=order,
                                                 device=accelerator.device, objective=data_args.objective), args, seeds)

    card = run_card(
        members_of(model)[0], args,
        title=f"chargpt pretrained ({config.position_embedding_type} positions, {config.attention_type} attention)",
        stage=f"pretraining ({data_args.objective.replace('_', ' ')})" + (" mixed with name prompts" if mixed else ""),
        data=data_args.pretrain_corpus_path, documents=len(docs), **mixed,
        **({"objective": data_args.objective} if data_args.objective != "span_corruption" else {}),
        **({"corruption_spec": data_args.corruption_spec} if data_args.corruption_spec != CORRUPTION_SPECS[0] else {}),
        **({"device_data": True} if data_args.device_data else {}),
        **seeds_card(seeds, args.stack_seeds),
    )
    return train_stage(accelerator, model, tokenizer, dataset, collate_for(args.packing, block, tokenizer), args,
                       stage="pretrain", seeds=seeds, final_tokens=args.num_train_epochs * examples * block,
                       tokens_per_example=objective.tokens_per_example(block, data_args.corruption_spec),
                       on_epoch_start=corruption.set_epoch, card=card)


def cli() -> int:
    """The installed `chargpt-pretrain` command: like running this file, bad input ends as one line."""
    return run_cli(main)


if __name__ == "__main__":
    sys.exit(cli())

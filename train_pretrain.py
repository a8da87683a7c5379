"""Pretrain a chargpt model with span corruption on wiki.txt (the reference's CharCorruptionDataset).

    accelerate launch --config_file accelerate_config.yaml train_pretrain.py \
        --pretrain_corpus_path DIR/wiki.txt --position_embedding_type rope --output_dir out/rope-pretrain

Defaults reproduce the 2024 reference (training/presets.py: epochs, batch size, learning rate; `--preset` for named
deviations); the cosine schedule spans every epoch's tokens.
`--mixed_qa_corpus_path` adds the finetuning questions to every epoch (mixed training; data_scripts/mixing.py).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from transformers import HfArgumentParser

from data_scripts import (
    DeviceBatches,
    EncodedExamples,
    InterleavedDataset,
    load_pretrain_corpus,
    load_qa_tsv,
    name_prompt_dataset,
    span_corruption_dataset,
)
from modeling_chargpt import CharGPTForCausalLM, CharTokenizer
from training import (
    ModelArguments,
    TrainingArguments,
    build_model_config,
    collate_for,
    make_accelerator,
    parse_args,
    report_done,
    run_card,
    run_cli,
    train,
)


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
    device_data: bool = field(
        default=False,
        metadata={"help": "Build each step's batch with tensor operations on the training device "
                  "(data_scripts/device_batches.py: the same distribution of corruptions, packing and prompts, "
                  "other draws, a fixed number of packed rows per step) instead of the datasets path and a "
                  "DataLoader. One process only."},
    )


def build_parser() -> HfArgumentParser:
    return HfArgumentParser((PretrainDataArguments, ModelArguments, TrainingArguments), prog="train_pretrain.py")


def main(argv: Sequence[str] | None = None) -> int:
    data_args, model_args, args = parse_args(build_parser(), argv, stage="pretrain")
    accelerator = make_accelerator(args)

    text, docs = load_pretrain_corpus(data_args.pretrain_corpus_path)
    tokenizer = CharTokenizer.from_corpus(text)
    config = build_model_config(model_args, tokenizer.vocab_size)
    model = CharGPTForCausalLM(config)
    block = config.block_size
    dataset, corruption = span_corruption_dataset(docs, tokenizer, block, seed=args.seed)
    mixed, prompts = {}, None
    if data_args.mixed_qa_corpus_path is not None:
        path = data_args.mixed_qa_corpus_path
        prompts = name_prompt_dataset(load_qa_tsv(path, block_size=block), tokenizer, block, source=path)
        dataset = InterleavedDataset(dataset, prompts)
        mixed = {"mixed_qa": data_args.mixed_qa_corpus_path, "mixed_name_prompts": len(prompts)}
    examples = len(dataset)
    if data_args.device_data:
        encoded = EncodedExamples(tokenizer, block, documents=docs["text"], prompts=prompts, device=accelerator.device)
        dataset = DeviceBatches(encoded, args.per_device_train_batch_size, seed=args.seed, shuffle=args.shuffle,
                                packing=args.packing)

    card = run_card(
        model, args,
        title=f"chargpt pretrained ({config.position_embedding_type} positions, {config.attention_type} attention)",
        stage="pretraining (span corruption)" + (" mixed with name prompts" if mixed else ""),
        data=data_args.pretrain_corpus_path, documents=len(docs), **mixed,
        **({"device_data": True} if data_args.device_data else {}),
    )
    result = train(
        accelerator, model, tokenizer, dataset, collate_for(args.packing, block, tokenizer), args,
        final_tokens=args.num_train_epochs * examples * block,
        tokens_per_example=block - 1,
        on_epoch_start=corruption.set_epoch,
        card=card,
        run_name="pretrain",
    )
    return report_done(accelerator, result, "pretraining", args.output_dir)


def cli() -> int:
    """The installed `chargpt-pretrain` command: like running this file, bad input ends as one line."""
    return run_cli(main)


if __name__ == "__main__":
    sys.exit(cli())

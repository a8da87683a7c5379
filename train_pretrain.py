"""Pretrain a chargpt model with span corruption on wiki.txt (the reference's CharCorruptionDataset).

    accelerate launch --config_file accelerate_config.yaml train_pretrain.py \
        --pretrain_corpus_path DIR/wiki.txt --position_embedding_type rope --output_dir out/rope-pretrain

Defaults reproduce the 2024 reference: 650 epochs, batch 128, lr 6e-3, final_tokens = 650 * len(dataset) * block.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from transformers import HfArgumentParser

from data_scripts import PackedCollator, load_pretrain_corpus, pad_collate, span_corruption_dataset
from modeling_chargpt import CharGPTForCausalLM, CharTokenizer
from training import (
    ModelArguments,
    TrainingArguments,
    build_model_config,
    fill_reference_defaults,
    make_accelerator,
    parse_args,
    report_done,
    run_card,
    run_cli,
    train,
)

REFERENCE = {"epochs": 650, "batch_size": 128, "learning_rate": 6e-3}


@dataclass
class PretrainDataArguments:
    pretrain_corpus_path: str = field(
        metadata={"help": "wiki.txt: one document per line; also defines the vocabulary."}
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = HfArgumentParser((PretrainDataArguments, ModelArguments, TrainingArguments))
    data_args, model_args, args = parse_args(parser, argv, stage="pretrain")
    fill_reference_defaults(args, **REFERENCE)
    accelerator = make_accelerator(args)

    text, docs = load_pretrain_corpus(data_args.pretrain_corpus_path)
    tokenizer = CharTokenizer.from_corpus(text)
    config = build_model_config(model_args, tokenizer.vocab_size)
    model = CharGPTForCausalLM(config)
    block = config.block_size
    dataset, corruption = span_corruption_dataset(docs, tokenizer, block, seed=args.seed)
    collate = PackedCollator(block, pad_token_id=tokenizer.pad_token_id) if args.packing else pad_collate

    card = run_card(
        model, args,
        title=f"chargpt pretrained ({config.position_embedding_type} positions, {config.attention_type} attention)",
        stage="pretraining (span corruption)", data=data_args.pretrain_corpus_path, documents=len(dataset),
    )
    result = train(
        accelerator, model, tokenizer, dataset, collate, args,
        final_tokens=args.num_train_epochs * len(dataset) * block,
        tokens_per_example=block - 1,
        on_epoch_start=corruption.set_epoch,
        card=card,
        run_name="pretrain",
    )
    return report_done(accelerator, result, "pretraining", args.output_dir)

if __name__ == "__main__":
    sys.exit(run_cli(main))

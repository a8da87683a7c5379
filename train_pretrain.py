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
    data_args, model_args, args = parse_args(parser, argv)
    fill_reference_defaults(args, **REFERENCE)
    accelerator = make_accelerator(args)

    text, docs = load_pretrain_corpus(data_args.pretrain_corpus_path)
    tokenizer = CharTokenizer.from_corpus(text)
    config = build_model_config(model_args, tokenizer.vocab_size)
    model = CharGPTForCausalLM(config)
    block = config.block_size
    dataset, corruption = span_corruption_dataset(docs, tokenizer, block, seed=args.seed)
    collate = PackedCollator(block, pad_token_id=tokenizer.pad_token_id) if args.packing else pad_collate

    card = {
        "title": f"chargpt pretrained ({config.position_embedding_type} positions, {config.attention_type} attention)",
        "stage": "pretraining (span corruption)",
        "data": data_args.pretrain_corpus_path,
        "documents": len(dataset),
        "parameters": model.num_parameters(),
        "n_layer": config.n_layer, "n_head": config.n_head, "n_embd": config.n_embd, "block_size": block,
        "epochs": args.num_train_epochs, "batch_size": args.per_device_train_batch_size,
        "learning_rate": args.learning_rate, "packing": args.packing, "seed": args.seed,
    }
    result = train(
        accelerator, model, tokenizer, dataset, collate, args,
        final_tokens=args.num_train_epochs * len(dataset) * block,
        tokens_per_example=block - 1,
        on_epoch_start=corruption.set_epoch,
        card=card,
        run_name="pretrain",
    )
    if result.interrupted:
        return 130
    if accelerator.is_main_process:
        print(f"pretraining done: {result.global_step} steps, final loss {result.final_loss:.4f}, "
              f"{result.train_seconds:.0f}s; model saved to {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))

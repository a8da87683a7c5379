"""Finetune on `Where was <name> born?<TAB>place` (the reference's NameDataset), from scratch or pretrained.

    accelerate launch --config_file accelerate_config.yaml train_finetune.py \
        --pretrain_corpus_path DIR/wiki.txt --finetune_corpus_path DIR/birth_places_train.tsv \
        [--model_name_or_path out/rope-pretrain] --output_dir out/rope-finetune

Defaults reproduce the 2024 reference: batch 256, lr 6e-4, 75 epochs from scratch or 10 from a pretrained
model, final_tokens = 200 * len(pretraining dataset) * block_size. The vocabulary always comes from wiki.txt.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from transformers import HfArgumentParser
from transformers.utils import logging

from data_scripts import PackedCollator, load_pretrain_corpus, load_qa_tsv, name_prompt_dataset, pad_collate
from modeling_chargpt import CharGPTForCausalLM, CharTokenizer
from training import (
    ModelArguments,
    TrainingArguments,
    UsageError,
    build_model_config,
    fill_reference_defaults,
    make_accelerator,
    parse_args,
    report_done,
    run_card,
    run_cli,
    train,
)

logger = logging.get_logger(__name__)


@dataclass
class FinetuneDataArguments:
    pretrain_corpus_path: str = field(metadata={"help": "wiki.txt: defines the vocabulary and the schedule length."})
    finetune_corpus_path: str = field(metadata={"help": "TSV of `question<TAB>answer` lines."})
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "A pretrained chargpt folder; without it the model starts from scratch."}
    )


def load_model(data_args: FinetuneDataArguments, model_args: ModelArguments, corpus_tokenizer: CharTokenizer):
    if data_args.model_name_or_path is None:
        return CharGPTForCausalLM(build_model_config(model_args, corpus_tokenizer.vocab_size)), corpus_tokenizer
    overrides = model_args.dropout_overrides()
    model = CharGPTForCausalLM.from_pretrained(data_args.model_name_or_path, **overrides)
    if overrides:
        logger.info("dropout of the loaded model set to %s", overrides)
    tokenizer = CharTokenizer.from_pretrained(data_args.model_name_or_path)
    if tokenizer.get_vocab() != corpus_tokenizer.get_vocab():
        raise UsageError(
            f"the vocabulary of {data_args.model_name_or_path} differs from the one built from "
            f"{data_args.pretrain_corpus_path}; pretrain and finetune with the same wiki.txt"
        )
    return model, tokenizer


def main(argv: Sequence[str] | None = None) -> int:
    parser = HfArgumentParser((FinetuneDataArguments, ModelArguments, TrainingArguments))
    data_args, model_args, args = parse_args(parser, argv, stage="finetune")
    pretrained = data_args.model_name_or_path is not None
    fill_reference_defaults(args, epochs=10 if pretrained else 75, batch_size=256, learning_rate=6e-4)
    accelerator = make_accelerator(args)

    text, docs = load_pretrain_corpus(data_args.pretrain_corpus_path)
    model, tokenizer = load_model(data_args, model_args, CharTokenizer.from_corpus(text))
    config = model.config
    block = config.block_size
    qa = load_qa_tsv(data_args.finetune_corpus_path, block_size=block)
    dataset = name_prompt_dataset(qa, tokenizer, block)
    collate = PackedCollator(block, pad_token_id=tokenizer.pad_token_id) if args.packing else pad_collate

    card = run_card(
        model, args,
        title=f"chargpt finetuned on birthplaces ({config.position_embedding_type} positions, "
              f"{config.attention_type} attention, {'pretrained' if pretrained else 'no pretraining'})",
        stage="finetuning (name prompts)", initialised_from=data_args.model_name_or_path or "scratch",
        data=data_args.finetune_corpus_path, examples=len(dataset),
    )
    result = train(
        accelerator, model, tokenizer, dataset, collate, args,
        final_tokens=200 * len(docs) * block,
        tokens_per_example=block - 1,
        card=card,
        run_name="finetune",
    )
    return report_done(accelerator, result, "finetuning", args.output_dir)

if __name__ == "__main__":
    sys.exit(run_cli(main))

"""Convert a CS224N reference minGPT checkpoint (`torch.save(model.state_dict(), "X.params")`) to a chargpt folder.

Every variant the reference code trains converts: learned positions (2021-2024), rope (2024) and the dense
synthesizer (2021/2022 handouts, learned positions). The reference keeps separate `key`/`query`/`value` linears;
chargpt fuses them into `attn.qkv` (q, k, v along the output dimension). The reference skeleton's synthesizer tables
`w2`/`b2` are `block_size - 1` wide (its training sequences were `block_size - 1` long), so a synthesizer checkpoint
becomes a chargpt model of that `block_size` (`pos_emb` keeps the rows it covers): the same logits for every input
the reference model can run. Shapes give n_layer, n_embd, vocab_size and block_size; the head count is not visible in
the weights except through the 2024 rope cache or the synthesizer's `w2` (head_dim rows), so otherwise it comes from
`--n_head` (default 8, the assignment's). The vocabulary is rebuilt from the pretraining corpus exactly as the
reference does, and must match the checkpoint.

    python -m modeling_chargpt.convert_reference_checkpoint --params vanilla.pretrain.params \\
        --pretrain_corpus_path wiki.txt --output_dir out/chargpt-vanilla [--position_embedding_type learned|rope]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

from .configuration_chargpt import CharGPTConfig
from .modeling_chargpt import CharGPTForCausalLM
from .tokenization_chargpt import CharTokenizer

DEFAULT_N_HEAD = 8
CONVERTIBLE_POSITION_TYPES = ("learned", "rope")
# Buffers the reference registers persistently; they are recomputed by chargpt, never copied.
_REFERENCE_BUFFERS = ("attn.mask", "attn.rope_cache")
_BLOCK_KEY = re.compile(r"^blocks\.(\d+)\.(.+)$")
_SHARED_PARAMS = (
    "ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "attn.value.weight", "attn.value.bias", "attn.proj.weight",
    "attn.proj.bias", "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias",
)
# Each block's parameters by attention type, beyond the shared ones: causal attention's query and key (fused into
# qkv with value), the synthesizer's A (`w1`), B (`w2`) and b2, copied under the same names
_ATTENTION_PARAMS = {
    "causal": ("attn.query.weight", "attn.query.bias", "attn.key.weight", "attn.key.bias"),
    "synthesizer": ("attn.w1.weight", "attn.w1.bias", "attn.w2", "attn.b2"),
}


class ConversionError(ValueError):
    """The checkpoint or corpus cannot be converted; the message is one line meant for the user."""


def load_reference_state_dict(params_path: str | Path) -> dict[str, torch.Tensor]:
    """torch.load(weights_only=True) a reference .params file into a plain {name: tensor} dict."""
    path = Path(params_path)
    if not path.is_file():
        raise ConversionError(f"reference checkpoint {str(path)!r} does not exist or is not a file")
    try:
        state_dict = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # pickle, zip and weights_only errors all mean the same thing to the user
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(e))
        reason = f"it pickles {found.group(1)}, not only tensors" if found else "not a torch.save file"
        raise ConversionError(
            f"{str(path)!r} is not a state_dict saved with torch.save(model.state_dict()) "
            f"(torch.load(weights_only=True) failed: {reason})"
        ) from None
    if not isinstance(state_dict, dict) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise ConversionError(f"{str(path)!r} does not hold a state_dict (a dict of tensors), got {type(state_dict)}")
    # A DataParallel-wrapped model saves every key under "module.".
    if state_dict and all(k.startswith("module.") for k in state_dict):
        state_dict = {k[len("module."):]: v for k, v in state_dict.items()}
    return dict(state_dict)


def infer_config(
    state_dict: dict[str, torch.Tensor],
    position_embedding_type: str | None = None,
    n_head: int | None = None,
    block_size: int | None = None,
) -> CharGPTConfig:
    """CharGPTConfig of a reference state_dict: shapes give the sizes, flags the rest.

    `position_embedding_type=None` detects it: `pos_emb` present means learned, absent means rope (2024 reference).
    `n_head=None` reads it from the rope cache when there is one, else uses 8. `block_size` is only needed when the
    checkpoint has neither `pos_emb` nor the attention mask buffers.
    """
    for key in ("tok_emb.weight", "head.weight", "ln_f.weight", "ln_f.bias"):
        if key not in state_dict:
            raise ConversionError(f"not a reference minGPT state_dict: key {key!r} is missing")
    vocab_size, n_embd = state_dict["tok_emb.weight"].shape
    if tuple(state_dict["head.weight"].shape) != (vocab_size, n_embd):
        raise ConversionError(
            f"head.weight has shape {tuple(state_dict['head.weight'].shape)}, expected {(vocab_size, n_embd)} "
            f"from tok_emb.weight"
        )
    layers = sorted({int(m.group(1)) for k in state_dict if (m := _BLOCK_KEY.match(k))})
    if not layers or layers != list(range(len(layers))):
        raise ConversionError(f"not a reference minGPT state_dict: block indices {layers} are not 0..N-1")
    n_layer = len(layers)

    has_pos_emb = "pos_emb" in state_dict
    if any(k.endswith(("attn.w1.weight", "attn.w2")) for k in state_dict):
        return _synthesizer_config(state_dict, position_embedding_type, n_head, block_size, n_layer)
    if position_embedding_type is None:
        position_embedding_type = "learned" if has_pos_emb else "rope"
    if position_embedding_type not in CONVERTIBLE_POSITION_TYPES:
        raise ConversionError(
            f"position_embedding_type={position_embedding_type!r} is not one of {list(CONVERTIBLE_POSITION_TYPES)}"
        )
    if position_embedding_type == "learned" and not has_pos_emb:
        raise ConversionError("position_embedding_type='learned' but the checkpoint has no pos_emb (a rope model?)")
    if position_embedding_type == "rope" and has_pos_emb:
        raise ConversionError("position_embedding_type='rope' but the checkpoint has a pos_emb (a learned model?)")

    rope_cache = state_dict.get("blocks.0.attn.rope_cache")
    if rope_cache is not None and rope_cache.dim() != 3:
        rope_cache = None  # not the 2024 layout (block_size, head_dim/2, 2): nothing to learn from it
    if n_head is None:
        n_head = n_embd // (2 * rope_cache.shape[1]) if rope_cache is not None else DEFAULT_N_HEAD
    if n_head <= 0 or n_embd % n_head != 0:
        raise ConversionError(f"n_head={n_head} does not divide n_embd={n_embd}")
    if rope_cache is not None and 2 * rope_cache.shape[1] != n_embd // n_head:
        raise ConversionError(
            f"n_head={n_head} gives head_dim {n_embd // n_head}, but the checkpoint's rope_cache is for head_dim "
            f"{2 * rope_cache.shape[1]}"
        )

    inferred_block = None
    if has_pos_emb:
        inferred_block = state_dict["pos_emb"].shape[1]
    elif "blocks.0.attn.mask" in state_dict:
        inferred_block = state_dict["blocks.0.attn.mask"].shape[-1]
    elif rope_cache is not None:
        inferred_block = rope_cache.shape[0]
    if block_size is not None and inferred_block is not None and block_size != inferred_block:
        raise ConversionError(f"block_size={block_size} disagrees with the checkpoint's {inferred_block}")
    block_size = inferred_block or block_size or 128

    try:
        return CharGPTConfig(
            vocab_size=int(vocab_size),
            block_size=int(block_size),
            n_layer=n_layer,
            n_head=int(n_head),
            n_embd=int(n_embd),
            position_embedding_type=position_embedding_type,
        )
    except ValueError as e:
        raise ConversionError(str(e)) from None


def _synthesizer_config(
    state_dict: dict[str, torch.Tensor], position_embedding_type: str | None, n_head: int | None,
    block_size: int | None, n_layer: int,
) -> CharGPTConfig:
    """The config of a reference synthesizer checkpoint (learned positions): `w2` is (head_dim, width), so it gives
    the head count, and its width (the reference's block_size - 1) is the converted model's block_size."""
    vocab_size, n_embd = state_dict["tok_emb.weight"].shape
    if "pos_emb" not in state_dict or position_embedding_type not in (None, "learned"):
        raise ConversionError("a synthesizer checkpoint has learned positions (pos_emb) in every reference variant; "
                              "this one matches none of them")
    w2 = state_dict.get("blocks.0.attn.w2")
    if w2 is None or w2.dim() != 2:
        raise ConversionError("not a reference synthesizer state_dict: 'blocks.0.attn.w2' is missing or not a matrix")
    head_dim, width = w2.shape
    if n_head is None:
        n_head = n_embd // head_dim if head_dim and n_embd % head_dim == 0 else 0
    if n_head <= 0 or n_embd % n_head != 0 or n_embd // n_head != head_dim:
        raise ConversionError(f"blocks.0.attn.w2 has {head_dim} rows (head_dim), which n_head={n_head} and "
                              f"n_embd={n_embd} do not give")
    reference_block = state_dict["pos_emb"].shape[1]
    if width > reference_block:
        raise ConversionError(f"blocks.0.attn.w2 is {width} wide, more than pos_emb's {reference_block} positions: "
                              "matches no reference synthesizer")
    if block_size is not None and block_size != width:
        raise ConversionError(f"block_size={block_size} disagrees with the synthesizer tables' {width} positions")
    try:
        return CharGPTConfig(vocab_size=int(vocab_size), block_size=int(width), n_layer=n_layer, n_head=int(n_head),
                             n_embd=int(n_embd), position_embedding_type="learned", attention_type="synthesizer")
    except ValueError as e:
        raise ConversionError(str(e)) from None


def convert_state_dict(state_dict: dict[str, torch.Tensor], config: CharGPTConfig) -> dict[str, torch.Tensor]:
    """Rename reference keys to chargpt's and fuse query/key/value into qkv (order q, k, v); a synthesizer's
    blocks keep their names, and `pos_emb` keeps the `block_size` rows the converted model has."""
    converted = {
        "transformer.tok_emb.weight": state_dict["tok_emb.weight"],
        "lm_head.weight": state_dict["head.weight"],
    }
    if config.position_embedding_type == "learned":
        converted["transformer.pos_emb"] = state_dict["pos_emb"][:, : config.block_size]
    converted["transformer.ln_f.weight"] = state_dict["ln_f.weight"]
    converted["transformer.ln_f.bias"] = state_dict["ln_f.bias"]
    expected = {"tok_emb.weight", "head.weight", "ln_f.weight", "ln_f.bias", "pos_emb"}
    synthesizer = config.attention_type == "synthesizer"
    block_params = _SHARED_PARAMS + _ATTENTION_PARAMS[config.attention_type]
    for i in range(config.n_layer):
        src, dst = f"blocks.{i}.", f"transformer.blocks.{i}."
        missing = [src + name for name in block_params if src + name not in state_dict]
        if missing:
            raise ConversionError(f"not a reference minGPT state_dict: {missing[0]!r} is missing")
        expected.update(src + name for name in block_params + _REFERENCE_BUFFERS)
        if synthesizer:  # chargpt's synthesizer has the reference's names
            converted.update({dst + name: state_dict[src + name] for name in block_params})
            continue
        converted.update({dst + name: state_dict[src + name] for name in _SHARED_PARAMS if "attn.value" not in name})
        for part in ("weight", "bias"):
            converted[dst + f"attn.qkv.{part}"] = torch.cat(
                [state_dict[src + f"attn.{name}.{part}"] for name in ("query", "key", "value")], dim=0
            )
    unexpected = sorted(set(state_dict) - expected)
    if unexpected:
        raise ConversionError(f"unexpected key {unexpected[0]!r} in the checkpoint (not a reference minGPT?)")
    return converted


def convert(
    params_path: str | Path,
    pretrain_corpus_path: str | Path,
    output_dir: str | Path | None = None,
    position_embedding_type: str | None = None,
    n_head: int | None = None,
    block_size: int | None = None,
) -> tuple[CharGPTForCausalLM, CharTokenizer]:
    """Build the chargpt model and tokenizer of a reference checkpoint; save both to `output_dir` if given."""
    if output_dir is not None and Path(output_dir).exists() and not Path(output_dir).is_dir():
        raise ConversionError(f"--output_dir {output_dir}: a file, not a folder")
    state_dict = load_reference_state_dict(params_path)
    corpus = Path(pretrain_corpus_path)
    if not corpus.is_file():
        raise ConversionError(f"pretraining corpus {str(corpus)!r} does not exist or is not a file")
    try:
        tokenizer = CharTokenizer.from_corpus(corpus.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ConversionError(f"pretraining corpus {str(corpus)!r} is not UTF-8 text ({e.reason})") from None
    config = infer_config(state_dict, position_embedding_type, n_head, block_size)
    if tokenizer.vocab_size != config.vocab_size:
        raise ConversionError(
            f"{str(corpus)!r} gives a vocabulary of {tokenizer.vocab_size} ids but the checkpoint has "
            f"{config.vocab_size}: not the corpus it was pretrained on"
        )
    converted = convert_state_dict(state_dict, config)
    model = CharGPTForCausalLM(config)
    expected_shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    for key, tensor in converted.items():
        if tuple(tensor.shape) != expected_shapes.get(key):
            raise ConversionError(f"{key!r} has shape {tuple(tensor.shape)}, expected {expected_shapes.get(key)}")
    model.load_state_dict({k: v.float() for k, v in converted.items()}, strict=True)
    model.eval()
    if output_dir is not None:
        try:
            model.save_pretrained(output_dir)
            tokenizer.save_pretrained(output_dir)
        except OSError as e:  # under a file, or a folder one cannot write in
            raise ConversionError(f"--output_dir {output_dir}: cannot write there ({e.strerror})") from None
    return model, tokenizer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m modeling_chargpt.convert_reference_checkpoint",
        description="Convert a CS224N reference minGPT .params state_dict into a chargpt folder "
        "(config, safetensors weights, tokenizer).",
    )
    parser.add_argument("--params", required=True, help="reference checkpoint saved with torch.save(state_dict)")
    parser.add_argument("--pretrain_corpus_path", required=True, help="wiki.txt, to rebuild the vocabulary")
    parser.add_argument("--output_dir", required=True, help="folder to write the chargpt model and tokenizer to")
    parser.add_argument(
        "--position_embedding_type", choices=CONVERTIBLE_POSITION_TYPES, default=None,
        help="default: learned if the checkpoint has pos_emb, else rope",
    )
    parser.add_argument(
        "--n_head", type=int, default=None,
        help=f"attention heads (default {DEFAULT_N_HEAD}, or what the rope cache of a 2024 checkpoint implies)",
    )
    parser.add_argument(
        "--block_size", type=int, default=None,
        help="only needed when the checkpoint has neither pos_emb nor attention mask buffers (default 128)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        model, _ = convert(
            args.params, args.pretrain_corpus_path, args.output_dir,
            position_embedding_type=args.position_embedding_type, n_head=args.n_head, block_size=args.block_size,
        )
    except ConversionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    cfg = model.config
    print(
        f"wrote {args.output_dir}: {cfg.position_embedding_type} positions, {cfg.attention_type} attention, "
        f"n_layer={cfg.n_layer} n_head={cfg.n_head} n_embd={cfg.n_embd} block_size={cfg.block_size} "
        f"vocab_size={cfg.vocab_size}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Character tokenizer with the reference vocabulary: PAD=0, MASK=1, then the corpus' sorted characters."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from transformers import PreTrainedTokenizer

PAD_CHAR = "\u25a1"
MASK_CHAR = "\u2047"

VOCAB_FILES_NAMES = {"vocab_file": "vocab.json"}


class UnknownCharacterError(ValueError):
    """A character the vocabulary (built from the pretraining corpus) does not contain."""


def _unknown_char_message(char: str, position: int, text: str) -> str:
    start = max(0, position - 15)
    context = text[start : position + 15].replace("\n", "\\n")
    return (
        f"character {char!r} (U+{ord(char):04X}) at position {position} is not in the vocabulary "
        f"(built from the pretraining corpus); context: {context!r}"
    )


class CharTokenizer(PreTrainedTokenizer):
    """One token per character, exactly the CS224N minGPT vocabulary.

    The reference builds ``[PAD, MASK] + sorted(set(corpus))``; keeping that order keeps checkpoints of the
    reference convertible. MASK doubles as EOS because it ends every answer. Nothing is ever added around
    the text, and unknown characters are an error rather than a silent id.
    """

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(
        self,
        vocab_file: str | None = None,
        chars: Iterable[str] | None = None,
        pad_token: str = PAD_CHAR,
        eos_token: str = MASK_CHAR,
        mask_token: str = MASK_CHAR,
        padding_side: str = "left",
        **kwargs,
    ) -> None:
        if (vocab_file is None) == (chars is None):
            raise ValueError("CharTokenizer needs exactly one of `vocab_file` or `chars`")
        if vocab_file is not None:
            with open(vocab_file, encoding="utf-8") as f:
                self.stoi: dict[str, int] = json.load(f)
        else:
            self.stoi = {c: i for i, c in enumerate(chars)}
        ids = sorted(self.stoi.values())
        if ids != list(range(len(ids))):
            raise ValueError("CharTokenizer vocabulary ids must be 0..N-1 without gaps")
        if self.stoi.get(PAD_CHAR) != 0 or self.stoi.get(MASK_CHAR) != 1:
            raise ValueError(f"CharTokenizer vocabulary must map PAD {PAD_CHAR!r} to 0 and MASK {MASK_CHAR!r} to 1")
        self.itos: dict[int, str] = {i: c for c, i in self.stoi.items()}
        kwargs.pop("unk_token", None)
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        super().__init__(
            pad_token=pad_token,
            eos_token=eos_token,
            mask_token=mask_token,
            unk_token=None,
            padding_side=padding_side,
            **kwargs,
        )

    @classmethod
    def from_corpus(cls, text: str, **kwargs) -> CharTokenizer:
        """Build the reference vocabulary from the pretraining corpus text (e.g. all of wiki.txt)."""
        for special in (PAD_CHAR, MASK_CHAR):
            if special in text:
                raise ValueError(
                    f"the corpus contains the reserved character {special!r} (U+{ord(special):04X}) at "
                    f"position {text.index(special)}; it cannot also be a regular token"
                )
        return cls(chars=[PAD_CHAR, MASK_CHAR, *sorted(set(text))], **kwargs)

    @property
    def vocab_size(self) -> int:
        return len(self.stoi)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.stoi)

    def encode_text(self, text: str) -> list[int]:
        """Fast path for data pipelines: ids of every character, no special handling, no padding."""
        stoi = self.stoi
        try:
            return [stoi[c] for c in text]
        except KeyError:
            for pos, c in enumerate(text):
                if c not in stoi:
                    raise UnknownCharacterError(_unknown_char_message(c, pos, text)) from None
            raise

    def tokenize(self, text: str, **kwargs) -> list[str]:
        # Every character is a token (PAD and MASK included), so no added-token splitting or stripping.
        for pos, c in enumerate(text):
            if c not in self.stoi:
                raise UnknownCharacterError(_unknown_char_message(c, pos, text))
        return list(text)

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        return self.tokenize(text)

    def _convert_token_to_id(self, token: str) -> int:
        try:
            return self.stoi[token]
        except KeyError:
            raise UnknownCharacterError(
                f"token {token!r} is not in the vocabulary (built from the pretraining corpus)"
            ) from None

    def _convert_id_to_token(self, index: int) -> str:
        try:
            return self.itos[int(index)]
        except KeyError:
            raise ValueError(f"token id {index} is outside the vocabulary (size {len(self.itos)})") from None

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def build_inputs_with_special_tokens(self, token_ids_0: list[int], token_ids_1: list[int] | None = None):
        return token_ids_0 + (token_ids_1 or [])

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str]:
        if not os.path.isdir(save_directory):
            raise ValueError(f"save_vocabulary expects a directory, got {save_directory!r}")
        name = (filename_prefix + "-" if filename_prefix else "") + VOCAB_FILES_NAMES["vocab_file"]
        path = os.path.join(save_directory, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.stoi, f, ensure_ascii=False, indent=0)
        return (path,)

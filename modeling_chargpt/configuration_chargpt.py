"""Configuration of the CS224N character-level GPT; defaults are the assignment's."""

from __future__ import annotations

from transformers import PretrainedConfig

from .positions import POSITION_ENCODINGS

POSITION_EMBEDDING_TYPES = tuple(POSITION_ENCODINGS)  # the built-in ones, for command-line choices
ANSWER_FORMATS = ("direct", "recite")
ATTENTION_TYPES = ("causal", "synthesizer")
# The pipeline every chargpt model folder names, so that `pipeline(model=FOLDER, trust_remote_code=True)` builds it
# (its code is copied into the folder beside the model's: pipeline_chargpt.save_pipeline_files).
PIPELINE_TASK = "birthplace-qa"
PIPELINES = {PIPELINE_TASK: {"impl": "pipeline_chargpt.BirthplaceQAPipeline", "pt": ["AutoModelForCausalLM"], "tf": [],
                             "type": "text"}}


class CharGPTConfig(PretrainedConfig):
    """One object drives the whole model: shapes, dropout, position encoding and attention variant.

    `block_size` is the training context. Learned positions and synthesizer attention have parameters tied to it, so
    they cannot run past it (`bounded_context`); rope, sinusoidal and no positions can (positions.py has each
    encoding). `answer_format` says how a finetuned model answers a birthplace question: 'direct' (the reference:
    question, MASK, answer) or 'recite' (`train_finetune.py --recite True`: the name, its recited document, MASK,
    answer); the evaluation reads it. `answering` holds how a finetuned model answers and abstains
    (`answering.AnsweringSettings.to_config`: decoding choices, the calibration of its confidence, the threshold) and
    `recitation_chars` where its recitation rows were cut (`train_finetune.py --recitation_chars`);
    `custom_pipelines` the birthplace-qa pipeline. Every field is given here, when the config is made (a training
    script's flags, or `from_pretrained(FOLDER, field=value)`), and nothing sets one on a built model.
    """

    model_type = "chargpt"
    keys_to_ignore_at_inference = ["past_key_values"]
    attribute_map = {
        "num_hidden_layers": "n_layer",
        "hidden_size": "n_embd",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "block_size",
    }

    def __init__(
        self,
        vocab_size: int = 256,
        block_size: int = 128,
        n_layer: int = 4,
        n_head: int = 8,
        n_embd: int = 256,
        embd_pdrop: float = 0.1,
        resid_pdrop: float = 0.1,
        attn_pdrop: float = 0.1,
        position_embedding_type: str = "learned",
        attention_type: str = "causal",
        rope_theta: float = 10000.0,
        initializer_range: float = 0.02,
        layer_norm_epsilon: float = 1e-5,
        pad_token_id: int = 0,
        eos_token_id: int = 1,
        bos_token_id: int | None = None,
        tie_word_embeddings: bool = False,
        use_cache: bool = True,
        answer_format: str = "direct",
        answering: dict | None = None,
        recitation_chars: int | None = None,
        custom_pipelines: dict | None = None,
        **kwargs,
    ) -> None:
        if position_embedding_type not in POSITION_ENCODINGS:
            raise ValueError(
                f"position_embedding_type={position_embedding_type!r} is not one of {list(POSITION_ENCODINGS)}"
            )
        if answer_format not in ANSWER_FORMATS:
            raise ValueError(f"answer_format={answer_format!r} is not one of {list(ANSWER_FORMATS)}")
        if attention_type not in ATTENTION_TYPES:
            raise ValueError(f"attention_type={attention_type!r} is not one of {list(ATTENTION_TYPES)}")
        for name, value in (("vocab_size", vocab_size), ("n_layer", n_layer), ("n_head", n_head),
                            ("n_embd", n_embd)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        if n_embd % n_head != 0:
            raise ValueError(f"n_embd={n_embd} must be divisible by n_head={n_head} (allowed: multiples of n_head)")
        if not isinstance(block_size, int) or block_size <= 0:
            if attention_type == "synthesizer":
                raise ValueError(
                    f"attention_type='synthesizer' needs a fixed positive integer block_size, got {block_size!r}"
                )
            raise ValueError(f"block_size={block_size!r} must be a positive integer")
        for name, value in (("embd_pdrop", embd_pdrop), ("resid_pdrop", resid_pdrop), ("attn_pdrop", attn_pdrop)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name}={value!r} must be in [0, 1)")
        self.vocab_size = vocab_size
        self.block_size = block_size
        self.n_layer = n_layer
        self.n_head = n_head
        self.n_embd = n_embd
        self.embd_pdrop = embd_pdrop
        self.resid_pdrop = resid_pdrop
        self.attn_pdrop = attn_pdrop
        self.position_embedding_type = position_embedding_type
        self.attention_type = attention_type
        self.rope_theta = rope_theta
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.use_cache = use_cache
        self.answer_format = answer_format
        if answering is not None and not isinstance(answering, dict):
            raise ValueError(f"answering={answering!r} must be a dict (answering.AnsweringSettings.to_config)")
        self.answering = answering
        if recitation_chars is not None and (not isinstance(recitation_chars, int) or recitation_chars < 1):
            raise ValueError(f"recitation_chars={recitation_chars!r} must be a positive integer")
        self.recitation_chars = recitation_chars
        if custom_pipelines is not None and not isinstance(custom_pipelines, dict):
            raise ValueError(f"custom_pipelines={custom_pipelines!r} must be a dict (task -> its implementation)")
        self.custom_pipelines = PIPELINES if custom_pipelines is None else custom_pipelines
        # transformers 5's PretrainedConfig no longer declares these; generate() reads them from here.
        self.pad_token_id = pad_token_id
        self.eos_token_id = eos_token_id
        self.bos_token_id = bos_token_id
        self.tie_word_embeddings = tie_word_embeddings
        POSITION_ENCODINGS[position_embedding_type].check_config(self)
        super().__init__(**kwargs)

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def bounded_context(self) -> bool:
        """True when positions or attention cannot run past block_size: what the model's length checks and the
        answering code's read, so no other place decides it."""
        return POSITION_ENCODINGS[self.position_embedding_type].bounded or self.attention_type == "synthesizer"

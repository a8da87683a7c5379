"""Every (position_embedding_type, attention_type) pair the model supports, for parametrized tests."""

VARIANTS = [
    ("learned", "causal"),
    ("rope", "causal"),
    ("sinusoidal", "causal"),
    ("none", "causal"),
    ("learned", "synthesizer"),
]
VARIANT_IDS = [f"{p}-{a}" for p, a in VARIANTS]

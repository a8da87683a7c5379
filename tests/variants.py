"""The model variants the model tests run, built from the registry: every position encoding with causal attention,
and the synthesizer (its learned positions)."""

from modeling_chargpt.positions import POSITION_ENCODINGS

VARIANTS = [*((name, "causal") for name in POSITION_ENCODINGS), ("learned", "synthesizer")]
VARIANT_IDS = [f"{p}-{a}" for p, a in VARIANTS]
UNBOUNDED = [name for name, encoding in POSITION_ENCODINGS.items() if not encoding.bounded]

"""The confidence a person reads: the probability that an answer is right, from two things the model says about it.

A raw sequence probability does not say that. A reciting model's is the probability of its whole recitation
(3.9e-15 for a right answer is ordinary), and any model is as sure of a birthplace it invents for a person it never
read about as of one it read. Two signals, both the model's own and both computed while it answers:

- ``name_logprob``: how familiar the name is, the mean log-probability per character of the name as the start of a
  document (every character after the first; nothing comes before a document's first character). A model that read
  a person's line has seen that name begin a document 50-150 times; an invented or recombined name it has not
  (measured in docs/confidence.md: this alone tells the demo's dev people from another world's, AUROC 1.0).
- ``output_logprob``: the log-probability of the model's whole output (recitation, if any, and answer), which
  ranks its answers about people it did read.

`Calibration` is a logistic regression on them, fitted on held-out training questions and on people the model
never read (`chargpt.evaluation.calibrate`), and saved with the model (``config.answering['calibration']``). With a
`gate` it is two: P(right) = P(read about | name) x P(right | read about, output), the first a logistic regression on
the name's familiarity alone (held-out people against unknown ones), the second on the output's log-probability
alone (the held-out answers), so that the name, which sets unknown people apart, does not blur the order of the
answers about people it read (`chargpt.evaluation.calibrate --gated`; measured on `make best`'s model:
docs/confidence.md). It is
applied here with plain arithmetic, so a model folder answers with it where only torch and transformers are installed.
Fitting is `chargpt.evaluation.calibrate.fit_logistic`, which a model folder does not need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

FEATURES = ("name_logprob", "output_logprob")


@dataclass(frozen=True)
class Calibration:
    """p(right) = sigmoid(bias + sum_i weight_i * (feature_i - mean_i) / scale_i) over `features`, times the
    `gate`'s own such probability where there is one (a `Calibration` of its own, as a dict); `fitted_on` says on
    what (counts, files), so a saved model tells where its confidence comes from."""

    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    features: tuple[str, ...] = FEATURES
    fitted_on: dict = field(default_factory=dict)
    gate: dict | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.features) - set(FEATURES))
        if unknown:
            raise ValueError(f"calibration feature {unknown[0]!r} is not one of {list(FEATURES)}")
        if not len(self.weights) == len(self.mean) == len(self.scale) == len(self.features):
            raise ValueError("calibration: weights, mean, scale and features must have one entry per feature")
        if any(s <= 0 for s in self.scale):
            raise ValueError("calibration: every scale must be positive")
        # the gate, checked and built once (not a field: equality and to_dict keep its dict)
        object.__setattr__(self, "_gate", None if self.gate is None else Calibration.from_dict(self.gate))

    def probability(self, **signals: float) -> float:
        """The probability that the answer is right, given each feature's value (keyword per feature)."""
        z = self.bias + sum(w * (signals[f] - m) / s
                            for w, f, m, s in zip(self.weights, self.features, self.mean, self.scale, strict=True))
        p = 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))
        return p if self._gate is None else p * self._gate.probability(**signals)

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, saved: Mapping) -> Calibration:
        known = {"weights", "bias", "mean", "scale", "features", "fitted_on", "gate"}
        extra = sorted(set(saved) - known)
        if extra:
            raise ValueError(f"calibration holds an unknown field {extra[0]!r}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})


def signals(name_logprob: float | None, output_logprob: float | None) -> dict[str, float] | None:
    """The features of one answer, or None where the answer was not scored."""
    if name_logprob is None or output_logprob is None:
        return None
    return {"name_logprob": name_logprob, "output_logprob": output_logprob}

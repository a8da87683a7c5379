"""Exact-match accuracy of predicted birthplaces, as a local `evaluate` metric (hub metrics cannot load offline)."""

import datasets
import evaluate

_DESCRIPTION = "Fraction of predictions that equal the gold birthplace exactly (the CS224N assignment's score)."
_KWARGS = """
Args:
    predictions (list of str): predicted places, one per question.
    references (list of str): gold places.
Returns:
    correct (int), total (int), accuracy (float in [0, 1]).
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class BirthplaceAccuracy(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS,
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Value("string")}),
        )

    def _compute(self, predictions, references) -> dict:
        correct = sum(p == r for p, r in zip(predictions, references, strict=True))
        total = len(references)
        return {"correct": correct, "total": total, "accuracy": correct / total if total else 0.0}

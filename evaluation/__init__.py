"""Birthplace prediction (batched greedy generation) and its exact-match metric."""

from .predict import check_questions, load_metric, predict_birthplaces

__all__ = ["check_questions", "load_metric", "predict_birthplaces"]

"""Birthplace prediction (batched greedy generation) and its exact-match metric."""

from .predict import METRIC_PATH, check_questions, load_metric, predict_birthplaces

__all__ = ["METRIC_PATH", "check_questions", "load_metric", "predict_birthplaces"]

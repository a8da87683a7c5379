"""Birthplace prediction (batched greedy generation) and its exact-match metric."""

from .predict import check_questions, greedy_until_mask, load_metric, predict_birthplaces, recite

__all__ = ["check_questions", "greedy_until_mask", "load_metric", "predict_birthplaces", "recite"]

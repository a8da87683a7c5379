"""Evaluating a birthplace model, one module per job: `predict` (batched greedy answers, the exact-match metric),
`spans` (answers taken from a recitation), `records` (what each answer rests on: its probability and grounding),
`record_files` (the predictions and records files), `confidence` (coverage, calibration, thresholds) and
`report_html` (the error-analysis page).

Nothing is imported here: `chargpt.evaluation.record_files` and `chargpt.evaluation.confidence` load without torch
or the model, so the tools that only read an evaluation's files start in a second.
"""

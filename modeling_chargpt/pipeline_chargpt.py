"""The `birthplace-qa` pipeline: ask a chargpt model where someone was born, and get what it was measured with.

    from transformers import pipeline
    ask = pipeline(model="out/best/seed0", trust_remote_code=True)   # the code saved in the model folder
    ask("Where was Khatchig Mouradian born?")
    # {'question': ..., 'answer': 'Lebanon', 'confidence': 0.93, 'probability': 2.1e-09, 'abstained': False, ...}

A question is ``Where was NAME born?`` in any case, with or without its question mark, or a bare name. The model
answers in the format it was finetuned and
evaluated with, saved in its config (`answering.AnsweringSettings`: the reference prompt, a recitation, span answers
with or without continuation, the calibration of its confidence and the abstention threshold, both chosen on
held-out training questions and people it never read: `chargpt.evaluation.calibrate`); arguments
override each one. Given `documents` (a wiki.txt path or its text), each answer also says whether it is grounded,
and the person's line. Answering is `answering.answer_questions`, as in `evaluate_birthplace.py`: the same answers.

Every finetuned model folder holds this file and the modules it imports (`save_pipeline_files`), so that a fresh
environment without this package answers through `trust_remote_code=True`.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import torch
from transformers import Pipeline
from transformers.dynamic_module_utils import custom_object_save
from transformers.utils import logging

from .answering import (
    DECODING_CHOICES,
    AnsweringSettings,
    QuestionError,
    answer_questions,
    asked_person,
    name_casings,
    question_problem,
    score_names,
    typed_question,
)
from .calibration import Calibration
from .configuration_chargpt import PIPELINE_TASK
from .grounding import WikiIndex

logger = logging.get_logger(__name__)

TASK = PIPELINE_TASK
_OVERRIDES = (*DECODING_CHOICES, "max_new_tokens")  # what a call may change of the saved settings


class BirthplaceQAPipeline(Pipeline):
    """Questions in, one dict per question out: ``question`` (as the model was asked it), ``answer``,
    ``confidence`` (the probability that the answer is right, from the calibration saved with the model: None
    without one), ``probability`` (the raw probability of the model's whole output: its recitation, if any, and the
    answer), ``name_score`` (how familiar the name is: `answering.score_names`), ``abstained`` (the confidence, or
    without a calibration the probability, below the threshold), ``recitation`` (a reciting model's, else None);
    with `documents` also ``grounded`` and ``line`` (the person's wiki.txt line)."""

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_video_processor = False
    _load_tokenizer = True

    def __init__(self, *args: Any, settings: AnsweringSettings | None = None, **kwargs: Any) -> None:
        self._settings = settings  # before the base class reads them (it sanitizes the call's defaults)
        super().__init__(*args, **kwargs)
        if settings is None and not AnsweringSettings.saved(self.model.config):
            logger.warning("%s holds no answering settings (config.answering): it answers in its answer_format "
                           "(%r) without abstaining", getattr(self.model, "name_or_path", "the model"),
                           self.settings.answer_format)

    @property
    def settings(self) -> AnsweringSettings:
        """How the model answers unless a call says otherwise: `settings` given to the constructor, or else what
        the model's config saved."""
        return self._settings or AnsweringSettings.of(self.model.config)

    def _sanitize_parameters(self, documents: str | os.PathLike | None = None, score: bool = True,
                             details: bool = False, **kwargs: Any):
        """`score=False` skips the probabilities (and so abstention); `details=True` adds each answer's and
        recitation's scores (`answering.AnswerScore`), which evaluate_birthplace.py's records keep."""
        overrides = {name: kwargs.pop(name) for name in _OVERRIDES if name in kwargs}
        if "abstain_below" in kwargs:  # None turns abstention off
            overrides["abstain_below"] = kwargs.pop("abstain_below")
        if kwargs:
            raise TypeError(f"{TASK} takes no argument {sorted(kwargs)[0]!r}")
        abstain = {"abstain_below": overrides.pop("abstain_below")} if "abstain_below" in overrides else {}
        settings = replace(self.settings.choosing(**overrides), **abstain)  # None is a choice for abstain_below only
        settings.check()
        postprocess = {"details": details, "abstain_below": settings.abstain_below,
                       "calibrated": settings.calibration is not None,
                       **({"wiki": _documents(documents)} if documents is not None else {})}
        return {"settings": settings}, {"settings": settings, "score": score}, postprocess

    def asked(self, question: str, settings: AnsweringSettings) -> str:
        """The question as the model will be asked it, checked: ``Where was NAME born?`` for what a person typed
        (`answering.typed_question`; a name typed in another case gets the casing the model finds most familiar), or
        a one-line `QuestionError`."""
        typed = typed_question(question)
        if typed != question:
            casings = [c for c in name_casings(asked_person(typed)) if set(c) <= self.tokenizer.stoi.keys()]
            scores = score_names(self.model, self.tokenizer, casings, show_progress=False)
            if casings and None not in scores:
                typed = f"Where was {casings[scores.index(max(scores))]} born?"
        problem = question_problem(typed, self.tokenizer, self.model.config, settings.max_new_tokens,
                                   settings.answer_format)
        if problem is not None:
            raise QuestionError(problem)
        return typed

    def preprocess(self, question: str, settings: AnsweringSettings) -> dict[str, torch.Tensor]:
        """The question as the model's format takes it (`asked`), encoded."""
        return {"input_ids": torch.tensor([self.tokenizer.encode_text(self.asked(question, settings))])}

    def _forward(self, model_inputs: dict[str, torch.Tensor], settings: AnsweringSettings,
                 score: bool = True) -> dict[str, list]:
        pad, itos = self.tokenizer.pad_token_id, self.tokenizer.itos
        questions = ["".join(itos[t] for t in row if t != pad) for row in model_inputs["input_ids"].tolist()]
        answered = answer_questions(self.model, self.tokenizer, questions, settings, batch_size=len(questions),
                                    score=score, show_progress=False)
        n = len(questions)
        calibration = Calibration.from_dict(settings.calibration) if settings.calibration else None
        return {"question": questions, "answer": answered.answers,
                "confidence": [answered.right_probability(i, calibration) for i in range(n)],
                "probability": [answered.confidence(i) for i in range(n)],
                "name_score": answered.name_scores or [None] * n,
                "recitation": answered.recitations or [None] * n,
                "answer_score": answered.scores or [None] * n,
                "recitation_score": answered.recitation_scores or [None] * n}

    def postprocess(self, model_outputs: dict[str, Any], details: bool = False, abstain_below: float | None = None,
                    calibrated: bool = False, wiki: WikiIndex | None = None) -> dict[str, Any]:
        one = {key: value[0] if isinstance(value, list) else value for key, value in model_outputs.items()}
        scores = {key: one.pop(key) for key in ("answer_score", "recitation_score")}
        sure = one["confidence"] if calibrated else one["probability"]
        out = {**one, "abstained": abstain_below is not None and sure is not None and sure < abstain_below}
        if details:
            out.update(scores)
        if wiki is not None:
            person = asked_person(out["question"])
            lines = wiki.lines_with(person) if person else ()
            out["grounded"] = wiki.occurs_in(out["answer"], lines) if lines else None
            out["line"] = wiki.lines[lines[0] - 1] if lines else None
        return out


def _documents(documents: str | os.PathLike) -> WikiIndex:
    """wiki.txt from a path, or its text given as is."""
    if os.path.isfile(documents):
        with open(documents, encoding="utf-8") as f:
            return WikiIndex(f.read(), documents)
    return WikiIndex(str(documents))


def save_pipeline_files(folder: str | os.PathLike) -> None:
    """Make a model folder answer through `pipeline(model=FOLDER, trust_remote_code=True)`: its config names this
    pipeline (`CharGPTConfig.custom_pipelines`), and this file and the modules it imports are copied beside the model
    code."""
    os.makedirs(folder, exist_ok=True)
    custom_object_save(BirthplaceQAPipeline, folder)

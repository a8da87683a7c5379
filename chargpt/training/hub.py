"""Sharing a model on the Hugging Face Hub: its card (huggingface_hub's `ModelCard`, with a `model-index` an
evaluation fills in) and the upload (`HfApi`; the token comes from the environment, as huggingface_hub reads it)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, HfApi, ModelCard, ModelCardData

from .errors import UsageError
from .files import atomic_write_text

CARD = "README.md"
EVALUATED = "## Evaluation"
ANSWERS = "## How it answers"
RULES = {"skip_name_words": "never a word of the asked name", "first_of_pair": 'of "Perth, Scotland", Perth',
         "birth_before_death": "the place before a death date",
         "after_born": 'of "born 1975 in Athens", Athens'}  # answering.py's span rules, for a reader
TAGS = ["chargpt", "cs224n", "character-level", "birthplace-qa"]
PIPELINE_TAG = "question-answering"  # what the model does, among the Hub's tags (its own task is birthplace-qa)
# What a model folder holds besides the model: resumable state, logs, snapshots and temporary folders stay local
NOT_PUSHED = ["checkpoints/*", "runs/*", "epoch-*/*", ".tmp*", "*.tmp"]
USAGE = """A character-level GPT from the chargpt project (the CS224N pretraining and birthplace assignment).

Ask it where someone was born, in the format it was measured with (its folder holds the pipeline's code):

```python
from transformers import pipeline
ask = pipeline(model="THIS_FOLDER_OR_REPO_ID", trust_remote_code=True)
ask("Where was Khatchig Mouradian born?")
```

Or load it with `import modeling_chargpt` then `AutoModelForCausalLM.from_pretrained(...)`.
"""


def write_model_card(path: str | os.PathLike, info: dict[str, Any]) -> None:
    """README.md of a trained model: metadata through `ModelCardData`, then what was trained, on what, with which
    hyper-parameters and how it ended (a table of `info`). An evaluation adds its result later (`add_eval_result`)."""
    data = ModelCardData(library_name="transformers", tags=TAGS, model_name=info.get("title", "chargpt model"),
                         pipeline_tag=PIPELINE_TAG)
    rows = "\n".join(f"| {k} | {v} |" for k, v in info.items() if k != "title")
    body = (f"# {info.get('title', 'chargpt model')}\n\n{USAGE}\n"
            f"| field | value |\n| --- | --- |\n{rows}\n")
    ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}").save(path)


def describe_answering(config: dict[str, Any]) -> str:
    """How a model folder answers through the pipeline (config.json's `answer_format` and `answering`), in words:
    what someone who downloads it gets is what was measured, so its card says which decoding and threshold those
    are."""
    answering = config.get("answering") or {}
    beams = answering.get("recitation_beams") or 1
    recitation = f"the best of {beams} beam recitations" if beams > 1 else "its greedy recitation"
    if config.get("answer_format", "direct") == "direct":
        how = "It answers the question directly, greedy, as the assignment's models do."
    elif answering.get("answer_from_recitation"):
        rules = [text for key, text in RULES.items() if answering.get(key)]
        how = (f"It recites the person's line, then answers with the most probable place span in {recitation}"
               + (" (a recitation cut at its limit is continued)" if answering.get("continue_recitation") else "")
               + (f". Its rules: {'; '.join(rules)}" if rules else "") + ".")
    else:
        how = f"It recites the person's line, then names the place after {recitation}."
    threshold, chosen = answering.get("abstain_below"), answering.get("abstention") or {}
    fitted = (answering.get("calibration") or {}).get("fitted_on") or {}
    if answering.get("calibration"):
        how += (" Its confidence is the probability that the answer is right, from how familiar the name is and how "
                "probable its output, fitted on held-out training questions"
                + (f" and {fitted['unknown_questions']} people it never read" if "unknown_questions" in fitted
                   else "") + ".")
    rules = {  # calibrate's rules: what the threshold was chosen for, and what it gave on the held-out questions
        "keep_right": ("a threshold that kept {:g}% of the held-out right answers", "keep_right", "holdout_right_kept"),
        "precision": ("the lowest threshold at which its answers to held-out training questions were at least {:g}% "
                      "right", "precision", "holdout_precision")}
    if threshold is not None and chosen.get("rule") in rules:
        text, share, there = rules[chosen["rule"]]
        unknown = chosen.get("unknown_questions")
        abstains = (f'Below a confidence of {threshold:.3g} it says "I don\'t know", '
                    + text.format(100 * chosen[share])
                    + (f" ({100 * chosen[there]:.1f}% there)" if chosen.get(there) is not None else "")
                    + (f"; it answered {chosen['unknown_answered']} of {unknown} people it never read" if unknown
                       else "") + ".")
    elif threshold is None:
        abstains = "It answers every question: no abstention threshold is saved."
    else:
        abstains = f'Below a confidence of {threshold:.3g} it says "I don\'t know"'
        if {"target_precision", "holdout_precision", "holdout_coverage"} <= chosen.keys():
            abstains += (f", a threshold chosen for {100 * chosen['target_precision']:g}% precision on held-out "
                         f"training questions (there it answered {100 * chosen['holdout_coverage']:.1f}% of them, "
                         f"{100 * chosen['holdout_precision']:.1f}% right)")
        abstains += "."
    return f"{how} {abstains} The pipeline reads these settings from config.json; its arguments override them."


def _with_section(text: str, heading: str, body: str) -> str:
    """`text` with the section `heading` holding `body`: replaced where it is, else put before the evaluation."""
    lines = text.rstrip("\n").split("\n")
    if heading in lines:
        start = lines.index(heading)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines[start:end] = [heading, "", body, ""]
    elif EVALUATED in lines:
        at = lines.index(EVALUATED)
        lines[at:at] = [heading, "", body, ""]
    else:
        lines += ["", heading, "", body]
    return "\n".join(lines) + "\n"


def _with_answering(text: str, folder: str | os.PathLike) -> str:
    """`text` with its "How it answers" as the folder's config.json says (unchanged where there is no config)."""
    config = Path(folder) / "config.json"
    if not config.is_file():
        return text
    return _with_section(text, ANSWERS, describe_answering(json.loads(config.read_text("utf-8"))))


def note_answering(folder: str | os.PathLike) -> None:
    """Bring the card's "How it answers" in line with the folder's config.json, after something changed how it
    answers (its finetuning, a saved abstention threshold); a folder without a card is left as it is."""
    path = Path(folder) / CARD
    if path.is_file():
        card = ModelCard.load(path)
        card.text = _with_answering(card.text, folder)
        atomic_write_text(path, card.content)


def add_eval_result(folder: str | os.PathLike, accuracy: float, dataset: str, command: str) -> None:
    """Record an evaluation's exact match in the folder's card: its `model-index` (replacing an earlier result on the
    same dataset) and, in the text, the command that measured it."""
    path = Path(folder) / CARD
    card = ModelCard.load(path) if path.is_file() else ModelCard(f"---\n{ModelCardData().to_yaml()}\n---\n")
    name = Path(dataset).name
    result = EvalResult(task_type="question-answering", task_name="birthplace question answering",
                        dataset_type="cs224n-birthplaces", dataset_name=name, metric_type="exact_match",
                        metric_name="exact match", metric_value=accuracy)
    card.data.model_name = card.data.model_name or Path(folder).name
    card.data.eval_results = [r for r in card.data.eval_results or [] if r.dataset_name != name] + [result]
    line = f"- `{name}`: exact match {100 * accuracy:.1f}%, measured with `{command}`"
    text = card.text.rstrip("\n")
    if EVALUATED not in text:
        text += f"\n\n{EVALUATED}\n"
    kept = [x for x in text.split("\n") if not x.startswith(f"- `{name}`: ")]
    card.text = _with_answering("\n".join(kept) + "\n" + line + "\n", folder)  # what was measured answered so
    atomic_write_text(path, card.content)  # the card whole, or the old one


def _card_for_repo(folder: str | os.PathLike, repo_id: str) -> None:
    """The card's example names the repository it is pushed to, and the card carries a pipeline tag."""
    path = Path(folder) / CARD
    if not path.is_file():
        return
    card = ModelCard.load(path)
    card.data.pipeline_tag = PIPELINE_TAG
    card.text = re.sub(r'pipeline\(model="[^"]*", trust_remote_code=True\)',
                       f'pipeline(model="{repo_id}", trust_remote_code=True)', card.text)
    atomic_write_text(path, card.content)


def push_folder(folder: str | os.PathLike, repo_id: str | None, private: bool | None = None) -> str:
    """Upload a model folder to `repo_id` (default: the folder's name), creating the repository if needed; the
    model's files only (`NOT_PUSHED` stay local). Returns the repository's address."""
    repo_id = repo_id or Path(folder).resolve().name
    _card_for_repo(folder, repo_id)
    api = HfApi()
    try:
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model", ignore_patterns=NOT_PUSHED,
                          commit_message=f"chargpt: upload {Path(folder).name}")
    except Exception as err:  # no token, offline, no permission: one line, the model stays saved locally
        first = str(err).splitlines()[0] if str(err) else ""
        raise UsageError(f"--push_to_hub {repo_id}: {type(err).__name__}: {first} (the model is saved in {folder})"
                         ) from None
    return str(url)


def push_run(output_dir: str, hub_model_id: str | None, private: bool | None, seeds: list[int] | None) -> list[str]:
    """`--push_to_hub`: the run's final model, or each `--seeds` member (OUTPUT_DIR/seed-S) to HUB_MODEL_ID-seed-S."""
    if seeds is None:
        return [push_folder(output_dir, hub_model_id, private)]
    base = hub_model_id or Path(output_dir).resolve().name
    return [push_folder(Path(output_dir) / f"seed-{seed}", f"{base}-seed-{seed}", private) for seed in seeds]


def push_if_asked(accelerator: Any, args: Any, result: Any, seeds: list[int] | None) -> None:
    """The training scripts' `--push_to_hub`, once the final model is saved (not after Ctrl-C), from one process."""
    if args.push_to_hub and not result.interrupted and accelerator.is_main_process:
        for url in push_run(args.output_dir, args.hub_model_id, args.hub_private_repo, seeds):
            print(f"pushed to {url}")

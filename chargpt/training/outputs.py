"""`--output_dir` checked before anything is read or written: a run that cannot save its model should fail in its
first second with one line, not after hours (or with a traceback from the TensorBoard writer)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .errors import UsageError

# What save_final writes; any of them means the folder holds a finished run's model (or a member's, seed-S/)
FINAL_MODEL_FILES = ("config.json", "model.safetensors", "train_results.json")


def _writable_ancestor(folder: Path, flag: str, given: Path) -> Path:
    """The nearest of `folder` and its parents that exists, checked to be a folder one can write in; otherwise a
    one-line `UsageError` naming `flag` and the path the user `given`."""
    existing = next(p for p in (folder, *folder.parents) if p.exists() or p == Path(p.anchor or "."))
    if not existing.is_dir():
        raise UsageError(f"{flag} {given}: not a folder" if existing == given
                         else f"{flag} {given}: cannot be created ({existing} is a file)")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise UsageError(f"{flag} {given}: cannot write in {existing} ({err.strerror})") from None
    return existing


def check_output_dir(output_dir: str, overwrite: bool = False, resuming: bool = False) -> None:
    """Refuse, in one line, an `output_dir` that is a file, lies under a file, cannot be written, or holds another
    run's final model (without `--overwrite_output_dir`, as transformers' examples do; resuming continues a run,
    so its model may be there). Creates nothing: a run that fails later on its input leaves no folder behind."""
    path = Path(output_dir)
    if _writable_ancestor(path, "--output_dir", path) != path or overwrite or resuming:
        return
    final = [p for name in FINAL_MODEL_FILES for p in (path / name, *sorted(path.glob(f"seed-*/{name}")))
             if p.is_file()]
    if final:
        raise UsageError(f"--output_dir {output_dir} holds another run's final model ({final[0]}): pass "
                         "--overwrite_output_dir True to replace it, or --resume_from_checkpoint latest to continue")


def check_output_file(path: str | None, flag: str) -> None:
    """Refuse, in one line, an output file `path` (given as `flag`) that is a folder or whose folder cannot be made
    or written in: checked before the work that produces it, not after."""
    if path is None:
        return
    if Path(path).is_dir():
        raise UsageError(f"{flag} {path}: a folder, expected a file name")
    _writable_ancestor(Path(path).parent, flag, Path(path))


def check_not_input(outputs: dict[str, str | None], inputs: dict[str, str | None], inside: bool = True) -> None:
    """Refuse, in one line and before anything runs, an output (flag -> path) that is one of the inputs (flag ->
    path: a corpus, the model folder read) or lies inside one: a predictions file written over its questions file
    would lose the gold answers, a model saved inside the folder it reads would change what it reads. With
    `inside=False` only the same path is refused (a folder of corpora may hold a run's outputs beside them)."""
    for out_flag, out in outputs.items():
        if out is None:
            continue
        target = Path(out).resolve()
        for in_flag, given in inputs.items():
            if given is None:
                continue
            source = Path(given).resolve()
            if target == source or (inside and source in target.parents):
                where = "is" if target == source else "is inside"
                raise UsageError(f"{out_flag} {out} {where} {in_flag} {given}: the output would overwrite what it "
                                 "reads; choose another path")

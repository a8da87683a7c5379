"""`--output_dir` checked before anything is read or written: a run that cannot save its model should fail in its
first second with one line, not after hours (or with a traceback from the TensorBoard writer)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .errors import UsageError

# What save_final writes; any of them means the folder holds a finished run's model (or a member's, seed-S/)
FINAL_MODEL_FILES = ("config.json", "model.safetensors", "train_results.json")


def check_output_dir(output_dir: str, overwrite: bool = False, resuming: bool = False) -> None:
    """Refuse, in one line, an `output_dir` that is a file, lies under a file, cannot be written, or holds another
    run's final model (without `--overwrite_output_dir`, as transformers' examples do; resuming continues a run,
    so its model may be there). Creates nothing: a run that fails later on its input leaves no folder behind."""
    path = Path(output_dir)
    existing = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor or "."))
    if not existing.is_dir():
        where = "" if existing == path else f" ({existing} is a file)"
        raise UsageError(f"--output_dir {output_dir}: not a folder{where}")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise UsageError(f"--output_dir {output_dir}: cannot write in {existing} ({err.strerror})") from None
    if existing != path or overwrite or resuming:
        return
    final = [p for name in FINAL_MODEL_FILES for p in (path / name, *sorted(path.glob(f"seed-*/{name}")))
             if p.is_file()]
    if final:
        raise UsageError(f"--output_dir {output_dir} holds another run's final model ({final[0]}): pass "
                         "--overwrite_output_dir True to replace it, or --resume_from_checkpoint latest to continue")

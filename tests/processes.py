"""Running the scripts as real processes, several at once: most of a tiny run's time is importing torch and
transformers on one core, so independent launches side by side take about half the time on two cores."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor


def run_concurrently(cmds: list[list[str]], **kwargs) -> list[subprocess.CompletedProcess]:
    """`subprocess.run` each command (output captured as text, the keywords apply to all), side by side, in order."""
    kwargs = {"capture_output": True, "text": True, "timeout": 300, **kwargs}
    with ThreadPoolExecutor(max_workers=len(cmds)) as pool:
        return list(pool.map(lambda cmd: subprocess.run(cmd, **kwargs), cmds))

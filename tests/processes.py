"""Running the scripts as real processes, several at once: most of a tiny run's time is importing torch and
transformers on one core, so independent launches side by side take about half the time on two cores."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor


def run_concurrently(cmds: list[list[str]], **kwargs) -> list[subprocess.CompletedProcess]:
    """`subprocess.run` each command (output captured as text, the keywords apply to all), as many at once as
    there are cores; the results in order."""
    kwargs = {"capture_output": True, "text": True, "timeout": 300, **kwargs}
    with ThreadPoolExecutor(max_workers=min(len(cmds), os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda cmd: subprocess.run(cmd, **kwargs), cmds))

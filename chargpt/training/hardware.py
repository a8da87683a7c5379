"""What a run ran on, for its record: timings are only compared on one CPU, so the name carries what sets the speed."""

from __future__ import annotations

import platform
from pathlib import Path

import torch


def cpu_name(cpuinfo: str | None = None) -> str:
    """The CPU's model name with its family, model and matrix units (from /proc/cpuinfo where there is one): a
    name alone ("AMD EPYC") spans CPUs whose speeds differ twofold."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if not key.strip():
            break  # the first processor is enough
        fields.setdefault(key.strip(), value.strip())
    if "model name" not in fields:
        return platform.machine()  # platform.processor() would start a process (uname -p)
    flags = set(fields.get("flags", "").split())
    units = ("AMX" if "amx_tile" in flags else "AVX-512 with avx512_bf16, no AMX" if "avx512_bf16" in flags
             else "AVX-512, no AMX" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags else "no AVX2")
    where = f"family {fields['cpu family']} model {fields['model']}; " if "cpu family" in fields else ""
    return f"{fields['model name']} ({where}{units})"


def hardware() -> str:
    """The CPU, the threads torch uses and its version, and the GPU where there is one."""
    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return f"{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}{gpu}"

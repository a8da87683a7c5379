"""Precision policy: which Accelerate `mixed_precision` a `--mixed_precision` value means on this hardware."""

from __future__ import annotations

import torch


def cpu_has_fast_bf16() -> bool:
    """True when this CPU has AMX bf16 tiles: bf16 matmuls ~10x faster than fp32 there (benchmarks/bench_bf16.py)."""
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(probe()) if probe is not None else False


def resolve_precision(requested: str) -> str:
    """Accelerate's `mixed_precision` for `--mixed_precision` ('auto' and 'fast' depend on the hardware)."""
    gpu_bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if requested == "auto":
        return "bf16" if gpu_bf16 else "no"
    if requested == "fast":
        return "bf16" if gpu_bf16 or (not torch.cuda.is_available() and cpu_has_fast_bf16()) else "no"
    return requested

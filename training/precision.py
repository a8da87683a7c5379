"""Precision policy: which Accelerate `mixed_precision` a `--mixed_precision` value means on this hardware, and
`--tf32`."""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers.utils import logging

logger = logging.get_logger(__name__)


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


def allow_tf32(enabled: bool, device: torch.device) -> Callable[[], None]:
    """`--tf32 True`: fp32 matmuls and convolutions on CUDA tensor cores in TF32 (10-bit mantissa products, fp32
    accumulation) until the returned function restores the previous settings. A no-op (logged) off CUDA, and
    without `enabled`: the default stays true fp32.

    Set through `torch.set_float32_matmul_precision` and `torch.backends.cudnn.allow_tf32`, not the per-backend
    `fp32_precision` attributes: in torch 2.13, setting `torch.backends.cuda.matmul.fp32_precision = "tf32"` alone
    makes `torch.backends.cuda.matmul.allow_tf32` (which inductor reads) raise about mixed APIs.
    """
    if not enabled:
        return lambda: None
    if device.type != "cuda":
        logger.info("--tf32 True has no effect on %s: TF32 is a CUDA tensor-core format; training stays fp32",
                    device.type)
        return lambda: None
    matmul, cudnn = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    logger.info("--tf32 True: fp32 matmuls and convolutions run in TF32 on %s", device)

    def restore() -> None:
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = cudnn

    return restore

"""Precision policy: which Accelerate `mixed_precision` a `--mixed_precision` value means on this hardware, and
`--tf32`."""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable

import torch
from transformers.utils import logging

logger = logging.get_logger(__name__)


# bf16 is taken without AMX only where a bf16 matmul is at least this much faster than fp32: a ratio that makes a
# training step clearly faster (the AMD EPYC VM: matmul 2.8x, a reference-size step 1.8x, the CPU frontier's steps
# 1.3-1.5x; the Intel VM with avx512_bf16 but no AMX: matmul 0.5x, step 0.7x). results/performance_cpu.json.
FAST_BF16_MATMUL_SPEEDUP = 1.5


@functools.cache
def cpu_bf16_matmul_speedup(rows: int = 4096) -> float:
    """fp32 time over bf16 time of one `rows`x256 by 256x1024 matmul on this CPU and thread count (medians of 5):
    CPUs with the same avx512_bf16 flag differ by 5x here, so the flag alone cannot tell. (Where bf16 is emulated,
    as on AVX2, the 4096 rows take about 15 s; `cpu_has_fast_bf16` never times them there.)"""
    times = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(rows, 256, dtype=dtype), torch.randn(256, 1024, dtype=dtype)
        samples = []
        for i in range(7):
            start = time.perf_counter()
            a @ b
            if i >= 2:  # two warm-up calls
                samples.append(time.perf_counter() - start)
        times[dtype] = statistics.median(samples)
    return times[torch.float32] / times[torch.bfloat16]


def cpu_has_amx() -> bool:
    """Whether this CPU has AMX bf16 tiles (torch's private probe; False on a torch without it)."""
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(probe()) if probe is not None else False


def cpu_has_fast_bf16() -> bool:
    """True where bf16 training beats fp32 on this CPU: AMX bf16 tiles (matmuls ~10x faster,
    results/performance_cpu.json), or avx512_bf16 whose matmuls measure FAST_BF16_MATMUL_SPEEDUP faster than
    fp32."""
    if cpu_has_amx():
        return True
    avx512_bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    if avx512_bf16 is None or not avx512_bf16():
        return False
    speedup = cpu_bf16_matmul_speedup()
    logger.info("bf16 matmuls run %.1fx as fast as fp32 on this CPU (no AMX): --mixed_precision fast takes %s",
                speedup, "bf16" if speedup >= FAST_BF16_MATMUL_SPEEDUP else "fp32")
    return speedup >= FAST_BF16_MATMUL_SPEEDUP


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

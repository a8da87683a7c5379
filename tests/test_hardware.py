"""The hardware a record names: the CPU's family, model and matrix units, read from the first processor's lines."""

import platform

import torch

from chargpt.training.hardware import cpu_name, hardware

FIRST = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n"


def test_cpu_name_says_what_sets_the_speed():
    zen5 = FIRST + "flags\t\t: fpu avx2 avx512f avx512_bf16\n\nprocessor\t: 1\nmodel name\t: other\n"
    assert cpu_name(zen5) == "AMD EPYC (family 26 model 2; AVX-512 with avx512_bf16, no AMX)"
    assert cpu_name(FIRST + "flags\t\t: avx2 avx512f amx_tile\n").endswith("model 2; AMX)")
    assert cpu_name(FIRST + "flags\t\t: avx2\n").endswith("(family 26 model 2; AVX2, no AVX-512)")
    assert cpu_name("") == platform.machine()  # no /proc/cpuinfo: what Python says


def test_hardware_names_the_threads_and_torch():
    assert hardware().endswith(f"{torch.get_num_threads()} threads, torch {torch.__version__}")

"""Running the scripts as real processes, several at once (most of a tiny run's time is importing torch and
transformers on one core, so independent launches side by side take about half the time on two cores), or, where
the process is not what a test checks, in the test's own process."""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

# What a make that started the tests leaves in their environment (`make test`): a `make` the tests run would take
# itself for a sub-make and print "make[1]: Entering directory" lines, which a person typing it never sees.
MAKE_VARIABLES = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")


def user_env(**extra: str) -> dict[str, str]:
    """The environment of a person's shell for a command a test runs: this one offline, one thread per process, and
    without the variables of a make that started the tests (`MAKE_VARIABLES`); `extra` on top."""
    env = {name: value for name, value in os.environ.items() if name not in MAKE_VARIABLES}
    return {**env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", **extra}


def run_concurrently(cmds: list[list[str]], **kwargs) -> list[subprocess.CompletedProcess]:
    """`subprocess.run` each command (output captured as text, the keywords apply to all), as many at once as
    there are cores; the results in order."""
    kwargs = {"capture_output": True, "text": True, "timeout": 300, **kwargs}
    with ThreadPoolExecutor(max_workers=min(len(cmds), os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda cmd: subprocess.run(cmd, **kwargs), cmds))


def run_script(path: str | os.PathLike, argv: list[str]) -> int:
    """`python path *argv` run in this process, from the repository root: the exit status the shell would see (a
    `sys.exit("message")` prints its message to stderr and gives 1, as the interpreter does); the output is left to
    capsys (capfd: with what the processes it starts print). For tests that do not check the start of an interpreter
    (importing torch and transformers: about 10 s on 2 cores): a script's bad input, or a driver whose stages are
    processes anyway; tests/test_user_errors.py keeps real processes for the shell's view of an error. The
    script sees its own folder first on sys.path, as `python path` gives it; sys.argv, sys.path, the working folder,
    torch's threads and its random state are restored afterwards (a benchmark sets both before it reads its data)."""
    script = ROOT / path
    saved_argv, saved_path, threads = sys.argv, list(sys.path), torch.get_num_threads()
    sys.argv = [str(path), *argv]  # as the shell passes it (a script may record its own command)
    sys.path.insert(0, str(script.parent))
    try:
        with contextlib.chdir(ROOT), torch.random.fork_rng():
            runpy.run_path(str(path), run_name="__main__")  # it sets sys.argv[0] to this path
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        torch.set_num_threads(threads)
    return 0


_FRESH_ASK = """
import importlib.util, json, sys
sys.path.append(sys.argv[1])
assert importlib.util.find_spec("modeling_chargpt") is None, "the package must not be importable here"
from transformers import pipeline
ask = pipeline(model=sys.argv[2], trust_remote_code=True, device="cpu")
out = ask(json.loads(sys.argv[3]), **json.loads(sys.argv[4]))
print(json.dumps({"pipeline": type(ask).__module__, "answers": out,
                  "package_imported": any(m.split(".")[0] == "modeling_chargpt" for m in sys.modules)}))
"""


def ask_without_the_package(folder: str | os.PathLike, questions: list[str], home: Path, **options) -> dict:
    """`pipeline(model=folder, trust_remote_code=True)(questions, **options)` in a fresh interpreter where this
    package cannot be imported (-I -S; site-packages added back by hand, HF_HOME under `home`): what a person without
    chargpt installed gets. Returns the answers, the pipeline's module and whether the package was imported."""
    env = {"PATH": os.environ.get("PATH", ""), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HOME": str(home / "hf"), "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", _FRESH_ASK, sysconfig.get_paths()["purelib"],
                           str(folder), json.dumps(questions), json.dumps(options)],
                          cwd=home, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def stages_in_process(monkeypatch) -> list[list[str]]:
    """The drivers' training processes (`run_experiments.run`: `env OMP_NUM_THREADS=N python SCRIPT ARGS`, each
    importing torch and transformers anew: most of a tiny stage's 5-10 s on 2 cores) run instead as the script's
    `main` in this process, with N torch threads and everything it writes appended to the stage's log, as the
    process would have written it. For tests of what a driver does with its stages; the process itself (Ctrl-C
    reaching it, its exit status, its threads) keeps real processes in tests/test_experiment_scripts.py. Returns the
    commands, in order."""
    from test_readme_commands import load

    import chargpt.training.cli
    import train_finetune
    import train_pretrain

    run_experiments = load("chargpt/recipes/reproduce.py")
    mains = {"train_pretrain.py": train_pretrain.main, "train_finetune.py": train_finetune.main}
    launched: list[list[str]] = []

    def run_here(cmd, *, stdout, **popen) -> tuple[int, bool]:
        cmd = [str(arg) for arg in cmd]
        launched.append(cmd)
        assert cmd[0] == "env" and cmd[1].startswith("OMP_NUM_THREADS=") and cmd[2] == sys.executable, cmd
        assert Path(cmd[3]).parent == ROOT and Path(cmd[3]).name in mains, cmd
        threads, environ = torch.get_num_threads(), dict(os.environ)
        torch.set_num_threads(int(cmd[1].split("=", 1)[1]))
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "stage.log"
            try:
                with contextlib.chdir(popen.get("cwd", ROOT)), torch.random.fork_rng():
                    status = chargpt.training.cli.run_logged(mains[Path(cmd[3]).name], cmd[4:], log)
            finally:
                torch.set_num_threads(threads)
                os.environ.clear()
                os.environ.update(environ)
                stdout.write(log.read_text(encoding="utf-8") if log.exists() else "")
                stdout.flush()
        return status, status == 130

    # a driver run fresh by run_script imports this one
    monkeypatch.setattr(chargpt.training.cli, "run_to_end", run_here)
    monkeypatch.setattr(run_experiments, "run_to_end", run_here)  # the module the other drivers import
    return launched

"""One run on a GPU machine, planned ahead: it has minutes, so what it runs and when it stops are decided here.

    python experiments/gpu_session.py prepare            # here, once: the data and the wheels the device lacks, .gpu/
    python experiments/gpu_session.py reproduce --bench  # on the device, .gpu/ beside it: a benchmark, then reproduce
    python experiments/gpu_session.py best               # `make best RECIPE=best` for each seed of --seeds, all at once
    python experiments/gpu_session.py commands [MODE]    # the Python commands a mode runs (the tests parse them)

`reproduce` is `make reproduce SEEDS=0,1,2 SYNTH=1` on the fast path with the three-seed flags that
experiments/benchmarks/choose_fast_flags.py finds fastest (in this call's benchmark with --bench, else --choose_from)
unless --repro_pretrain is given, even empty -> reproduce_results.json and .md (rewritten after every row, so what
finished comes back), reproduce_outputs.tar.gz. `best` runs chargpt.recipes.recite --recipe best for each seed in a
process group of its own; a pretrained model comes back once saved (pretrained-seedS.tar: `tar xf` it under
out/DIR/pretrain, then `make best RECIPE=best ... RECITE_OUT=out/DIR RESUME=1`). At --budget, or on Ctrl-C or
SIGTERM, each group gets SIGINT: a pretraining still running saves a checkpoint, sent in 15 MB parts (`cat` them into
`tar xz` under its checkpoints/; RESUME=1 goes on from it). All output also goes to OUT/session.log; nothing starts
past the budget.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from string import ascii_lowercase
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
CHOOSER = "choose_fast_flags.py"  # in experiments/benchmarks: the lab is no package, so it is loaded from its file
PY = sys.executable
MINE = ("out", "work", "budget")  # each mode's own defaults, below (the budget in seconds)
MODES = {"reproduce": ("out/gpu-session", "out/gpu-session-work", 530),
         "best": ("out/gpu-best", "out/gpu-best-work", 520)}
OPTIONS = {  # flags and their defaults (None: not given; --out, --work and --budget then take the mode's, above)
    "common": {"data": ".gpu/data", "out": None, "work": None, "budget": None},
    "reproduce": {"choose_from": ".gpu/bench_gpu.json", "repro_pretrain": None, "repro_args": "",  # split on spaces
                  "full_extra": "--checkpointing_steps 0", "bench_steps": 300, "bench_warmup": 50, "bench_timeout": 150,
                  "bench_variants": "today,fast,fast_compiled_all,fast_compiled_all_stacked3", "bench_extra": ""},
    "best": {"seeds": "0,1,2", "variant": "rope", "epochs": None, "threads": 4, "recipe_extra": "",  # split on spaces
             # about 100 faithful steps a second on an H100 and an H200; --device_data True too: the fast path adds it
             # on a GPU, but the recipe checks its flags before that, and compiled batches need it
             "speed": "--device_data True --torch_compile True --torch_compile_mode reduce-overhead "
                      "--optim adamw_torch_fused --torch_compile_batches True"},
}
WHEELS = ["datasets==5.2.0", "evaluate==0.4.6", "dill==0.4.1", "multiprocess==0.70.19"]  # what the device lacks
KEPT = (".json", ".jsonl", ".predictions", ".log", ".png", ".md", ".tsv")  # results, records, logs: never a model
PART = 15 * 1024 * 1024  # `split -b 15M`: each part small enough to come back
# The project's own imports (the packages import lazily: what a run loads is loaded) and the versions; a test runs it.
ENV_CHECK = """\
import importlib.metadata as md, sys, torch
import data_scripts.loading, chargpt.evaluation.predict, chargpt.training.loop
cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else "NO CUDA DEVICE"
found = ", ".join(f"{p} {md.version(p)}" for p in ("transformers", "accelerate", "datasets", "evaluate"))
print("python", sys.version.split()[0], "| torch", torch.__version__, "cuda", torch.version.cuda, "|", cuda, "|", found)
"""


def repro_flags(o: argparse.Namespace, bench: Path) -> tuple[str, str, list[str]]:
    """The seeds' --pretrain_extra and more reproduce flags: given ones win, else what `bench` found fastest."""
    if o.repro_pretrain is not None or not bench.is_file():
        return o.repro_pretrain or "", o.repro_args, []
    if str(ROOT) not in sys.path:  # the product it imports, where this runs as a script
        sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location("choose_fast_flags", ROOT / "experiments/benchmarks" / CHOOSER)
    chooser = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chooser)
    try:
        choice = chooser.choose(json.loads(bench.read_text(encoding="utf-8")))
    except (ValueError, KeyError, AttributeError) as err:
        return "", o.repro_args, [f"no flags chosen from {bench}: {err}"]
    row, reasons = choice["seeds"], chooser.describe(choice, 3)
    if row is None:
        return "", o.repro_args, reasons
    stacked = ("--stack_seeds", "True") in chooser.flag_pairs(row["flags"])
    return chooser.run_flags(row), f"{o.repro_args} --stack_seeds".strip() if stacked else o.repro_args, reasons


def bench_cmd(o: argparse.Namespace) -> list[str]:
    return [PY, "experiments/benchmarks/bench_gpu.py", "--data_dir", o.data, "--steps", str(o.bench_steps),
            "--warmup_steps", str(o.bench_warmup), "--variants", o.bench_variants, "--extra", o.bench_extra,
            "--out", f"{o.out}/bench_gpu.json"]


def reproduce_cmd(o: argparse.Namespace, pretrain: str, args: str) -> list[str]:
    """Rope first: a call cut by its budget keeps the handout's headline variant."""
    return [PY, "-m", "chargpt.recipes.reproduce", "--data_dir", o.data, "--out_dir", f"{o.work}/reproduce", "--recipe",
            "reference", "--variants", "rope,learned", "--synthesizer", "--seeds", "0,1,2", "--fast_path", "on",
            "--extra", o.full_extra, "--pretrain_extra", pretrain, *args.split()]


def best_cmd(o: argparse.Namespace, seed: str) -> list[str]:
    """Without --epochs the recipe's own (rope 50, learned positions 100)."""
    return [PY, "-m", "chargpt.recipes.recite", "--data_dir", o.data, "--out_dir", f"{o.work}/seed{seed}", "--recipe",
            "best", "--variant", o.variant, "--seeds", seed, *(["--pretrain_epochs", o.epochs] if o.epochs else []),
            "--threads", str(o.threads), *o.recipe_extra.split(), *(["--pretrain_extra", o.speed] if o.speed else [])]


def archive(out: Path, base: Path, folders: list[str]) -> None:
    """What is worth keeping under base/folders (results, logs, predictions), never a model's folder."""
    with tarfile.open(out, "w:gz") as tar:
        for folder in folders:
            for top, dirs, files in os.walk(base / folder):
                dirs[:] = sorted(d for d in dirs if not d.endswith(("-finetune", "-pretrain")))
                for name in sorted(n for n in files if n.endswith(KEPT)):
                    tar.add(Path(top, name), os.path.join(folder, os.path.relpath(Path(top, name), base / folder)))


def latest_checkpoint(run: Path) -> Path | None:
    """A run's last checkpoints/step-N, by N (step-9 comes before step-12)."""
    steps = [p for p in (run / "checkpoints").glob("step-*") if p.name[5:].isdigit()]
    return max(steps, key=lambda p: int(p.name[5:]), default=None)


def send_in_parts(folder: Path, name: Path) -> list[Path]:
    """folder as a tar.gz in parts name.part-aa, -ab, ... of PART bytes, as `split` names them: `cat` joins them."""
    whole, parts = name.with_name(f".{name.name}"), []
    with tarfile.open(whole, "w:gz", compresslevel=6) as tar:
        tar.add(folder, folder.name)
    with whole.open("rb") as f:
        for k, chunk in enumerate(iter(lambda: f.read(PART), b"")):
            parts.append(name.with_name(f"{name.name}.part-{ascii_lowercase[k // 26]}{ascii_lowercase[k % 26]}"))
            parts[-1].write_bytes(chunk)
    whole.unlink()
    return parts


def running(proc: subprocess.Popen) -> bool:
    """Whether anything of the child's process group is there: a training process may outlive its driver."""
    try:
        return proc.poll() is None or os.killpg(proc.pid, 0) is None
    except ProcessLookupError:
        return False


def default_sigint() -> None:
    """In a child before exec: an ignored SIGINT (a background shell's) would be inherited, and a run could not be
    stopped with its checkpoint saved."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Call:
    """One run on the GPU machine: its log (stdout and OUT/session.log), its clock and budget, its children, a stop
    asked for."""

    def __init__(self, o: argparse.Namespace) -> None:
        self.o, self.start, self.stop, self.lock = o, time.monotonic(), "", threading.Lock()
        for folder in (o.out, o.work):
            Path(folder).mkdir(parents=True, exist_ok=True)
        self.log = open(Path(o.out, "session.log"), "a", encoding="utf-8")  # for the whole call
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": os.getcwd()}
        # a stop asked for ends the waiting as the budget does (the children, in groups of their own, get it below)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: setattr(self, "stop", self.stop or "stopped by a signal"))

    def elapsed(self) -> int:
        return int(time.monotonic() - self.start)

    def say(self, *lines: str) -> None:
        with self.lock:
            for line in lines:
                print(line, flush=True)
                self.log.write(line + "\n")
            self.log.flush()

    def fail(self, why: str) -> bool:
        self.say(why)
        return False

    def stage(self, what: str) -> None:
        self.say("", f"=== [{time.strftime('%H:%M:%S', time.gmtime())}, {self.elapsed()}s] {what}")

    def launch(self, cmd: list[str], out: IO | int) -> subprocess.Popen:
        """A child in a process group of its own: SIGINT below reaches it whole, a terminal's Ctrl-C does not."""
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                start_new_session=True, preexec_fn=default_sigint)

    def halt(self, procs: list[subprocess.Popen], why: str) -> None:
        """SIGINT to every group (a pretraining saves a checkpoint), then up to 30 s for them to end."""
        self.stage(f"{why}: SIGINT to every process group")
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while any(map(running, procs)) and time.monotonic() < deadline:
            time.sleep(0.5)

    def run(self, cmd: list[str], limit: float | None = None) -> int:
        """cmd, its output in the log line by line, stopped at `limit` seconds or at a stop: its exit status."""
        proc = self.launch(cmd, subprocess.PIPE)
        reader = threading.Thread(target=lambda: [self.say(b.decode(errors="replace").rstrip()) for b in proc.stdout],
                                  daemon=True)
        reader.start()
        deadline = time.monotonic() + (float("inf") if limit is None else limit)
        while proc.poll() is None and not self.stop and time.monotonic() < deadline:
            time.sleep(0.2)
        if proc.poll() is None:
            self.halt([proc], self.stop or f"the {limit:.0f}s it was given are up")
            if running(proc):
                os.killpg(proc.pid, signal.SIGKILL)
        reader.join(timeout=30)  # a process it started in a session of its own may hold the pipe open
        return proc.wait()

    def environment(self) -> bool:
        """The wheels of .gpu/whl installed (the children find them first), the imports loaded, the data there."""
        self.stage("environment")
        wheels = [str(p) for p in sorted(Path(".gpu/whl").glob("*.whl"))]
        if wheels and not self.o.no_wheels:
            if self.run([PY, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
                         "--upgrade", "--target", "/tmp/site", *wheels]):
                return self.fail("wheel install failed")
            self.env["PYTHONPATH"] = f"/tmp/site:{os.getcwd()}"
        else:
            self.say("no wheels in .gpu/whl (gpu_session.py prepare makes them), or --no_wheels: what is installed")
        if shutil.which("nvidia-smi"):
            self.run(["nvidia-smi", "-L"])
        if self.run([PY, "-c", ENV_CHECK]):
            return self.fail("the project does not import here: stopping")
        return Path(self.o.data, "wiki.txt").is_file() or self.fail(f"no {self.o.data}/wiki.txt (prepare copies it)")

    def done(self) -> int:
        self.say(*(f"{p.stat().st_size:>12} {p.name}" for p in sorted(Path(self.o.out).iterdir()) if p.is_file()))
        self.say(f"done in {self.elapsed()}s")
        return 0


def reproduce(c: Call) -> int:
    o, work, out, bench = c.o, Path(c.o.work), Path(c.o.out), Path(c.o.choose_from)
    if not c.environment():
        return 1
    if o.bench:
        c.stage(f"benchmark: {shlex.join(bench_cmd(o))}")
        if status := c.run(bench_cmd(o), min(o.bench_timeout, o.budget - c.elapsed())):
            c.say(f"the benchmark ended with status {status} (its finished variants are in bench_gpu.json)")
        bench = out / "bench_gpu.json"
    pretrain, args, reasons = repro_flags(o, bench)
    c.stage(f"flags chosen from {bench}" if reasons else "flags: given, or no benchmark to choose from")
    c.say(*reasons)
    cmd, left = reproduce_cmd(o, pretrain, args), o.budget - c.elapsed()
    if c.stop or left <= 0:
        c.stage(f"reproduce skipped: {c.stop or 'no time left'}")
    else:
        c.stage(f"make reproduce SEEDS=0,1,2 SYNTH=1 on the fast path ({left}s left): {shlex.join(cmd)}")
        if status := c.run(cmd, left):
            c.say(f"the run ended with status {status} (the finished rows are kept)")
    c.stage("collect")
    for name in ("results.json", "results.md"):
        if (work / "reproduce" / name).is_file():
            shutil.copy(work / "reproduce" / name, out / f"reproduce_{name}")
    archive(out / "reproduce_outputs.tar.gz", work, ["reproduce"])
    return c.done()


def best(c: Call) -> int:
    o, work, out, seeds = c.o, Path(c.o.work), Path(c.o.out), c.o.seeds.split(",")
    pretrained = {s: work / f"seed{s}" / "pretrain" / f"{o.variant}-causal-seed{s}-pretrain" for s in seeds}

    def send_model(seed: str) -> None:
        """The seed's model once saved, without its checkpoints and events; a tar cut short has another name."""
        folder, sent = pretrained[seed], out / f"pretrained-seed{seed}.tar"
        if sent.exists() or not all((folder / f).is_file() for f in ("model.safetensors", "train_results.json")):
            return
        left_out = {f"{folder.name}/checkpoints", f"{folder.name}/runs"}
        with tarfile.open(out / f".{sent.name}", "w") as tar:
            tar.add(folder, folder.name, filter=lambda m: None if "/".join(m.name.split("/")[:2]) in left_out else m)
        os.replace(out / f".{sent.name}", sent)
        r = json.loads((folder / "train_results.json").read_text())
        facts = {k: r.get(k) for k in ("global_step", "final_loss", "train_seconds")}
        c.stage(f"seed {seed} pretrained: {facts}")

    if not c.environment():
        return 1
    procs = []
    for seed in seeds:
        (work / f"seed{seed}").mkdir(parents=True, exist_ok=True)
        with open(work / f"seed{seed}.log", "w") as log:
            procs.append(c.launch(best_cmd(o, seed), log))
        c.stage(f"seed {seed}: process group {procs[-1].pid}: {shlex.join(best_cmd(o, seed))}")
    last = 0
    while True:
        time.sleep(5)  # first: a run is never signalled before it has started
        alive = any(p.poll() is None for p in procs)
        for seed in seeds:
            send_model(seed)
        c.stop = c.stop or (f"budget of {o.budget}s reached" if c.elapsed() >= o.budget else "")
        if not alive or c.stop:
            break
        if c.elapsed() - last >= 60:
            last = c.elapsed()
            for seed in seeds:
                tail = (work / f"seed{seed}.log").read_bytes()[-300:].decode(errors="replace")
                ckpt = getattr(latest_checkpoint(pretrained[seed]), "name", "")
                c.say(f"[{last}s] seed {seed}: last checkpoint {ckpt} | {' '.join(tail.split())[-120:]}")
    if alive:
        c.halt(procs, c.stop)
    c.stage("collect")
    for seed in seeds:
        send_model(seed)
        ckpt = latest_checkpoint(pretrained[seed])
        if ckpt and not (out / f"pretrained-seed{seed}.tar").exists():
            send_in_parts(ckpt, out / f"pretrain-checkpoint-seed{seed}.tar.gz")
            c.stage(f"seed {seed}: no final model; its {ckpt} in parts")
    archive(out / "gpu_best_outputs.tar.gz", work, ["."])
    if pretrained[seeds[0]].with_suffix(".log").is_file():
        shutil.copy(pretrained[seeds[0]].with_suffix(".log"), out / "pretrain_first_seed.log")
    return c.done()


def prepare(o: argparse.Namespace) -> int:
    """The data (which does not travel) and the wheels the device lacks, into .gpu/, which git ignores."""
    Path(".gpu/data").mkdir(parents=True, exist_ok=True)
    for name in ("wiki.txt", "birth_places_train.tsv", "birth_dev.tsv", "birth_test_inputs.tsv"):
        shutil.copyfile(Path(o.data_src, name), Path(".gpu/data", name))
        Path(".gpu/data", name).chmod(0o644)
    git = subprocess.run(["git", "rev-parse", "--git-path", "info/exclude"], capture_output=True, text=True, check=True)
    exclude = Path(git.stdout.strip())
    if "/.gpu/" not in (exclude.read_text().splitlines() if exclude.is_file() else []):
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a") as f:
            f.write("/.gpu/\n")
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    subprocess.run([PY, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "cp", *(f"--platform={p}" for p in platforms), "-d", ".gpu/whl", *WHEELS],
                   check=True)
    print(*sorted(Path(".gpu").glob("*/*")), sep="\n")
    print("ready: on the device, with .gpu/ beside it: python experiments/gpu_session.py reproduce --bench, or best")
    return 0


def with_mode(o: argparse.Namespace, mode: str) -> argparse.Namespace:
    """--out, --work and --budget: given, or the mode's own."""
    mine = {k: v if getattr(o, k) is None else getattr(o, k) for k, v in zip(MINE, MODES[mode], strict=True)}
    return argparse.Namespace(**{**vars(o), **mine})


def commands(o: argparse.Namespace) -> int:
    """The commands `o.mode` runs (without one: the benchmark's, reproduce's and best's), one per line."""
    for mode in [o.mode] if o.mode else list(MODES):
        m = with_mode(o, mode)
        if mode == "best":
            print(*(shlex.join(best_cmd(m, seed)) for seed in m.seeds.split(",")), sep="\n")
            continue
        pretrain, args, reasons = repro_flags(m, Path(m.choose_from))
        print(*reasons, sep="\n", file=sys.stderr)
        if m.bench or not o.mode:
            print(shlex.join(bench_cmd(m)))
        print(shlex.join(reproduce_cmd(m, pretrain, args)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    groups = {group: argparse.ArgumentParser(add_help=False) for group in OPTIONS}
    for group, options in OPTIONS.items():
        for name, default in options.items():
            kind = int if isinstance(default, int) or name == "budget" else str
            mine = ", ".join(f"{mode} {d[MINE.index(name)]}" for mode, d in MODES.items()) if name in MINE else ""
            helped = f"default: {mine or repr(default)}"
            groups[group].add_argument(f"--{name}", type=kind, default=default, help=helped)
    groups["common"].add_argument("--no_wheels", action="store_true", help="what is installed, not .gpu/whl")
    groups["reproduce"].add_argument("--bench", action="store_true", help="the shorter benchmark first")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare").add_argument("--data_src", default="../shared/data")
    for mode in MODES:
        sub.add_parser(mode, parents=[groups["common"], groups[mode]], allow_abbrev=False)
    sub.add_parser("commands", parents=list(groups.values()), allow_abbrev=False).add_argument(
        "mode", nargs="?", choices=list(MODES))
    return parser


def main(argv: list[str] | None = None) -> int:
    o = build_parser().parse_args(argv)
    if o.command in ("prepare", "commands"):
        return prepare(o) if o.command == "prepare" else commands(o)
    return (reproduce if o.command == "reproduce" else best)(Call(with_mode(o, o.command)))


if __name__ == "__main__":
    sys.exit(main())

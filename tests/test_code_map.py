"""docs/code.md names files and what they define (`file.py:name`, `file.py:Class.method`): each must still exist,
so the map a newcomer reads first cannot drift from the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "code.md"
REFERENCE = re.compile(r"`([\w/]+\.py)(?::([\w.]+))?`")


def defined_names(path: Path) -> set[str]:
    """The top-level functions and classes of a module, and each class's methods as `Class.method`."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {f"{node.name}.{item.name}" for item in node.body
                      if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)}
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def references(text: str) -> list[tuple[str, str]]:
    """The project files a page cites, each with the name it cites in it ("" for none); the reference's own files
    (`src/...`) are not this project's."""
    return [(file, name) for file, name in REFERENCE.findall(text) if not file.startswith("src/")]


def test_the_matcher_finds_files_and_names_and_skips_the_references_files():
    found = references("`src/model.py`: `GPT` is `modeling_chargpt/modeling_chargpt.py:CharGPTForCausalLM`; "
                       "`chargpt/evaluation/abstention.py` and `a.py:B.c`")
    assert found == [("modeling_chargpt/modeling_chargpt.py", "CharGPTForCausalLM"),
                     ("chargpt/evaluation/abstention.py", ""), ("a.py", "B.c")]


def test_every_file_and_name_the_code_map_cites_exists():
    cited = references(PAGE.read_text())
    assert len(cited) >= 40, "the map cites the code as file.py:name; a reformat must keep this test biting"
    missing = []
    for file, name in cited:
        path = ROOT / file
        if not path.is_file():
            missing.append(file)
        elif name and name not in defined_names(path):
            missing.append(f"{file}:{name}")
    assert not missing, f"docs/code.md cites what the code no longer has: {sorted(set(missing))}"


def test_a_renamed_function_would_be_caught(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("X = 1\nclass A:\n    def b(self): ...\ndef f(): ...\n")
    assert defined_names(module) == {"X", "A", "A.b", "f"}


def test_the_training_loop_reads_in_one_screen():
    """minGPT's trainer is a loop read in one screen: `train()` stays at most 80 lines; what a run may or may not use
    (the fast path's batches, seeds, phases, snapshots) lives in small helpers, not in branches of the loop."""
    tree = ast.parse((ROOT / "chargpt" / "training" / "loop.py").read_text(encoding="utf-8"))
    train = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "train")
    assert train.end_lineno - train.lineno + 1 <= 80


def test_the_loop_knows_the_speed_paths_only_as_a_batch_source():
    """On-device batches, several seeds in one process and their stacked model sit behind the `BatchSource` the
    loop trains from (chargpt/training/fast_path.py): loop.py imports none of them and names none of their classes or
    flags."""
    source = (ROOT / "chargpt" / "training" / "loop.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"fast_path", "stacking", "data_scripts", "data_scripts.device_batches"}
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not names & {"DeviceBatches", "SeedBatches", "SeedStack", "SeedEnsemble", "OnDeviceBatches", "stack_seeds",
                        "device_data", "compiled_steps"}

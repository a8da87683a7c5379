"""Questions about people a corpus never mentions, to see what a model says when it cannot know.

Made with no use of dev: from the training questions' names only, and checked against the whole corpus (a name
that occurs anywhere in wiki.txt is not unknown, and is left out).

- ``recombined``: a first name and a surname of two different training people ("Ann" of one, "Mouradian" of
  another): every part is familiar, the person is not;
- ``invented``: the shape of a training name with every letter drawn anew from the letters of the training names
  (same case, same length; spaces, hyphens and apostrophes kept), so only the alphabet is familiar;
- ``other_world``: for a synthetic corpus, the people of another world seed (`data_scripts.synthetic`).

CLI: ``python -m data_scripts.unknown_people --wiki wiki.txt --train birth_places_train.tsv --out unknown.tsv
[--n 400] [--seed 0] [--kinds recombined,invented | --kinds other_world --world_seed 1]``: one bare question
``Where was NAME born?`` per line, the form of birth_test_inputs.tsv. Two seeds give two disjoint sets, one to fit
a calibration on and one to measure it (`chargpt.evaluation.calibrate`, `chargpt.evaluation.known_unknown`).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["KINDS", "invented_names", "other_world_names", "recombined_names", "unknown_questions"]

KINDS = ("recombined", "invented", "other_world")
_QUESTION = re.compile(r"Where was (.+) born\?")


def recombined_names(names: Sequence[str], corpus: str, n: int, seed: int = 0, avoid: Iterable[str] = ()) -> list[str]:
    """`n` names "FIRST LAST" (first word of one name, last word of another) that occur nowhere in `corpus`."""
    parts = [name.split() for name in names if len(name.split()) >= 2]
    if len(parts) < 2:
        raise ValueError("recombined names need at least two names of two words or more")
    rng = random.Random(f"chargpt-unknown-recombined:{seed}")
    return _draw(lambda: f"{rng.choice(parts)[0]} {rng.choice(parts)[-1]}", corpus, n, avoid)


def invented_names(names: Sequence[str], corpus: str, n: int, seed: int = 0, avoid: Iterable[str] = ()) -> list[str]:
    """`n` names of the shape of a training name, each letter drawn from the names' letters of the same case."""
    if not names:
        raise ValueError("invented names need some names to take their shapes and letters from")
    letters = Counter(c for name in names for c in name if c.isalpha())
    upper = [c for c in letters if c.isupper()] or ["A"]
    lower = [c for c in letters if not c.isupper()] or ["a"]
    rng = random.Random(f"chargpt-unknown-invented:{seed}")

    def one() -> str:
        shape = rng.choice(names)
        return "".join(rng.choices(upper, [letters[u] for u in upper])[0] if c.isupper() else
                       rng.choices(lower, [letters[x] for x in lower])[0] if c.isalpha() else c for c in shape)

    return _draw(one, corpus, n, avoid)


def other_world_names(world_seed: int, corpus: str, n: int, avoid: Iterable[str] = ()) -> list[str]:
    """The first `n` people of the synthetic world `world_seed` that `corpus` never mentions (`world_seed` must
    differ from the corpus's own)."""
    from .synthetic import DEFAULTS, generate_synthetic_world

    avoid = set(avoid)
    people = generate_synthetic_world(**{**DEFAULTS, "n_people": max(DEFAULTS["n_people"], 2 * n)}, seed=world_seed)
    names = [name for name, _, _ in people.people if name not in corpus and name not in avoid][:n]
    if len(names) < n:
        raise ValueError(f"world seed {world_seed}: only {len(names)} of its people are not in the corpus; is it the "
                         "corpus's own seed?")
    return names


def _draw(make, corpus: str, n: int, avoid: Iterable[str]) -> list[str]:
    """`n` distinct names from `make()` that are neither in `corpus` nor in `avoid`; gives up after many tries."""
    seen, out = set(avoid), []
    for _ in range(200 * n + 1000):
        if len(out) == n:
            return out
        name = make()
        if name not in seen and name not in corpus:
            seen.add(name)
            out.append(name)
    if len(out) < n:
        raise ValueError(f"found only {len(out)} of {n} names that the corpus does not mention")
    return out


def unknown_questions(train_questions: Sequence[str], corpus: str, n: int, seed: int = 0,
                      kinds: Sequence[str] = ("recombined", "invented"), world_seed: int | None = None,
                      avoid: Iterable[str] = ()) -> list[str]:
    """`n` questions ``Where was NAME born?``, split evenly between `kinds`, about people `corpus` never mentions.
    The names of `train_questions` (``Where was NAME born?``) are the material; dev is never read."""
    bad = sorted(set(kinds) - set(KINDS))
    if bad or not kinds:
        raise ValueError(f"kind {bad[0] if bad else None!r} is not one of {list(KINDS)}")
    if "other_world" in kinds and world_seed is None:
        raise ValueError("other_world needs a world seed")
    names = [m[1] for m in map(_QUESTION.fullmatch, train_questions) if m]
    picked: list[str] = []
    for k, kind in enumerate(kinds):
        count = n // len(kinds) + (k < n % len(kinds))
        taken = set(avoid) | set(picked)
        if kind == "recombined":
            picked += recombined_names(names, corpus, count, seed, taken)
        elif kind == "invented":
            picked += invented_names(names, corpus, count, seed, taken)
        else:
            picked += other_world_names(world_seed, corpus, count, taken)
    return [f"Where was {name} born?" for name in picked]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_scripts.unknown_people", description=__doc__.split("\n")[0])
    parser.add_argument("--wiki", required=True, help="the corpus the model read (wiki.txt): no name of it is used")
    parser.add_argument("--train", required=True, help="the training questions: their names are the material")
    parser.add_argument("--out", required=True, help="where the questions go, one per line")
    parser.add_argument("--n", type=int, default=400, help="how many questions (default 400)")
    parser.add_argument("--seed", type=int, default=0, help="another seed, another set of people")
    parser.add_argument("--kinds", default="recombined,invented", help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--world_seed", type=int, help="other_world: the synthetic world the people come from")
    parser.add_argument("--avoid", help="a questions file whose people must not be drawn again (another set)")
    args = parser.parse_args(argv)
    from .textfiles import DataFileError, read_text_file

    out = Path(args.out).resolve()
    for flag, given in (("--wiki", args.wiki), ("--train", args.train), ("--avoid", args.avoid)):
        if given and Path(given).resolve() == out:
            parser.error(f"--out {args.out} is the {flag} file: it would be overwritten")
    if args.n < 1:
        parser.error(f"--n {args.n}: at least 1")
    try:
        corpus = read_text_file(args.wiki)
        train = [line.split("\t")[0] for line in read_text_file(args.train).splitlines() if line.strip()]
        avoid = [m[1] for line in read_text_file(args.avoid).splitlines()
                 if (m := _QUESTION.fullmatch(line.split("\t")[0]))] if args.avoid else []
        questions = unknown_questions(train, corpus, args.n, args.seed, args.kinds.split(","), args.world_seed, avoid)
    except (DataFileError, ValueError) as err:
        parser.error(str(err))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("".join(q + "\n" for q in questions), encoding="utf-8")
    tmp.replace(out)
    print(f"wrote {args.out} ({len(questions)} questions about people {args.wiki} never mentions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

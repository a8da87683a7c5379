"""A small invented world in the layout of the real data, the embedded default corpus.

``write_synthetic_corpus(out_dir, ...)`` writes, deterministically for a seed:

- ``wiki.txt``: one line per invented person, ``Name. <one biography sentence>``, from varied templates; the
  birthplace always appears in the sentence (some templates also name a second, distracting place);
- ``birth_places_train.tsv``: ``Where was Name born?<TAB>Place`` for the first ``n_train`` people;
- ``birth_dev.tsv``: the next ``n_dev`` people, who appear in wiki.txt and never in the finetuning file;
- ``birth_test_inputs.tsv``: the questions for the next ``n_test`` people (no answers);
- people beyond ``n_train + n_dev + n_test`` appear only in wiki.txt.

As in the real files, wiki.txt lists the train people first, then dev, then test. Names and places are built
from invented syllables; places follow a mildly skewed (Zipf 0.1) distribution whose most likely place is
"London" (about 6% of people with the default 20 places), so the reference's London baseline and guessing the
most common place score only a few percent, while a model that memorised wiki.txt in pretraining can do better.

The default size (300 people, 20 places) is calibrated for a 2-layer, 128-dim model on 2 CPU threads: with
200 pretraining epochs (batch 32, lr 2e-3, dropout 0.1; about 2 minutes with packing) and 10-20 finetuning
epochs (lr 1e-3), dev exact match measured 4-15% over world seeds, against 0% when finetuning from scratch.
With 600 people and 60 pretraining epochs no effect showed; fewer places (20 rather than 40) helped most.
Every character of the TSVs occurs in wiki.txt (the tokenizer is built from it); this is checked on write.

CLI: ``python -m data_scripts.synthetic --out_dir DIR [--n_people N] [--n_train N] [--n_dev N] [--n_test N]
[--n_places N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

__all__ = ["SyntheticWorld", "generate_synthetic_world", "write_synthetic_corpus"]

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kl", "st", "th", "sh"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
_CODAS = ["", "", "", "n", "r", "l", "s", "m", "x"]
_PLACE_SUFFIXES = ["ton", "ford", "burg", "mouth", "ia", "vale", "wick", "stad", "port", "holm"]
_JOBS = [
    "painter", "farmer", "poet", "sailor", "baker", "weaver", "doctor", "judge", "singer", "teacher",
    "miner", "architect", "historian", "chemist", "novelist", "composer", "soldier", "merchant",
]
# {name} full name, {first}/{last} its parts, {place} the birthplace, {other} another place, {job}, {year}s.
_TEMPLATES = [
    "Who was {name}? The {job} was born in {place} .",  # index 0: carries the question's 'W', 'h', '?'
    "{name} is a {job} born in {place} .",
    "Born in {place}, {first} became a {job} .",
    "{name} ({year} {place} - {year2}) was a {job} .",
    "{name} was a {job} from {place} who worked in {other} .",
    "{first} {last} was born in {place} and later moved to {other} .",
    "The {job} {name} was born in {year} in {place} .",
    "{last} grew up in {place}, where {first} trained as a {job} .",
    "After leaving {place} in {year}, {name} worked as a {job} in {other} .",
]
QUESTION = "Where was {name} born?"
PLACE_ZIPF_EXPONENT = 0.1  # birthplace frequencies ~ 1 / rank**exponent; "London" is rank 1


class SyntheticWorld:
    """The generated people: ``people`` is a list of ``(name, birthplace, wiki_line)`` in wiki.txt order."""

    def __init__(self, people: list[tuple[str, str, str]], n_train: int, n_dev: int, n_test: int) -> None:
        self.people = people
        self.n_train, self.n_dev, self.n_test = n_train, n_dev, n_test

    @property
    def train(self) -> list[tuple[str, str, str]]:
        return self.people[: self.n_train]

    @property
    def dev(self) -> list[tuple[str, str, str]]:
        return self.people[self.n_train : self.n_train + self.n_dev]

    @property
    def test(self) -> list[tuple[str, str, str]]:
        return self.people[self.n_train + self.n_dev : self.n_train + self.n_dev + self.n_test]

    def files(self) -> dict[str, str]:
        """File name -> content, in the real data's layout (every file ends with a newline)."""

        def tsv(rows, with_answer=True):
            return "".join(
                QUESTION.format(name=name) + (f"\t{place}" if with_answer else "") + "\n" for name, place, _ in rows
            )

        return {
            "wiki.txt": "".join(line + "\n" for _, _, line in self.people),
            "birth_places_train.tsv": tsv(self.train),
            "birth_dev.tsv": tsv(self.dev),
            "birth_test_inputs.tsv": tsv(self.test, with_answer=False),
        }


def _word(rng: random.Random, n_syllables: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(n_syllables))


def generate_synthetic_world(
    n_people: int = 300, n_train: int = 150, n_dev: int = 75, n_test: int = 75, seed: int = 0, n_places: int = 20
) -> SyntheticWorld:
    """Invent the world (see the module docstring); pure function of its arguments."""
    for name, value in (("n_people", n_people), ("n_train", n_train), ("n_dev", n_dev), ("n_test", n_test),
                        ("n_places", n_places)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}={value!r} must be a non-negative integer")
    if n_people < 1 or n_places < 2:
        raise ValueError(f"need n_people >= 1 and n_places >= 2, got n_people={n_people}, n_places={n_places}")
    if n_train + n_dev + n_test > n_people:
        raise ValueError(
            f"n_train + n_dev + n_test = {n_train + n_dev + n_test} is more than n_people={n_people}"
        )
    rng = random.Random(f"chargpt-synthetic:{seed}")

    places: list[str] = ["London"]  # the most likely birthplace, so the reference's London baseline means something
    seen: set[str] = {"London"}
    while len(places) < n_places:
        place = (_word(rng, rng.randint(1, 2)) + rng.choice(_PLACE_SUFFIXES)).capitalize()
        if place not in seen:
            seen.add(place)
            places.append(place)
    weights = [1.0 / (rank + 1) ** PLACE_ZIPF_EXPONENT for rank in range(n_places)]

    people: list[tuple[str, str, str]] = []
    names: set[str] = set()
    while len(people) < n_people:
        first = _word(rng, rng.randint(1, 2)).capitalize()
        last = _word(rng, rng.randint(2, 3)).capitalize()
        name = f"{first} {last}"
        if name in names:
            continue
        names.add(name)
        place = rng.choices(places, weights)[0]
        other = rng.choice([p for p in places if p != place])
        template = _TEMPLATES[0] if not people else rng.choice(_TEMPLATES)
        year = rng.randint(1700, 1950)
        sentence = template.format(
            name=name, first=first, last=last, place=place, other=other, job=rng.choice(_JOBS),
            year=year, year2=year + rng.randint(30, 90),
        )
        people.append((name, place, f"{name}. {sentence}"))
    return SyntheticWorld(people, n_train, n_dev, n_test)


def write_synthetic_corpus(
    out_dir,
    n_people: int = 300,
    n_train: int = 150,
    n_dev: int = 75,
    n_test: int = 75,
    seed: int = 0,
    n_places: int = 20,
) -> dict[str, Path]:
    """Write the four files into ``out_dir`` (created if needed); returns file name -> path."""
    world = generate_synthetic_world(n_people, n_train, n_dev, n_test, seed, n_places)
    files = world.files()
    wiki_chars = set(files["wiki.txt"])
    for fname, content in files.items():
        missing = sorted(set(content.replace("\t", "").replace("\n", "")) - wiki_chars)
        if missing:  # cannot happen with the templates above; guards future edits
            raise RuntimeError(f"synthetic {fname} uses characters absent from wiki.txt: {missing}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for fname, content in files.items():
        path = out / fname
        path.write_text(content, encoding="utf-8", newline="\n")
        paths[fname] = path
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m data_scripts.synthetic",
        description="Write a small invented birthplace world (wiki.txt and the three TSVs) into a directory.",
    )
    parser.add_argument("--out_dir", required=True, help="directory to write the four files into")
    parser.add_argument("--n_people", type=int, default=300, help="people in wiki.txt (default 300)")
    parser.add_argument("--n_train", type=int, default=150, help="people in birth_places_train.tsv (default 150)")
    parser.add_argument("--n_dev", type=int, default=75, help="people in birth_dev.tsv (default 75)")
    parser.add_argument("--n_test", type=int, default=75, help="people in birth_test_inputs.tsv (default 75)")
    parser.add_argument("--n_places", type=int, default=20, help="distinct birthplaces (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        paths = write_synthetic_corpus(
            args.out_dir, args.n_people, args.n_train, args.n_dev, args.n_test, args.seed, args.n_places
        )
    except ValueError as e:
        parser.error(str(e))
    for path in paths.values():
        n = sum(1 for _ in path.open(encoding="utf-8"))
        print(f"wrote {path} ({n} lines)")


if __name__ == "__main__":
    main()

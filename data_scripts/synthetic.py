"""A small invented world in the layout of the real data, the embedded default corpus.

``write_synthetic_corpus(out_dir, ...)`` writes, deterministically for a seed:

- ``wiki.txt``: short biography sentences of invented people, each naming the person first and the birthplace
  soon after (some also name a second, distracting place, a job and a year); every person has
  ``bios_per_person`` paraphrases (different sentence shapes, one line each), except the "one-sentence" dev
  people below;
- ``birth_places_train.tsv``: ``Where was Name born?<TAB>Place`` for the first ``n_train`` people;
- ``birth_dev.tsv``: the next ``n_dev`` people, who appear in wiki.txt and never in the finetuning file;
  with ``single_bio_every=3`` every third of them (the 3rd, 6th, ...) is read in ONE sentence only, so a single
  model shows what paraphrases do: ``birth_dev_paraphrased.tsv`` and ``birth_dev_single.tsv`` split the dev
  questions into the two groups;
- ``birth_test_inputs.tsv``: the questions for the next ``n_test`` people (no answers);
- people beyond ``n_train + n_dev + n_test`` appear only in wiki.txt.

wiki.txt holds ``bios_per_person`` rounds; round r lists the r-th paraphrase of every person in the real files'
order (train people first, then dev, then test), so a loader that does not shuffle (the reference's) still meets
each person's paraphrases spread over the epoch. Names and places are built from invented syllables; places
follow a mildly skewed (Zipf 0.1) distribution whose most likely place is "London" (about 6% of people with 20
places), so the London baseline and guessing the most common place score only a few percent.

Why several paraphrases: a model that read each fact in one sentence shape stores it (it completes the sentence)
but rarely answers a question about it; reading it in several shapes stores it where a question can reach it
(Allen-Zhu & Li, "Physics of Language Models: Part 3.1", 2023; measured for `make demo`: results/demo_cpu.json). The
sentences put the place early because span corruption truncates documents: a late place is often cut away.

Every character of the TSVs occurs in wiki.txt (the tokenizer is built from it); this is checked on write.

CLI: ``python -m data_scripts.synthetic --out_dir DIR [--n_people N] [--n_train N] [--n_dev N] [--n_test N]
[--n_places N] [--bios_per_person K] [--single_bio_every N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

__all__ = ["SyntheticWorld", "generate_synthetic_world", "write_synthetic_corpus"]

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kl", "st", "th", "sh"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
_CODAS = ["", "", "", "n", "r", "l", "s", "m", "x"]
_PLACE_SUFFIXES = ["ton", "ford", "burg", "mouth", "ia", "vale", "wick", "stad", "port", "holm"]
_JOBS = [
    "painter", "farmer", "poet", "sailor", "baker", "weaver", "doctor", "judge", "singer", "teacher",
    "miner", "architect", "historian", "chemist", "novelist", "composer", "soldier", "merchant",
]
# {name} full name, {place} the birthplace, {other} another place, {job}, {year}s. The name comes first and the place
# soon after: span corruption keeps a document's first characters most often.
_FIRST_TEMPLATE = "Who was {name}? The {job} was born in {place} ."  # line 1: carries the question's W, h, ?
_TEMPLATES = [
    "{name} was born in {place} and worked as a {job} in {other} .",
    "{name}, born {year} in {place}, was a {job} .",
    "{name} (born in {place}, {year}) was a {job} who lived in {other} .",
    "{name} came from {place} ; the {job} died in {year2} .",
    "{name} of {place} was a famous {job} .",
    "{name} is a {job} born in {place} .",
]
QUESTION = "Where was {name} born?"
# The demo's world (chosen by measurement: results/demo_cpu.json): small enough to memorise in a CPU minute or two.
DEFAULTS = {"n_people": 250, "n_train": 150, "n_dev": 75, "n_test": 25, "n_places": 20, "bios_per_person": 4,
            "single_bio_every": 3}
PLACE_ZIPF_EXPONENT = 0.1  # birthplace frequencies ~ 1 / rank**exponent; "London" is rank 1


class SyntheticWorld:
    """The generated people: ``people`` is a list of ``(name, birthplace, bios)`` in the real files' order, where
    ``bios`` is the tuple of that person's wiki.txt lines (their paraphrases)."""

    def __init__(self, people: list[tuple[str, str, tuple[str, ...]]], n_train: int, n_dev: int, n_test: int) -> None:
        self.people = people
        self.n_train, self.n_dev, self.n_test = n_train, n_dev, n_test

    @property
    def train(self) -> list[tuple[str, str, tuple[str, ...]]]:
        return self.people[: self.n_train]

    @property
    def dev(self) -> list[tuple[str, str, tuple[str, ...]]]:
        return self.people[self.n_train : self.n_train + self.n_dev]

    @property
    def test(self) -> list[tuple[str, str, tuple[str, ...]]]:
        return self.people[self.n_train + self.n_dev : self.n_train + self.n_dev + self.n_test]

    def files(self) -> dict[str, str]:
        """File name -> content, in the real data's layout (every file ends with a newline). When some dev people
        have fewer paraphrases than others, also ``birth_dev_paraphrased.tsv`` and ``birth_dev_single.tsv``."""

        def tsv(rows, with_answer=True):
            return "".join(
                QUESTION.format(name=name) + (f"\t{place}" if with_answer else "") + "\n" for name, place, _ in rows
            )

        rounds = max(len(bios) for _, _, bios in self.people)
        wiki = [bios[r] for r in range(rounds) for _, _, bios in self.people if r < len(bios)]
        files = {
            "wiki.txt": "".join(line + "\n" for line in wiki),
            "birth_places_train.tsv": tsv(self.train),
            "birth_dev.tsv": tsv(self.dev),
            "birth_test_inputs.tsv": tsv(self.test, with_answer=False),
        }
        single = [p for p in self.dev if len(p[2]) == 1]
        if single and len(single) < len(self.dev) and rounds > 1:
            files["birth_dev_paraphrased.tsv"] = tsv([p for p in self.dev if len(p[2]) > 1])
            files["birth_dev_single.tsv"] = tsv(single)
        return files


def _word(rng: random.Random, n_syllables: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(n_syllables))


def generate_synthetic_world(
    n_people: int = DEFAULTS["n_people"],
    n_train: int = DEFAULTS["n_train"],
    n_dev: int = DEFAULTS["n_dev"],
    n_test: int = DEFAULTS["n_test"],
    seed: int = 0,
    n_places: int = DEFAULTS["n_places"],
    bios_per_person: int = DEFAULTS["bios_per_person"],
    single_bio_every: int = DEFAULTS["single_bio_every"],
) -> SyntheticWorld:
    """Invent the world (see the module docstring); pure function of its arguments."""
    for name, value in (("n_people", n_people), ("n_train", n_train), ("n_dev", n_dev), ("n_test", n_test),
                        ("n_places", n_places)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}={value!r} must be a non-negative integer")
    if n_people < 1 or n_places < 2:
        raise ValueError(f"need n_people >= 1 and n_places >= 2, got n_people={n_people}, n_places={n_places}")
    if not isinstance(bios_per_person, int) or not 1 <= bios_per_person <= len(_TEMPLATES):
        raise ValueError(f"bios_per_person={bios_per_person!r} must be between 1 and {len(_TEMPLATES)}")
    if not isinstance(single_bio_every, int) or single_bio_every < 0:
        raise ValueError(f"single_bio_every={single_bio_every!r} must be a non-negative integer (0: nobody)")
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

    people: list[tuple[str, str, tuple[str, ...]]] = []
    names: set[str] = set()
    while len(people) < n_people:
        first = _word(rng, rng.randint(1, 2)).capitalize()
        last = _word(rng, rng.randint(2, 3)).capitalize()
        name = f"{first} {last}"
        if name in names:
            continue
        names.add(name)
        place = rng.choices(places, weights)[0]
        k = len(people) - n_train
        single = single_bio_every > 0 and 0 <= k < n_dev and k % single_bio_every == single_bio_every - 1
        templates = rng.sample(_TEMPLATES, 1 if single else bios_per_person)
        if not people:
            templates[0] = _FIRST_TEMPLATE
        bios = []
        for template in templates:
            year = rng.randint(1700, 1950)
            bios.append(template.format(
                name=name, place=place, other=rng.choice([p for p in places if p != place]), job=rng.choice(_JOBS),
                year=year, year2=year + rng.randint(30, 90),
            ))
        people.append((name, place, tuple(bios)))
    return SyntheticWorld(people, n_train, n_dev, n_test)


def write_synthetic_corpus(out_dir, seed: int = 0, **sizes: Any) -> dict[str, Path]:
    """Write the world's files into ``out_dir`` (created if needed); returns file name -> path. ``sizes`` are
    `generate_synthetic_world`'s keyword arguments (``n_people``, ``bios_per_person``, ...)."""
    world = generate_synthetic_world(seed=seed, **sizes)
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
        description="Write a small invented birthplace world (wiki.txt and the TSVs) into a directory.",
    )
    parser.add_argument("--out_dir", required=True, help="directory to write the files into")
    for name, help_text in (("n_people", "people in wiki.txt"), ("n_train", "people in birth_places_train.tsv"),
                            ("n_dev", "people in birth_dev.tsv"), ("n_test", "people in birth_test_inputs.tsv"),
                            ("n_places", "distinct birthplaces"),
                            ("bios_per_person", f"paraphrased sentences per person, 1..{len(_TEMPLATES)}"),
                            ("single_bio_every", "every N-th dev person is read in one sentence only; 0: nobody")):
        parser.add_argument(f"--{name}", type=int, default=DEFAULTS[name],
                            help=f"{help_text} (default {DEFAULTS[name]})")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = {name: getattr(args, name) for name in DEFAULTS}
    try:
        paths = write_synthetic_corpus(args.out_dir, args.seed, **sizes)
    except ValueError as e:
        parser.error(str(e))
    for path in paths.values():
        n = sum(1 for _ in path.open(encoding="utf-8"))
        print(f"wrote {path} ({n} lines)")


if __name__ == "__main__":
    main()

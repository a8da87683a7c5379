"""What a finished run leaves for people: a loss-curve PNG and a short model card."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_loss_curve(losses: list[tuple[int, float]], path: str | Path, title: str = "training loss") -> None:
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    if losses:
        steps, values = zip(*losses, strict=True)
        ax.plot(steps, values, linewidth=0.8)
        window = max(1, len(values) // 50)
        if window > 1:
            smooth = [sum(values[max(0, i - window + 1): i + 1]) / len(values[max(0, i - window + 1): i + 1])
                      for i in range(len(values))]
            ax.plot(steps, smooth, linewidth=1.5, label=f"moving mean ({window} steps)")
            ax.legend()
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy (non-PAD targets)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_model_card(path: str | Path, info: dict) -> None:
    """A short README.md: what was trained, on what, with which hyper-parameters, and how it ended."""
    lines = [
        "---",
        "library_name: transformers",
        "tags: [chargpt, cs224n, character-level]",
        "---",
        f"# {info.get('title', 'chargpt model')}",
        "",
        "A character-level GPT from the chargpt project (CS224N pretraining/birthplace assignment).",
        "Load it with `import modeling_chargpt` then `AutoModelForCausalLM.from_pretrained(folder)`, or with",
        "`trust_remote_code=True` without the package.",
        "",
        "| field | value |",
        "| --- | --- |",
    ]
    lines += [f"| {k} | {v} |" for k, v in info.items() if k != "title"]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")

"""What a finished run leaves for people: a loss-curve PNG and a short model card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelerate import Accelerator
from transformers import PreTrainedModel

from .arguments import TrainingArguments
from .state import TrainResult


def plot_loss_curve(losses: list[tuple[int, float]], path: str | Path, title: str = "training loss") -> None:
    """The loss per step, with a moving mean once there are enough steps: how the run went, at a glance."""
    import matplotlib  # here, not at the top: every training process would pay its import for one figure at the end

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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


def run_card(model: PreTrainedModel, args: TrainingArguments, **fields: Any) -> dict:
    """Model-card fields every run records: shape, size and the hyper-parameters that shaped it."""
    c = model.config
    return {
        **fields,
        "position_embedding_type": c.position_embedding_type, "attention_type": c.attention_type,
        "parameters": model.num_parameters(), "n_layer": c.n_layer, "n_head": c.n_head, "n_embd": c.n_embd,
        "block_size": c.block_size, "epochs": args.num_train_epochs, "batch_size": args.per_device_train_batch_size,
        "learning_rate": args.learning_rate, "packing": args.packing, "seed": args.seed,
    }


def report_done(accelerator: Accelerator, result: TrainResult, stage: str, output_dir: str) -> int:
    """The scripts' last line and exit status (130 when Ctrl-C stopped the run after checkpointing)."""
    if result.interrupted:
        return 130
    if accelerator.is_main_process:
        final = result.final_loss
        loss = (f"final losses {', '.join(f'{x:.4f}' for x in final)}" if isinstance(final, list)
                else f"final loss {final:.4f}")
        print(f"{stage} done: {result.global_step} steps, {loss}, {result.train_seconds:.0f}s; "
              f"{'models' if isinstance(final, list) else 'model'} saved to {output_dir}")
    return 0

"""The reference learning-rate schedule, driven by a token counter rather than by steps."""

from __future__ import annotations

import math

import torch


class TokenCosineSchedule:
    """Linear warmup over `warmup_tokens`, then cosine decay to a floor of 10% at `final_tokens`.

    Faithful to the CS224N trainer: tokens are counted as every target position of every example (PAD
    included), and the learning rate is updated *after* each optimizer step, so the very first step runs at
    the full base learning rate. State is a plain dict so checkpoints stay JSON (nothing unpickled on resume).
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        base_lr: float,
        warmup_tokens: float,
        final_tokens: float,
        decay: bool = True,
        min_ratio: float = 0.1,
    ) -> None:
        self.optimizer = optimizer
        self.base_lr = base_lr
        self.warmup_tokens = warmup_tokens
        self.final_tokens = final_tokens
        self.decay = decay
        self.min_ratio = min_ratio
        self.tokens = 0
        self._set_lr(base_lr)

    def multiplier(self, tokens: float) -> float:
        if not self.decay:
            return 1.0
        if tokens < self.warmup_tokens:
            return float(tokens) / float(max(1, self.warmup_tokens))
        progress = float(tokens - self.warmup_tokens) / float(max(1, self.final_tokens - self.warmup_tokens))
        # The reference never passes final_tokens (it counts block_size-1 tokens per example against a
        # final_tokens of epochs*len*block_size); clamping keeps a user's shorter --final_tokens from
        # letting the cosine rise again.
        progress = min(progress, 1.0)
        return max(self.min_ratio, 0.5 * (1.0 + math.cos(math.pi * progress)))

    def step(self, tokens_this_step: int) -> float:
        """Count the tokens of the step just taken and set the learning rate for the next one."""
        self.tokens += int(tokens_this_step)
        lr = self.base_lr * self.multiplier(self.tokens)
        self._set_lr(lr)
        return lr

    def get_last_lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self) -> dict:
        return {"tokens": self.tokens, "lr": self.get_last_lr()}

    def load_state_dict(self, state: dict) -> None:
        self.tokens = int(state["tokens"])
        self._set_lr(float(state["lr"]))

"""The CS224N minGPT as a transformers model: pre-LN blocks, selectable positions and attention, KV cache.

The attention kernels (and the masks they take) live in attention.py and are chosen by `config._attn_implementation`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .attention import (
    ATTN_IMPLEMENTATIONS,
    DEFAULT_ATTN_IMPLEMENTATION,
    build_attention_mask,
    eager_attention_forward,
    key_distances,
    with_bias,
)
from .configuration_chargpt import CharGPTConfig
from .dropout import CharGPTDropout
from .positions import POSITION_ENCODINGS, Rotation, apply_rope, sinusoidal_positions

# transformers 5.24 renamed the KV cache `past_key_values` -> `cache` (generate passes it, outputs carry it by that
# name); the model takes either and returns it under the name the installed version's outputs declare.
_CACHE_FIELD = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"

# Labels with this value are not predicted (PAD, the question of a name prompt, a packing boundary); PyTorch's
# cross_entropy default, so every pipeline and the loss must agree on it.
IGNORE_INDEX = -100


def attend(
    module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
    scaling: float | None,
) -> torch.Tensor:
    """Attention through the kernel `config._attn_implementation` names; (B, T, H, Dv)."""
    kernel = ALL_ATTENTION_FUNCTIONS.get_interface(module.config._attn_implementation, eager_attention_forward)
    dropout = module.attn_pdrop if module.training else 0.0
    return kernel(module, query, key, value, mask, dropout=dropout, scaling=scaling)[0]


class CharGPTSelfAttention(nn.Module):
    """Multi-head causal self-attention with a fused QKV projection."""

    is_causal = True

    def __init__(self, config: CharGPTConfig, layer_idx: int) -> None:
        super().__init__()
        self.config = config
        self.n_head, self.head_dim, self.layer_idx = config.n_head, config.head_dim, layer_idx
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_pdrop = config.attn_pdrop
        self.resid_drop = CharGPTDropout(config.resid_pdrop)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        rotation: Rotation | None,
        position_ids: torch.Tensor,
        past_key_values: Cache | None,
    ) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        if rotation is not None:
            q, k = rotation(q, k)
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)
        y = attend(self, q, k, v, mask, scaling=None)  # None: 1/sqrt(head_dim)
        return self.resid_drop(self.proj(y.reshape(B, T, C)))


class CharGPTSynthesizerAttention(nn.Module):
    """Dense synthesizer (2021/2022 handouts): scores = ReLU(X A_i + b1) B + b2 instead of Q K^T.

    As in the reference skeleton, B (`w2`) and b2 are shared by all heads; here they are head_dim x block_size and
    block_size wide, one column per position of the context. (The skeleton's are block_size - 1 wide, the length
    of its 2021 training sequences; the converter maps them to a model of that block_size.) The score of
    key j is a dot product, [a_t, 1] . [B[:, j], b2[j]], so every attention kernel computes it (scaling 1). It
    depends on the key only through its position, so the cache stores the values and, in place of keys, the key
    positions (to pick B's and b2's columns).
    """

    is_causal = True

    def __init__(self, config: CharGPTConfig, layer_idx: int) -> None:
        super().__init__()
        self.config = config
        self.n_head, self.head_dim, self.layer_idx = config.n_head, config.head_dim, layer_idx
        self.w1 = nn.Linear(config.n_embd, config.n_embd)
        self.w2 = nn.Parameter(torch.empty(config.head_dim, config.block_size))
        self.b2 = nn.Parameter(torch.empty(config.block_size))
        self.value = nn.Linear(config.n_embd, config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_pdrop = config.attn_pdrop
        self.resid_drop = CharGPTDropout(config.resid_pdrop)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        rotation: Rotation | None,
        position_ids: torch.Tensor,
        past_key_values: Cache | None,
    ) -> torch.Tensor:
        B, T, C = x.shape
        a = F.relu(self.w1(x)).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        key_pos = position_ids[:, None, :, None].expand(B, self.n_head, T, 1).to(v.dtype)
        if past_key_values is not None:
            key_pos, v = past_key_values.update(key_pos, v, self.layer_idx)
        key_pos = key_pos[:, 0, :, 0].long()  # (B, kv_len)
        query = torch.cat((a, torch.ones_like(a[..., :1])), -1)
        key = torch.cat((self.w2.T[key_pos], self.b2[key_pos, None]), -1).to(a.dtype)
        y = attend(self, query, key[:, None].expand(-1, self.n_head, -1, -1), v, mask, scaling=1.0)
        return self.resid_drop(self.proj(y.reshape(B, T, C)))


ATTENTION_CLASSES = {"causal": CharGPTSelfAttention, "synthesizer": CharGPTSynthesizerAttention}


class CharGPTBlock(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, config: CharGPTConfig, layer_idx: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.ln2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = ATTENTION_CLASSES[config.attention_type](config, layer_idx)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd),
            nn.GELU(),
            nn.Linear(4 * config.n_embd, config.n_embd),
            CharGPTDropout(config.resid_pdrop),
        )

    def forward(self, x: torch.Tensor, mask, rotation, position_ids, past_key_values) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), mask, rotation, position_ids, past_key_values)
        return x + self.mlp(self.ln2(x))


class CharGPTPreTrainedModel(PreTrainedModel):
    config_class = CharGPTConfig
    base_model_prefix = "transformer"
    _no_split_modules = ["CharGPTBlock"]
    _supports_sdpa = True

    def get_correct_attn_implementation(self, requested_attention: str | None, is_init_check: bool = False) -> str:
        """`attn_implementation` by name: one of attention.py's kernels, "chargpt" when none is asked for.

        transformers' other kernels (flash, flex, paged) expect their own mask formats, so they are refused here.
        """
        if requested_attention is None:
            return DEFAULT_ATTN_IMPLEMENTATION
        if requested_attention not in ATTN_IMPLEMENTATIONS:
            raise ValueError(
                f"attn_implementation={requested_attention!r} is not one of chargpt's attention kernels "
                f"{list(ATTN_IMPLEMENTATIONS)} (modeling_chargpt/attention.py)"
            )
        return requested_attention

    def _init_weights(self, module: nn.Module) -> None:
        """minGPT's init: N(0, 0.02) for Linear/Embedding weights, zero biases, LayerNorm 1/0."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, CharGPTSynthesizerAttention):
            init.uniform_(module.w2, -0.001, 0.001)
            init.zeros_(module.b2)
        elif isinstance(module, CharGPTModel) and module.pos_emb is not None:
            init.zeros_(module.pos_emb)


class CharGPTModel(CharGPTPreTrainedModel):
    """Embeddings, blocks and final LayerNorm; returns hidden states."""

    # True where the caller has checked the position_ids it passes (`check_positions`):
    # chargpt/training/stacking.py checks
    # its stacked members' positions before vmap, under which `torch._assert_async` has no batching rule
    caller_checks_positions = False

    def __init__(self, config: CharGPTConfig) -> None:
        super().__init__(config)
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.positions = POSITION_ENCODINGS[config.position_embedding_type](config)
        self.pos_emb = (
            nn.Parameter(torch.zeros(1, config.block_size, config.n_embd)) if self.positions.learned_table else None
        )
        self.drop = CharGPTDropout(config.embd_pdrop)
        self.blocks = nn.ModuleList(CharGPTBlock(config, i) for i in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.tok_emb

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.tok_emb = value

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
    ) -> torch.Tensor:
        B, T = input_ids.shape
        past_len = int(past_key_values.get_seq_length()) if past_key_values is not None else 0
        highest, exact = None, False  # the largest position, when the shapes tell it (exact) or bound it
        if position_ids is None:
            if attention_mask is not None and attention_mask.dim() == 2:
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -T:]
                highest = attention_mask.shape[-1] - 1  # left padding only lowers it
            else:
                position_ids = torch.arange(past_len, past_len + T, device=input_ids.device).expand(B, T)
                highest, exact = past_len + T - 1, True
        if highest is not None or not self.caller_checks_positions:
            self.check_positions(position_ids, highest, exact)

        x = self.drop(self.positions(self.tok_emb(input_ids), position_ids, self.pos_emb))
        rotation = self.positions.rotation(position_ids)
        kv_len = past_key_values.get_mask_sizes(T, 0)[0] if past_key_values is not None else T
        mask = build_attention_mask(attention_mask, T, past_len, B, input_ids.device, kv_len)
        bias = self.positions.attention_bias(key_distances(T, kv_len, past_len, input_ids.device))
        if bias is not None:
            mask = with_bias(mask, bias, T, kv_len)
        for block in self.blocks:
            x = block(x, mask, rotation, position_ids, past_key_values)
        return self.ln_f(x)

    def check_positions(self, position_ids: torch.Tensor, highest: int | None = None, exact: bool = False) -> None:
        """Refuse a position beyond the learned tables (`pos_emb`, the synthesizer's `w2`/`b2`) with a clear error
        (`config.bounded_context`: rope, sinusoidal and no positions have none, nothing to check).

        Reading the positions back would make every training step wait for the device, so the shapes decide
        wherever they can (default positions: `highest` is exact, or an upper bound under a 2D mask). Positions the
        caller gives (packed rows) are checked on the device while training (`torch._assert_async`: no wait on a
        GPU, an immediate error on a CPU) and read back only in evaluation and generation.
        """
        if not self.config.bounded_context:
            return
        block = self.config.block_size
        if highest is not None and highest < block:
            return
        if exact:
            raise ValueError(self._beyond_message(f"position {highest}"))
        if self.training:
            torch._assert_async(position_ids.max() < block, self._beyond_message("a position in position_ids"))
        elif int(position_ids.max()) >= block:
            raise ValueError(self._beyond_message(f"position {int(position_ids.max())}"))

    def _beyond_message(self, what: str) -> str:
        cfg = self.config
        unbounded = ", ".join(name for name, encoding in POSITION_ENCODINGS.items() if not encoding.bounded)
        return (f"{what} is beyond block_size={cfg.block_size}; position_embedding_type="
                f"{cfg.position_embedding_type!r} with attention_type={cfg.attention_type!r} cannot run past the "
                f"training context ({unbounded} can)")


class CharGPTForCausalLM(CharGPTPreTrainedModel, GenerationMixin):
    """CharGPT with its untied, bias-free LM head. `labels` are aligned with `input_ids` and shifted here."""

    _tied_weights_keys = {"lm_head.weight": "transformer.tok_emb.weight"}

    def __init__(self, config: CharGPTConfig) -> None:
        super().__init__(config)
        self.transformer = CharGPTModel(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.transformer.tok_emb

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.transformer.tok_emb = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        cache: Cache | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        if cache is not None:  # the name transformers >= 5.24 uses
            past_key_values = cache
        use_cache = use_cache if use_cache is not None else (self.config.use_cache and not self.training)
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache(config=self.config)
        if not use_cache:
            past_key_values = None
        hidden = self.transformer(input_ids, attention_mask, position_ids, past_key_values)
        if isinstance(logits_to_keep, int):
            hidden_kept = hidden[:, -logits_to_keep:] if logits_to_keep > 0 else hidden
        else:
            hidden_kept = hidden[:, logits_to_keep]
        logits = self.lm_head(hidden_kept)
        loss = None
        if labels is not None:
            # the loss covers every position; the returned logits still honour logits_to_keep
            all_logits = logits if hidden_kept is hidden else self.lm_head(hidden)
            loss = F.cross_entropy(
                all_logits[:, :-1].flatten(0, 1).float(),
                labels[:, 1:].flatten().to(logits.device),
                ignore_index=IGNORE_INDEX,
            )
        return CausalLMOutputWithPast(loss=loss, logits=logits, **{_CACHE_FIELD: past_key_values})

    def generate(self, inputs: torch.Tensor | None = None, generation_config=None, **kwargs):
        """GenerationMixin.generate, refusing before any compute to run learned/synthesizer models past block_size."""
        cfg = self.config
        prompt = inputs if inputs is not None else kwargs.get("input_ids")
        if prompt is not None and cfg.bounded_context:
            gen = generation_config if generation_config is not None else self.generation_config
            max_new = kwargs.get("max_new_tokens", gen.max_new_tokens)
            if max_new is None:
                max_new = kwargs.get("max_length", gen.max_length) - prompt.shape[-1]
            if prompt.shape[-1] + max_new - 1 > cfg.block_size:
                raise ValueError(
                    f"a prompt of {prompt.shape[-1]} tokens plus max_new_tokens={max_new} needs "
                    f"{prompt.shape[-1] + max_new - 1} positions, more than block_size={cfg.block_size} "
                    f"that position_embedding_type={cfg.position_embedding_type!r} / attention_type="
                    f"{cfg.attention_type!r} supports; shorten the prompt or max_new_tokens"
                )
        return super().generate(inputs, generation_config=generation_config, **kwargs)

    def create_masks_for_generate(self, config: CharGPTConfig, inputs_embeds: torch.Tensor,
                                  attention_mask: torch.Tensor | None, *args, **kwargs) -> torch.Tensor | None:
        """generate() asks for a 4D mask with a static cache; chargpt builds its kernels' masks from the 2D one."""
        return attention_mask


__all__ = [
    "IGNORE_INDEX",
    "CharGPTForCausalLM",
    "CharGPTModel",
    "CharGPTPreTrainedModel",
    "apply_rope",
    "sinusoidal_positions",
]

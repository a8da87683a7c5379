"""chargpt: the CS224N character-level GPT as a transformers model, config and tokenizer.

Importing the package registers them with the Auto classes and the `birthplace-qa` pipeline with transformers'
pipeline registry, and marks them for remote-code saving so a saved folder also loads (and answers) with
`trust_remote_code=True` where this package is not installed.
"""

from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
from transformers.pipelines import PIPELINE_REGISTRY

from .attention import ATTN_IMPLEMENTATIONS, DEFAULT_ATTN_IMPLEMENTATION, packed_causal_mask
from .configuration_chargpt import ATTENTION_TYPES, POSITION_EMBEDDING_TYPES, CharGPTConfig
from .modeling_chargpt import IGNORE_INDEX, CharGPTForCausalLM, CharGPTModel, CharGPTPreTrainedModel
from .pipeline_chargpt import TASK, BirthplaceQAPipeline
from .tokenization_chargpt import MASK_CHAR, PAD_CHAR, CharTokenizer, UnknownCharacterError

AutoConfig.register(CharGPTConfig.model_type, CharGPTConfig, exist_ok=True)
AutoModelForCausalLM.register(CharGPTConfig, CharGPTForCausalLM, exist_ok=True)
AutoTokenizer.register(CharGPTConfig, slow_tokenizer_class=CharTokenizer, exist_ok=True)
CharGPTConfig.register_for_auto_class()
CharGPTForCausalLM.register_for_auto_class("AutoModelForCausalLM")
CharTokenizer.register_for_auto_class()
PIPELINE_REGISTRY.register_pipeline(TASK, pipeline_class=BirthplaceQAPipeline, pt_model=AutoModelForCausalLM)

__all__ = [
    "TASK",
    "BirthplaceQAPipeline",
    "ATTENTION_TYPES",
    "ATTN_IMPLEMENTATIONS",
    "DEFAULT_ATTN_IMPLEMENTATION",
    "IGNORE_INDEX",
    "MASK_CHAR",
    "PAD_CHAR",
    "POSITION_EMBEDDING_TYPES",
    "CharGPTConfig",
    "CharGPTForCausalLM",
    "CharGPTModel",
    "CharGPTPreTrainedModel",
    "CharTokenizer",
    "UnknownCharacterError",
    "packed_causal_mask",
]

"""Training options a config or a command-line flag turns on: autocast (bf16/fp16) on any device
(:mod:`.autocast`, ``--amp``), ``torch.compile`` of the backbone and neck (:mod:`.compile`, ``--compile``),
layer-wise learning-rate decay (:mod:`.layer_decay`), EoMT's two-stage warm-up and poly decay
(:mod:`.warmup_poly`), and a LoRA fine-tune's adapters written as their own file
(:mod:`.lora_hook`, ``model.backbone.lora``)."""
from .autocast import AutocastOptimWrapper
from .compile import compile_from_config, compile_parts
from .layer_decay import LayerDecayOptimWrapperConstructor
from .lora_hook import LoRAAdapterHook
from .warmup_poly import TwoStageWarmupPolyLR

__all__ = ['AutocastOptimWrapper', 'LayerDecayOptimWrapperConstructor', 'LoRAAdapterHook', 'TwoStageWarmupPolyLR',
           'compile_from_config', 'compile_parts']

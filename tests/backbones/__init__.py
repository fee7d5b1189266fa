"""Each backbone family against its reference (timm / transformers): logits, maps, layouts, sizes; the backbone
contract and defaults, multi-level features and LoRA."""

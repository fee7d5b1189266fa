"""Hugging Face transformers folders: DPT checkpoints as this project's models (:mod:`.dpt`), their config.json read
field by field with the types the converter knows (:mod:`.config`)."""

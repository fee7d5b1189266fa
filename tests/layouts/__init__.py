"""Checkpoint layouts: whole task models from transformers, the DPT authors, Depth Anything and mmseg; weight files in
every container."""

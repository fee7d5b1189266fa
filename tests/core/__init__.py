"""The shared core against formulas: attention, blocks and embeddings, and the run-time kernel policy (GEMMs,
convolution weight gradients, execution switches, determinism)."""

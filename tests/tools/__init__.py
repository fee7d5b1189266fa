"""The command-line tools and the lab code under tools/: help, compare and evidence, experiments, benchmarks,
gpu_check, pictures, ONNX and feature export."""

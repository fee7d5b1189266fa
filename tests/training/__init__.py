"""Training through mmengine Runners and tools/train.py: short runs on the real data, distributed and sharded training,
the console, every config, classification, MAE, detection training, compile."""

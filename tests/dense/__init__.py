"""Dense task parts: DPT necks and heads, task models, losses, metrics, transforms and datasets."""

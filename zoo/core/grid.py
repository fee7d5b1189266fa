"""The token grid type: (rows, columns) of patch tokens, as every position and attention part takes it."""
from __future__ import annotations

Grid = tuple[int, int]

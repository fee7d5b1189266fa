"""The token grid type: (rows, columns) of patch tokens, as every position and attention part takes it; and
:class:`TokenGrid`, the grid of one forward carrying what its blocks compute once from it."""
from __future__ import annotations

Grid = tuple[int, int]


class TokenGrid(tuple):
    """A forward's grid (h, w), a tuple as any :data:`Grid`, that also carries ``tables``: what is computed from the
    grid alone once per forward and read by every block (the rotary positions' tables,
    :meth:`zoo.core.rope._Rope.kernel_tables`), as Meta's DINOv3 computes them in its forward and passes them down.
    An encoder makes one per forward (``ViTEncoder.embed``); nothing outlives the forward. A plain tuple grid carries
    nothing: each part computes what it needs."""

    def __new__(cls, grid):
        h, w = grid  # any pair: a grid, or the generator FSDP rebuilds a tuple argument from (type(x)(...))
        self = super().__new__(cls, (h, w))
        self.tables = {}
        return self

"""What every dataset here shares: a pipeline built from this project's registry, folder listing with
errors that say which folder was searched and what layout was expected, and training on a fraction of the samples.

``fraction=f, fraction_seed=s`` keeps ``ceil(f * n)`` of the ``n`` samples: the first ones of a permutation drawn
from ``s`` alone, in their original order. The subset depends only on (n, f, s), so every model trained with the
same fraction and seed sees the same samples, and a smaller fraction's subset lies inside a larger one's."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from mmengine.dataset import BaseDataset

from .. import transforms  # noqa: F401  (registers the transforms the pipelines name)
from ..io.files import files_under
from ..registry import TRANSFORMS


def build_pipeline(pipeline) -> list:
    """Config dicts -> transforms (through :data:`heads.registry.TRANSFORMS`, so no default scope is needed)."""
    return [TRANSFORMS.build(t) if isinstance(t, dict) else t for t in pipeline or ()]


def list_files(folder, suffix: str, what: str, layout: str) -> dict[str, Path]:
    """``{relative path without suffix: path}`` of the files ending in ``suffix`` under ``folder``, sorted (symbolic
    links to folders followed: :func:`heads.io.files.files_under`).

    Raises FileNotFoundError if ``folder`` does not exist and ValueError if it holds no such file; both
    messages name the folder and describe the expected ``layout``.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{what} folder {folder} does not exist; expected the layout {layout}")
    files = {str(p.relative_to(folder))[:-len(suffix)]: p for p in files_under(folder) if p.name.endswith(suffix)}
    if not files:
        raise ValueError(f"{what} folder {folder} contains no '*{suffix}' files; expected the layout {layout}")
    return files


def check_paired(images: dict, others: dict, what: str, expected, layout: str, hint: str = '') -> None:
    """FileNotFoundError unless every stem of ``images`` (``{stem: path}``) has one in ``others``: it counts the
    images without ``what`` (e.g. 'label map'), names the first one and the file ``expected(stem)`` it looked for,
    and the ``layout``."""
    missing = [stem for stem in images if stem not in others]
    if missing:
        raise FileNotFoundError(f"{len(missing)} image(s) have no {what}, e.g. {images[missing[0]]}: expected "
                                f"{expected(missing[0])}; expected the layout {layout}{hint}")


def checked_fraction(fraction) -> float:
    """``fraction`` as a float, or a ValueError unless it is a number in (0, 1]."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}")
    return float(fraction)


def fraction_indices(n: int, fraction: float, seed: int = 0) -> list[int]:
    """Sorted indices of ``ceil(fraction * n)`` of ``n`` samples (at least one): a prefix of a permutation drawn from
    ``seed``, so that for one seed the subsets of growing fractions are nested."""
    fraction = checked_fraction(fraction)
    keep = max(1, math.ceil(fraction * n - 1e-9)) if n else 0
    order = np.random.default_rng(seed).permutation(n)
    return sorted(int(i) for i in order[:keep])


class DenseDataset(BaseDataset):
    """:class:`mmengine.dataset.BaseDataset` whose pipeline may name this project's transforms by type."""

    def __init__(self, pipeline=(), fraction: float = 1.0, fraction_seed: int = 0, **kwargs):
        self.fraction, self.fraction_seed = checked_fraction(fraction), int(fraction_seed)
        super().__init__(pipeline=build_pipeline(pipeline), **kwargs)

    def filter_data(self) -> list[dict]:
        """The loaded samples, reduced to :func:`fraction_indices` when ``fraction`` < 1."""
        data = super().filter_data()
        if self.fraction == 1.0:
            return data
        return [data[i] for i in fraction_indices(len(data), self.fraction, self.fraction_seed)]

    def get_data_info(self, idx: int) -> dict:
        """The data info, with 'num_classes' when the classes are known (LoadAnnotations checks labels with it)."""
        info = super().get_data_info(idx)
        if self.metainfo.get('classes'):
            info.setdefault('num_classes', len(self.metainfo['classes']))
        return info

"""What every dataset here shares: a pipeline built from this project's registry, and folder listing with
errors that say which folder was searched and what layout was expected."""
from __future__ import annotations

from pathlib import Path

from mmengine.dataset import BaseDataset

from .. import transforms  # noqa: F401  (registers the transforms the pipelines name)
from ..registry import TRANSFORMS


def build_pipeline(pipeline) -> list:
    """Config dicts -> transforms (through :data:`heads.registry.TRANSFORMS`, so no default scope is needed)."""
    return [TRANSFORMS.build(t) if isinstance(t, dict) else t for t in pipeline or ()]


def list_files(folder, suffix: str, what: str, layout: str) -> dict[str, Path]:
    """``{relative path without suffix: path}`` of the files ending in ``suffix`` under ``folder``, sorted.

    Raises FileNotFoundError if ``folder`` does not exist and ValueError if it holds no such file; both
    messages name the folder and describe the expected ``layout``.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{what} folder {folder} does not exist; expected the layout {layout}")
    files = {str(p.relative_to(folder))[:-len(suffix)]: p
             for p in sorted(folder.rglob(f'*{suffix}')) if p.is_file()}
    if not files:
        raise ValueError(f"{what} folder {folder} contains no '*{suffix}' files; expected the layout {layout}")
    return files


class DenseDataset(BaseDataset):
    """:class:`mmengine.dataset.BaseDataset` whose pipeline may name this project's transforms by type."""

    def __init__(self, pipeline=(), **kwargs):
        super().__init__(pipeline=build_pipeline(pipeline), **kwargs)

    def get_data_info(self, idx: int) -> dict:
        """The data info, with 'num_classes' when the classes are known (LoadAnnotations checks labels with it)."""
        info = super().get_data_info(idx)
        if self.metainfo.get('classes'):
            info.setdefault('num_classes', len(self.metainfo['classes']))
        return info

"""Test-wide set-up: the tools are importable as modules (``import train``), and every test starts from seed 0."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)

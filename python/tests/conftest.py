"""The clustersim tests (CTest python:*): the module from the build tree, the repository's
scenarios and goldens. CSIM_SOURCE_DIR names the repository (set by CTest)."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(os.environ.get("CSIM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


@pytest.fixture
def root():
    return ROOT


@pytest.fixture
def scenario():
    return lambda name: str(ROOT / "scenarios" / name)

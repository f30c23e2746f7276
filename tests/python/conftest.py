"""Shared fixtures: where the build put kernels and the fixture framework."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("DLX_BUILD_DIR", ROOT / "build"))


@pytest.fixture(scope="session")
def build_dir():
    return BUILD


@pytest.fixture(scope="session")
def kernels():
    import dlx

    return dlx.load(BUILD / "kernels" / "test_kernels.so")


@pytest.fixture(scope="session")
def examples():
    import dlx

    class Examples:
        saxpy = dlx.load(BUILD / "examples" / "saxpy.so")
        report = dlx.load(BUILD / "examples" / "stream_report.so")

    return Examples


@pytest.fixture()
def fx():
    """The stand-in framework (tests/fixtures/dlx_fixture.c), with its counters reset
    and a check that every export it made was released exactly once."""
    import dlx_fixture

    dlx_fixture.reset_stats()
    live = dlx_fixture.stats()["live"]
    yield dlx_fixture
    import gc

    gc.collect()
    stats = dlx_fixture.stats()
    assert stats["live"] == live, f"unbalanced exports/deleters: {stats}"

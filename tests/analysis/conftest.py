import pytest

from synthetic_grid import write_grid


@pytest.fixture(scope="session")
def grid(tmp_path_factory):
    return write_grid(tmp_path_factory.mktemp("grid"))

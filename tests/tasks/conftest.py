import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def oracle_site(tmp_path_factory):
    """A folder on PYTHONPATH that installs the test-only `oracle` model the way a plugin package
    would: its module plus a dist-info whose entry point (group lm_eval.models) our hook reads."""
    site = tmp_path_factory.mktemp("oracle_site")
    shutil.copy(HERE / "oracle_lm.py", site / "kvrescue_test_oracle.py")
    dist_info = site / "kvrescue_test_oracle-0.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: kvrescue-test-oracle\nVersion: 0.0\n")
    (dist_info / "entry_points.txt").write_text("[lm_eval.models]\noracle = kvrescue_test_oracle:OracleLM\n")
    return site

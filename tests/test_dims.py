"""XxYxZ parsing."""

import pytest

from provision.errors import PlanError
from provision.plans.dims import Dims, parse_dims


def test_parse():
    dims = parse_dims("4x2x3")
    assert dims == Dims(4, 2, 3) and dims.hosts == 6 and dims.learners == 24 and str(dims) == "4x2x3"


@pytest.mark.parametrize("text", ["4x2", "0x1x1", "axbxc", "4x2x3x1", "", "4 x2x1", "-1x1x1"])
def test_bad_dims(text):
    with pytest.raises(PlanError, match="dims"):
        parse_dims(text)

"""torchvision as a package of each cell (issue #17, item 5), on real packages: ``match`` picks the release made for
the cell's torch, keeps it where it loads with that torch build and removes it again (saying why) where it does not;
the GAN then feeds torchvision's FakeData through the report's transforms, or bare tensors and says why. A pair
made for another torch is "not installable together" and never built; an explicit pin of another build of torch is
an ENV_ERROR naming the missing libraries. The assertions hold for any torch build in the base interpreter: a CPU
torch beside the index's CUDA torchvision (this CI), or a CUDA torch (an unpinned ``pip install torch``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.companion_match import unusable_torchvision
from reprobisect.config.companions import torchvision_series
from tests.conftest import base_python
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.integration.test_triage_real import _harness, _records
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

CELL = ("--deepspeed", "0.19.8", "--lightning", "2.6.6")


@pytest.mark.timeout(1800)
def test_match_keeps_a_torchvision_that_loads_and_the_gan_says_what_it_fed(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    base = base_interpreter(base_python())
    assert base.torch is not None
    out = tmp_path / "out"
    _harness("repro", "gan", *CELL, "--form", "cpu-shim", "--fix", "none", envs=envs_dir, out=out)
    (record,) = _records(out)
    cell = next(p for p in envs_dir.iterdir() if p.name == record.cell["id"])
    log = (envs_dir / f"{cell.name}.build.log").read_text()
    series = torchvision_series(base.torch)
    site = next(cell.glob("lib/python*/site-packages"))
    has_vision = (site / "torchvision").is_dir() or base.torchvision is not None
    if base.torchvision is None:
        assert f"# torchvision: match -> {series}." in log, log[-2000:]
    data = record.config.get("data", "")
    if has_vision:
        assert unusable_torchvision([site, *map(Path, base.site_packages)], base.torch) is None
        assert data == "torchvision FakeData", data
        assert record.versions.get("torchvision", "").startswith(f"{series}.")
    else:  # the index's torchvision was built for another build of this torch (a CUDA one beside a CPU torch)
        assert "# torchvision removed again: torchvision's compiled ops" in log and "lacks" in log
        assert data.startswith("tensors (torchvision not usable: ModuleNotFoundError"), data
        assert "torchvision" not in record.versions
    assert record.outcome in ("PASS", "REPRODUCED", "OTHER_FAILURE"), record.signature  # the run itself ran


def test_a_torchvision_made_for_another_torch_is_not_installable_together(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    done = _harness(
        "matrix", "--repro", "gan", "--form", "cpu-deepspeed", "--fix", "none", *CELL, "--torchvision", "0.20.1",
        envs=envs_dir, out=out,
    )  # fmt: skip
    assert "not installable together" in done.stdout
    (record,) = _records(out)
    assert record.outcome == "ENV_ERROR" and "is not made for torch" in json.dumps(dataclasses.asdict(record))
    assert not any("torchvision-0.20.1" in p.name for p in envs_dir.iterdir())  # never built

import os

import pytest

from tests.harness.kafka import start_pair

LONG_LIVED = {"test_outages.py"}


@pytest.fixture(autouse=True)
def production_jit(request, monkeypatch):
    """The outages' drivers keep the C2 compiler (the class archive only, tests/harness/jvm.py): they run minutes of
    sustained streams and catch up minutes of backlog, where C2's code pays back, as it does in production. The
    other fault tests' drivers live seconds to a minute between kills: there C2 compiling costs more than it gives."""
    if request.node.path.name in LONG_LIVED and os.environ.get("MIRRORD_TEST_FAST_JVM", "1") == "1":
        monkeypatch.setenv("MIRRORD_TEST_FAST_JVM", "cds")


@pytest.fixture(scope="package")
def bounced_pair(tmp_path_factory):
    """A source and a target cluster of the fault campaign's own: its tests stop, kill and restart them."""
    source, target = start_pair(tmp_path_factory.mktemp("faults"))
    yield source, target
    source.destroy()
    target.destroy()

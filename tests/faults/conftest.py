import pytest

from tests.harness.kafka import start_pair


@pytest.fixture(scope="package")
def bounced_pair(tmp_path_factory):
    """A source and a target cluster of the fault campaign's own: its tests stop, kill and restart them."""
    source, target = start_pair(tmp_path_factory.mktemp("faults"))
    yield source, target
    source.destroy()
    target.destroy()

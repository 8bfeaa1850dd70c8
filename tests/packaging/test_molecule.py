"""The Ansible role: ansible-lint clean, and `molecule test` (converge, idempotence, verify) passes.

Molecule boots a Debian container with systemd, installs the .deb with the role, runs two flows as
mirrord@east and mirrord@west against the session's test brokers, converges a second time expecting
no change, and its verify step mirrors records through both flows.
"""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from tests.harness.jvm import packaged_driver_options
from tests.harness.records import create_topic
from tests.packaging.conftest import ROOT, Built, require_root_tools

pytestmark = pytest.mark.system

VENV_BIN = ROOT / ".cache" / "ansible-venv" / "bin"
ROLE = ROOT / "ansible" / "roles" / "mirrord"


@pytest.fixture(scope="module")
def ansible_tools() -> dict[str, str]:
    proc = subprocess.run(["make", "-s", "ansible-venv"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "ANSIBLE_FORCE_COLOR": "0",
            "PY_COLORS": "0", "NO_COLOR": "1"}


def test_role_and_playbooks_are_ansible_lint_clean(ansible_tools: dict[str, str]) -> None:
    proc = subprocess.run(["ansible-lint"], cwd=ROOT / "ansible", env=ansible_tools,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]


def test_molecule_converges_idempotently_and_mirrors_through_both_flows(
        ansible_tools: dict[str, str], deb: Built, kafka_pair) -> None:
    require_root_tools("systemd-nspawn", "nsenter", "debootstrap")
    source, target = kafka_pair
    topic = f"molecule-{uuid.uuid4().hex[:8]}"
    for flow in ("east", "west"):
        create_topic(source.bootstrap, f"{topic}-{flow}", 2)
    env = {**ansible_tools, "MIRRORD_TEST_DEB": str(deb.path), "MIRRORD_TEST_SOURCE": source.bootstrap,
           "MIRRORD_TEST_TARGET": target.bootstrap, "MIRRORD_TEST_TOPIC": topic,
           "MIRRORD_TEST_JAVA_OPTIONS": packaged_driver_options()}
    proc = subprocess.run(["molecule", "test"], cwd=ROLE, env=env, capture_output=True, text=True,
                          timeout=1200, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-12000:]
    assert "[default > idempotence] Executed: Successful" in output, output[-3000:]

# The Ansible role: lint and molecule, with tools from PyPI in a venv of their own.
# Included by the top Makefile.

ANSIBLE_VENV := .cache/ansible-venv
ANSIBLE_PATH := PATH=$(CURDIR)/$(ANSIBLE_VENV)/bin:$$PATH

.PHONY: ansible-venv ansible-lint molecule

$(ANSIBLE_VENV)/.installed: ansible/requirements.txt
	$(PYTHON) -m venv $(ANSIBLE_VENV)
	$(ANSIBLE_VENV)/bin/pip install -q --upgrade pip
	$(ANSIBLE_VENV)/bin/pip install -q -r ansible/requirements.txt
	touch $@

ansible-venv: $(ANSIBLE_VENV)/.installed

# ansible-lint (production profile) over the role, the example playbook and the molecule scenario.
ansible-lint: ansible-venv
	cd ansible && $(ANSIBLE_PATH) ansible-lint

# molecule test of the role in a booted Debian container, against the test brokers (needs root).
molecule: setup system-deps ansible-venv
	$(PY) -m pytest -q tests/packaging/test_molecule.py $(PYTEST_ARGS)

# koordinator-py: the two commands are `make up` and `make test`. Everything they need is installed
# by the targets themselves: Python packages into .venv/, Go-built tools into
# ~/.cache/koordinator-py/<tool>-<version>/ (linked from .bin/).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
KUBECONFIG_LOCAL := .cluster/kubeconfig
KUBECTL := .bin/kubectl --kubeconfig $(KUBECONFIG_LOCAL)
# pytest exits 5 when it collects nothing; that is not a failure of the suite.
define pytest
	$(PY) -m pytest $(1) || { rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected in $(1)"; else exit $$rc; fi; }
endef

.DEFAULT_GOAL := help
.PHONY: help venv tools crds check-crds rbac cluster up down lint unit e2e test clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench]'
	@rm -f $(VENV)/.installed-* && touch $@

venv: $(STAMP) ## create .venv with koordinator-py and its dev tools

tools: ## build kube-apiserver, etcd, kwok, kubectl, helm from Go modules (cached by version)
	bash e2e/toolchain/build.sh

crds: venv ## regenerate crds/ and the chart's crds/ from the pydantic models
	$(PY) -m apis.crdgen

check-crds: venv ## fail if crds/ differs from what the models generate
	$(PY) -m apis.crdgen --check

rbac: venv ## regenerate the chart's koord-scheduler and koord-descheduler RBAC from the rules declared next to each plugin
	$(PY) -m scheduler.rbacgen
	$(PY) -m operators.descheduler.rbacgen

cluster: venv tools ## start the local control plane with KWOK fake nodes (e2e/clusters/dev.yaml)
	$(PY) -m e2e.cluster up

up: cluster ## cluster + CRDs + koord-manager + koord-scheduler + koordlet (simulated) + sample objects, then say what to look at
	$(PY) -m e2e.components start koord-manager
	$(PY) -m e2e.components start koord-scheduler
	$(PY) -m e2e.components start koordlet
	$(PY) -m e2e.samples apply
	@$(PY) -m e2e.samples next-steps

down: ## stop every local cluster and every process it started
	@if [ -x $(PY) ]; then $(PY) -m e2e.cluster down --all; fi

lint: venv ## ruff (lint + format check), mypy --strict, and the layer contracts (.importlinter)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

unit: venv ## unit and property tests (no cluster)
	$(call pytest,tests)

e2e: venv tools ## end-to-end tests against a real kube-apiserver + etcd with KWOK nodes
	$(call pytest,e2e)

test: lint unit e2e ## everything CI runs

clean: down ## remove build outputs (not the tool cache)
	rm -rf .cluster .bin .mypy_cache .ruff_cache .pytest_cache .hypothesis

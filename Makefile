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
REPORTS := .cluster/reports
# pytest exits 5 when it collects nothing; that is not a failure of the suite. $(1): paths and
# options, $(2): the report name (JUnit XML in $(REPORTS)/$(2).xml, and the 40 slowest tests printed).
define pytest
	@mkdir -p $(REPORTS)
	$(PY) -m pytest $(1) --durations=40 --junitxml=$(REPORTS)/$(2).xml || { rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected in $(1)"; else exit $$rc; fi; }
endef
# The fast tier (`make test`) leaves out tests marked `full`; `make test-full` runs every test with
# the full sizes (KOORD_TEST_TIER=full: e2e/tier.py) and five times the Hypothesis examples.
TIER ?= fast
ifeq ($(TIER),full)
export KOORD_TEST_TIER := full
export HYPOTHESIS_PROFILE := full
# five times the examples: the longest property tests take minutes there
TIER_ARGS := --timeout=900
# The real node's files run in a stage of their own, after the rest (e2e-real-node): what they
# prove (batch resources from the host's idle CPU, BE suppression while an LS pod burns) needs the
# host's CPU, which the other workers and the unit tests take on a 2-core machine.
E2E_SELECT := -m "not real_node"
else
export KOORD_TEST_TIER := fast
export HYPOTHESIS_PROFILE := ci
TIER_ARGS := -m "not full"
endif
# `make unit` alone runs two workers; `make test` runs one beside the e2e files (TEST_UNIT_WORKERS):
# the unit tests then end well before the e2e files (374 s against 602 s in a fresh clone), and the
# e2e clusters get the CPU the second worker took, which is what `make test`'s time waits on.
UNIT_WORKERS ?= 2
TEST_UNIT_WORKERS ?= 1
# Each e2e worker runs a control plane of its own (e2e/conftest.py) and whole files (loadfile: a
# file's module fixtures stay on one worker); the scenarios mostly wait on the API server. -v: the
# log says which worker ran each test, in which order (files do not run in alphabetical order).
E2E_WORKERS ?= 2

.DEFAULT_GOAL := help
.PHONY: protos nri-proto up-real real-node-deps real-node-tools real-node-down unit-full e2e-full help venv tools crds check-crds rbac import-contracts cluster up down lint unit e2e e2e-real-node test test-full clean image image-arm64 image-lock

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip uv
	@# uv resolves and installs what pip would, from its cache (pip took 48 s in a fresh clone, uv 17),
	@# compiling the bytecode as pip does: otherwise the first processes of a test run compile it all at once
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -e '.[dev,bench]'
	@rm -f $(VENV)/.installed-* && touch $@

venv: $(STAMP) ## create .venv with koordinator-py and its dev tools

tools: ## build kube-apiserver, etcd, kwok, kubectl, helm from Go modules (cached by version)
	bash e2e/toolchain/build.sh

crds: venv ## regenerate crds/ and the chart's crds/ from the pydantic models
	$(PY) -m apis.crdgen

check-crds: venv ## fail if crds/ differs from what the models generate
	$(PY) -m apis.crdgen --check

protos: venv ## regenerate the generated protobuf code: koordlet/podresources/api/ (the kubelet's api.proto) and koordlet/nri/proto/ (NRI, ttrpc); grpcio-tools, mypy-protobuf
	$(PY) -m koordlet.protogen

rbac: venv ## regenerate the chart's koord-scheduler and koord-descheduler RBAC from the rules declared next to each plugin
	$(PY) -m scheduler.rbacgen
	$(PY) -m operators.descheduler.rbacgen

import-contracts: venv ## regenerate .importlinter's plugins-independent contract from the plugin module list (scheduler/plugins PLUGIN_MODULES)
	$(PY) -m scheduler.plugincontract

cluster: venv tools ## start the local control plane with KWOK fake nodes (e2e/clusters/dev.yaml)
	$(PY) -m e2e.cluster up

up: cluster ## cluster + CRDs + koord-manager + koord-scheduler + koordlet (simulated) + sample objects, then say what to look at
	$(PY) -m e2e.components start koord-manager
	$(PY) -m e2e.components start koord-scheduler
	$(PY) -m e2e.components start koordlet
	$(PY) -m e2e.samples apply
	@$(PY) -m e2e.samples next-steps

up-real: real-node-deps real-node-tools image ## cluster + a real kubelet node + our image imported + `helm install` of the chart on it (docs/real-node.md)
	$(PY) -m e2e.realnode up --chart

down: ## stop every local cluster and every process it started (a real node first)
	@if [ -x $(PY) ]; then $(PY) -m e2e.cluster down --all; fi

# The real node (docs/real-node.md): a kubelet over containerd beside the KWOK nodes. Host packages
# from Debian; kubelet, kube-proxy, containerd and pause from Go modules (cached like the others).
REAL_NODE_PACKAGES := runc containernetworking-plugins iptables conntrack ethtool socat umoci busybox-static
real-node-deps: ## apt-get install what the real node needs from Debian (runc, CNI plugins, iptables, umoci, ...)
	@missing=$$(for p in $(REAL_NODE_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "real-node-deps: all installed"; fi

real-node-tools: ## build kubelet, kube-proxy, containerd (+shim, ctr) and pause as well as the control-plane tools
	bash e2e/toolchain/build.sh real-node

real-node-down: venv ## stop the real node of the default cluster and take back what it put on the host
	$(PY) -m e2e.realnode down

nri-proto: protos ## the NRI modules are among `make protos`' (koordlet/protogen.py)

lint: venv ## ruff (lint + format check), mypy --strict, and the layer contracts (.importlinter)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

unit: venv ## unit and property tests (no cluster), in parallel
	$(call pytest,tests -n $(UNIT_WORKERS) $(TIER_ARGS),unit)

e2e: venv tools real-node-deps real-node-tools ## end-to-end tests against a real kube-apiserver + etcd with KWOK nodes, a cluster per worker
	$(call pytest,e2e -v -n $(E2E_WORKERS) --dist loadfile $(TIER_ARGS) $(E2E_SELECT),e2e)

e2e-real-node: venv tools real-node-deps real-node-tools ## the real node's e2e files alone, one after the other (`make test-full` runs them last)
	$(call pytest,e2e -v -m real_node $(TIER_ARGS),e2e-real-node)

# lint and the unit tests (two workers) run beside the e2e files, on the CPU the clusters leave.
test: venv tools real-node-deps real-node-tools ## everything CI runs (the fast tier): lint, unit and e2e side by side, timed
	UNIT_WORKERS=$(TEST_UNIT_WORKERS) $(PY) -m e2e.stages lint+unit+e2e

test-full: venv tools real-node-deps real-node-tools ## the full tier: every test, full sizes (chaos seeds, parity list, smokes), hypothesis `full`
	$(PY) -m e2e.stages lint+unit-full+e2e-full e2e-real-node-full

unit-full e2e-full e2e-real-node-full: %-full:
	@$(MAKE) --no-print-directory $* TIER=full

# One image runs every component (docs/image.md); ARCH=arm64 cross-builds through qemu-user.
ARCH ?= amd64
image: venv ## the OCI image of every component from Debian packages + pinned wheels (~/.cache/koordinator-py/images/; ARCH=arm64)
	PY=$(PY) bash e2e/image/build.sh $(ARCH)

image-arm64: ## the arm64 image, cross-built with qemu-user (slow: not part of `make image`)
	@$(MAKE) --no-print-directory image ARCH=arm64

image-lock: venv ## rewrite e2e/image/requirements.lock from the runtime dependencies installed in .venv
	$(PY) -m e2e.image.inputs lock

clean: down ## remove build outputs (not the tool cache)
	rm -rf .cluster .bin .mypy_cache .ruff_cache .pytest_cache .hypothesis

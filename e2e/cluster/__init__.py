"""A real local Kubernetes control plane for `make up` and the e2e tests.

kube-apiserver, etcd, kube-controller-manager and the KWOK controller, built from Go modules by
``e2e/toolchain/build.sh`` and started by ``kwokctl --runtime binary`` (no containers, no
downloads); fake nodes come from a declarative cluster description (``description.py``).
"""

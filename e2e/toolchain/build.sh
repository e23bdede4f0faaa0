#!/usr/bin/env bash
# Builds the control-plane tools (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# etcd, kwok, kwokctl, helm) from Go modules into ~/.cache/koordinator-py/<tool>-<version>/ and
# links them into .bin/ at the repository root. A tool whose cached binary already reports the
# pinned version is not rebuilt, so a warm run takes well under a second.
# `build.sh real-node` (or KOORD_REAL_NODE=1) also builds what the real node needs (e2e/realnode):
# kubelet and kube-proxy from the same Kubernetes modules, containerd 2.x with its runc shim and
# ctr, and the pause program; the KWOK path (`make tools`) never builds them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache="${KOORD_PY_CACHE:-$HOME/.cache/koordinator-py}"
bin="$root/.bin"
mkdir -p "$cache" "$bin"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-modcacherw

log() { printf '[toolchain] %s\n' "$*" >&2; }
has_version() { [ -x "$1" ] && "$1" "${@:3}" 2>/dev/null | grep -q -- "$2"; }
link() { for f in "$@"; do ln -sfn "$f" "$bin/$(basename "$f")"; done; }

k8s_out="$cache/k8s-$K8S_VERSION"
if ! has_version "$k8s_out/kube-apiserver" "$K8S_VERSION" --version \
   || ! [ -x "$k8s_out/kubectl" ] || ! [ -x "$k8s_out/kube-controller-manager" ] || ! [ -x "$k8s_out/kube-scheduler" ]; then
  log "building Kubernetes $K8S_VERSION (cold: 20-40 min on 2 cores)"
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  mkdir -p "$k8s_out.tmp"
  (cd "$here/k8s" && go build -trimpath -ldflags "$ldf" -o "$k8s_out.tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
  rm -rf "$k8s_out" && mv "$k8s_out.tmp" "$k8s_out"
fi
link "$k8s_out/kube-apiserver" "$k8s_out/kube-controller-manager" "$k8s_out/kube-scheduler" "$k8s_out/kubectl"

etcd_out="$cache/etcd-$ETCD_VERSION"
if ! has_version "$etcd_out/etcd" "${ETCD_VERSION#v}" --version; then
  log "building etcd $ETCD_VERSION"
  mkdir -p "$etcd_out"
  (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$etcd_out/etcd" go.etcd.io/etcd/server/v3)
fi
link "$etcd_out/etcd"

kwok_out="$cache/kwok-$KWOK_VERSION"
if ! [ -x "$kwok_out/kwok" ] || ! [ -x "$kwok_out/kwokctl" ]; then
  log "building kwok $KWOK_VERSION"
  mkdir -p "$kwok_out"
  GOBIN="$kwok_out" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
fi
link "$kwok_out/kwok" "$kwok_out/kwokctl"
# The stock pod/node Stages ship inside the kwok module; keep a copy beside the binaries.
if ! [ -f "$kwok_out/stages.yaml" ]; then
  src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  if ! [ -d "$src" ]; then (cd "$(mktemp -d)" && go mod download -x "sigs.k8s.io/kwok@$KWOK_VERSION" >/dev/null 2>&1 || true); fi
  { for f in "$src"/node/fast/*.yaml "$src"/pod/fast/*.yaml; do
      case "$f" in */kustomization.yaml) continue;; esac
      echo '---'; cat "$f"; done; } > "$kwok_out/stages.yaml.tmp"
  mv "$kwok_out/stages.yaml.tmp" "$kwok_out/stages.yaml"
fi
link "$kwok_out/stages.yaml"

helm_out="$cache/helm-$HELM_VERSION"
if ! has_version "$helm_out/helm" "$HELM_VERSION" version --short; then
  log "building helm $HELM_VERSION"
  mkdir -p "$helm_out"
  GOBIN="$helm_out" go install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=36 \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=36" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
link "$helm_out/helm"
if [ "${1:-}" = real-node ] || [ "${KOORD_REAL_NODE:-}" = 1 ]; then
  node_out="$cache/kubelet-$K8S_VERSION"
  if ! has_version "$node_out/kubelet" "$K8S_VERSION" --version || ! [ -x "$node_out/kube-proxy" ]; then
    log "building kubelet and kube-proxy $K8S_VERSION (2 min on 2 cores after the control plane, whose packages they share)"
    minor=$(echo "$K8S_VERSION" | cut -d. -f2)
    ldf="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    done
    mkdir -p "$node_out.tmp"
    (cd "$here/k8s" && go build -trimpath -ldflags "$ldf" -o "$node_out.tmp/" \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
    rm -rf "$node_out" && mv "$node_out.tmp" "$node_out"
  fi
  link "$node_out/kubelet" "$node_out/kube-proxy"

  ctd_out="$cache/containerd-$CONTAINERD_VERSION"
  if ! has_version "$ctd_out/containerd" "$CONTAINERD_VERSION" --version \
     || ! [ -x "$ctd_out/containerd-shim-runc-v2" ] || ! [ -x "$ctd_out/ctr" ]; then
    log "building containerd $CONTAINERD_VERSION (containerd, containerd-shim-runc-v2, ctr)"
    mkdir -p "$ctd_out.tmp"
    GOBIN="$ctd_out.tmp" go install -trimpath -tags "no_btrfs no_devmapper no_zfs" \
      -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION"
    rm -rf "$ctd_out" && mv "$ctd_out.tmp" "$ctd_out"
  fi
  link "$ctd_out/containerd" "$ctd_out/containerd-shim-runc-v2" "$ctd_out/ctr"

  # The sandbox ("pause") program: a few lines of Go in this repository, rebuilt when they change.
  pause_src="$root/e2e/realnode/pause/main.go"
  pause_out="$cache/pause-$(cksum "$pause_src" | cut -d' ' -f1)"
  if ! [ -x "$pause_out/pause" ]; then
    log "building pause"
    mkdir -p "$pause_out"
    (cd "$root/e2e/realnode/pause" && go build -trimpath -ldflags "-s -w" -o "$pause_out/pause" .)
  fi
  link "$pause_out/pause"
fi
log "tools ready in $bin"

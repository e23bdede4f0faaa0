#!/usr/bin/env bash
# `make image [ARCH=arm64]`: the OCI image of every koordinator-py component, from this repository,
# Debian packages and PyPI wheels alone (no base image is pulled). docs/image.md says how and why.
#
#   e2e/image/build.sh [amd64|arm64]
#
# Writes ~/.cache/koordinator-py/images/koordinator-py-<version>-<arch>/ (OCI image layout) and
# koordinator-py-<version>-<arch>.oci.tar beside it (the same as an OCI archive), named
# `python -m e2e.image.name` (localhost/koordinator-py:<version>) for `ctr images import`.
# Nothing is rebuilt when the inputs (the wheel's sources, the lock, these scripts, the arch) are
# those of the archive already there: a warm run takes seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
arch=${1:-amd64}
case "$arch" in
  amd64) pyarch=x86_64 ;;
  arm64) pyarch=aarch64 ;;
  *) echo "usage: $0 [amd64|arm64]" >&2; exit 2 ;;
esac
PY=${PY:-$root/.venv/bin/python}
log() { printf '[image] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
cd "$root"

repository=$("$PY" -m e2e.image.name repository)
tag=$("$PY" -m e2e.image.name tag)
reference="$repository:$tag"
out=$("$PY" -m e2e.image.name dir)  # the tool cache: a fresh clone of the same sources reuses it
name="koordinator-py-$tag-$arch"
layout="$out/$name"
archive="$out/$name.oci.tar"
stamp="$out/$name.inputs"
mkdir -p "$out"

report() {
  local packed unpacked
  packed=$(stat -c %s "$archive")
  unpacked=$(cat "$out/$name.rootfs-bytes")
  log "$reference ($arch): $archive"
  log "size: $((packed / 1000000)) MB compressed (OCI archive), $((unpacked / 1000000)) MB unpacked (root file system)"
  log "load it on a node: ctr -n k8s.io images import $archive"
}

# The tools, from Debian, installed when missing (docs/image.md: why these).
need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v umoci >/dev/null || need+=(umoci)
if [ "$arch" != amd64 ] && [ "$(dpkg --print-architecture)" != "$arch" ]; then
  [ -e /usr/libexec/qemu-binfmt/aarch64-binfmt-P ] || [ -e /usr/bin/qemu-aarch64-static ] || need+=(qemu-user-static)
  command -v update-binfmts >/dev/null || need+=(binfmt-support)
fi
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "missing ${need[*]}: install them (apt-get install ${need[*]}) or run as root"
  log "installing ${need[*]} from Debian"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ "$arch" != amd64 ] && [ "$(dpkg --print-architecture)" != "$arch" ]; then
  # qemu-user-static registers its interpreters with the F flag (the chroot needs no copy of qemu).
  [ -e /proc/sys/fs/binfmt_misc/status ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
    || die "binfmt_misc cannot be mounted here: no $arch binaries can run, so no $arch image (docs/image.md)"
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64 \
    || die "qemu-aarch64 cannot be registered with binfmt_misc here: no $arch image (docs/image.md)"
fi
[ "$(id -u)" = 0 ] || die "mmdebstrap builds the root file system as root here (chroot into it): run as root"

# The lock is what the image installs; a virtualenv that has moved on since is worth a word only.
"$PY" -m e2e.image.inputs check 2>/dev/null || log "note: .venv differs from e2e/image/requirements.lock (\`make image-lock\` rewrites it)"
pip_version=$("$PY" -m pip --version | cut -d' ' -f2)
digest=$({
  "$PY" -m e2e.image.inputs digest
  sha256sum "$here/build.sh" "$here/customize.sh" "$here/requirements.lock" | cut -d' ' -f1
  echo "$arch pip==$pip_version"
} | sha256sum | cut -d' ' -f1)
if [ -f "$archive" ] && [ -d "$layout" ] && [ -f "$out/$name.rootfs-bytes" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$digest" ]; then
  log "up to date (inputs $digest)"
  report
  exit 0
fi

work=$(mktemp -d "$out/.build-$arch-XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
wheels="$work/wheels"
mkdir -p "$wheels"
# Times in the image: the last commit's, so that a rebuild of the same commit differs little.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
export SOURCE_DATE_EPOCH

log "wheel of koordinator-py $tag (the components' packages: the e2e harness stays out of the image)"
src="$work/src"
mkdir -p "$src"
"$PY" -m e2e.image.inputs files | tar --null -T - -cf - | tar -xf - -C "$src"
"$PY" -m pip wheel -q --no-deps --disable-pip-version-check -w "$wheels" "$src"
log "pinned dependencies for CPython 3.11 on linux/$arch (binary wheels only)"
platforms=()
for minor in $(seq 36 -1 17); do platforms+=(--platform "manylinux_2_${minor}_$pyarch"); done
platforms+=(--platform "manylinux2014_$pyarch")
"$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: "${platforms[@]}" \
  --python-version 3.11 --implementation cp -d "$wheels" -r "$here/requirements.lock" "pip==$pip_version"
cp "$here/requirements.lock" "$wheels/"

log "root file system: Debian bookworm ($arch), python3, ca-certificates, libstdc++6"
# essential: no apt in the image; the documentation, manual pages and translations are not unpacked.
mmdebstrap --quiet --variant=essential --arch="$arch" --include=python3,ca-certificates,libstdc++6 \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --customize-hook="sh '$here/customize.sh' \"\$1\" '$wheels'" \
  bookworm - | tar --delete --wildcards './dev/?*' >"$work/rootfs.tar"
rootfs_bytes=$(stat -c %s "$work/rootfs.tar")

log "OCI image $reference"
rm -rf "$layout" "$archive" "$stamp"
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
umoci init --layout "$layout.tmp"
umoci new --image "$layout.tmp:$tag"
umoci raw add-layer --image "$layout.tmp:$tag" --history.created "$created" \
  --history.created_by "e2e/image/build.sh (mmdebstrap bookworm, koordinator-py $tag)" "$work/rootfs.tar"
umoci config --image "$layout.tmp:$tag" --no-history --created "$created" --os linux --architecture "$arch" \
  --author "koordinator-py" --config.user 65532:65532 --config.workingdir /home/nonroot \
  --config.env "PATH=/opt/koordinator-py/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --config.env PYTHONUNBUFFERED=1 --config.env PYTHONDONTWRITEBYTECODE=1 \
  --config.cmd koord-scheduler --config.cmd --help \
  --config.label "org.opencontainers.image.title=koordinator-py" \
  --config.label "org.opencontainers.image.version=$tag" \
  --manifest.annotation "org.opencontainers.image.version=$tag"
umoci gc --layout "$layout.tmp"
# containerd (`ctr images import`, `kind load image-archive`) names an image after the index's
# io.containerd.image.name; org.opencontainers.image.ref.name stays the tag, as in any OCI layout.
"$PY" - "$layout.tmp/index.json" "$reference" <<'PYEOF'
import json, sys
path, reference = sys.argv[1], sys.argv[2]
with open(path) as f:
    index = json.load(f)
for manifest in index["manifests"]:
    manifest.setdefault("annotations", {})["io.containerd.image.name"] = reference
with open(path, "w") as f:
    json.dump(index, f, separators=(",", ":"))
PYEOF
mv "$layout.tmp" "$layout"
tar -C "$layout" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  -cf "$archive.tmp" oci-layout index.json blobs
mv "$archive.tmp" "$archive"
echo "$rootfs_bytes" >"$out/$name.rootfs-bytes"
echo "$digest" >"$stamp"
report

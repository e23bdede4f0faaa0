#!/bin/sh
# mmdebstrap --customize-hook of e2e/image/build.sh: $1 is the root file system being built, $2
# the host folder of the wheels (ours, the pinned dependencies and the pip that installs them).
# Installs koordinator-py into the venv /opt/koordinator-py, adds the non-root user and removes
# what a running component never needs. Runs on the host: `chroot` (through qemu-user for arm64)
# is what runs inside.
set -eu
rootfs=$1
wheels=$2
# A clean environment in the chroot: none of the host's PIP_* or PYTHON* settings.
in_root() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 chroot "$rootfs" "$@"; }
mkdir -p "$rootfs/tmp/wheels"
cp "$wheels"/*.whl "$wheels/requirements.lock" "$rootfs/tmp/wheels/"
pip=$(cd "$rootfs/tmp/wheels" && ls pip-*.whl)
ours=$(cd "$rootfs/tmp/wheels" && ls koordinator_py-*.whl)
# --without-pip: Debian's ensurepip is a separate package (python3-venv); pip runs from its wheel
# and is not left in the image.
in_root /usr/bin/python3 -m venv --without-pip /opt/koordinator-py
in_root /opt/koordinator-py/bin/python "/tmp/wheels/$pip/pip" install \
  --no-index --find-links /tmp/wheels --no-cache-dir --disable-pip-version-check --no-warn-script-location -q \
  --require-virtualenv -r /tmp/wheels/requirements.lock "/tmp/wheels/$ours"
# pip check: every requirement of every installed distribution is met, without pip in the image.
in_root /opt/koordinator-py/bin/python "/tmp/wheels/$pip/pip" check --disable-pip-version-check
rm -rf "$rootfs/tmp/wheels"
# The user the components run as: the image config says 65532:65532 (build.sh).
echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin' >>"$rootfs/etc/passwd"
echo 'nonroot:x:65532:' >>"$rootfs/etc/group"
echo 'nonroot:!*:0::::::' >>"$rootfs/etc/shadow"
mkdir -p "$rootfs/home/nonroot"
chown 65532:65532 "$rootfs/home/nonroot"
chmod 0750 "$rootfs/home/nonroot"
# Caches and logs of the build (mmdebstrap removes the apt lists and archives itself).
rm -rf "$rootfs/root/.cache" "$rootfs"/var/log/apt/* "$rootfs"/var/log/dpkg.log \
  "$rootfs"/var/log/alternatives.log "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old

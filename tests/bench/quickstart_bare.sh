#!/usr/bin/env bash
# The quick start as a new user meets it, timed: a bare Debian 12 root made by mmdebstrap from
# this machine's Debian mirror (minbase plus git, nothing of ours), a `git clone` of this
# repository inside it, and scripts/quickstart.sh run there as root with a cold ccache, until
# fabricctl's first answer. The chroot shares this machine's cores, kernel and network, so the
# package installs are real downloads and the build uses the same 2 cores a user's machine has.
#   usage: tests/bench/quickstart_bare.sh [WORKDIR]   (default /var/tmp/fabric-quickstart-bare)
# Root only (mmdebstrap, chroot, mounts); the bare root's tarball is kept in WORKDIR for reruns.
# Figures: docs/BENCHMARKS.md ("The quick start and CI").
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/var/tmp/fabric-quickstart-bare}
if [[ $(id -u) -ne 0 ]]; then
  echo "quickstart_bare: needs root (mmdebstrap, chroot)" >&2
  exit 77
fi
command -v mmdebstrap >/dev/null || {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
}
mkdir -p "$work"
tarball=$work/bookworm-minbase-git.tar
mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
if [[ ! -s $tarball ]]; then
  echo "== making a bare Debian 12 root ($mirror; not counted)"
  mmdebstrap --quiet --variant=minbase --include=git,ca-certificates bookworm "$tarball" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main"
fi

root=$work/root
cleanup() {
  for m in dev/pts dev proc sys; do umount -l "$root/$m" 2>/dev/null || true; done
}
trap cleanup EXIT
cleanup
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" -xf "$tarball"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"

# From here on is what the user waits for: the clone, then the quick start.
start=$SECONDS
git clone -q "file://$repo" "$root/src"
clone_s=$((SECONDS - start))
echo "== git clone: ${clone_s} s"
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
  bash -c 'cd /src && scripts/quickstart.sh' </dev/null
echo "== from git clone to the last answer: $((SECONDS - start)) s on $(nproc) cores"

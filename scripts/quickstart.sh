#!/usr/bin/env bash
# Quick start: installs what is needed, builds, and runs fabricctl's main views. On a machine
# without RDMA hardware it runs on the bundled example host (tests/hosts: roce-9port, the RoCE
# GPU host described in the README), generated into the build tree.
#   usage: scripts/quickstart.sh [EXAMPLE_HOST]   (fabric-mkhost --list names the hosts)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FABRIC_BUILD_DIR:-build}

scripts/install-deps.sh
echo "== building fabricctl in $build (log: $build/quickstart-build.log)"
mkdir -p "$build"
if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$build" -j"$(nproc)" --target fabricctl fabric-mkhost; } \
     >"$build/quickstart-build.log" 2>&1; then
  tail -n 40 "$build/quickstart-build.log"
  echo "quickstart: build failed (full log: $build/quickstart-build.log)" >&2
  exit 1
fi

fabricctl=("$build/agent/fabricctl/fabricctl")
if [[ -z "${1:-}" ]] && [[ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]]; then
  echo "== this host has RDMA devices: discovering /sys"
else
  host=${1:-roce-9port}
  root="$build/example-hosts/$host"
  rm -rf "$root"
  "$build/tests/hosts/fabric-mkhost" "$host" "$root"
  echo "== no RDMA hardware here: using the bundled example host '$host' ($root)"
  fabricctl+=("--sysfs=$root/sys" "--procfs=$root/proc")
fi

run() {
  echo
  echo "\$ fabricctl $*"
  "${fabricctl[0]}" "$@" "${fabricctl[@]:1}"
}
run inventory
run topo
run select --gpus=all
run env --gpus=all

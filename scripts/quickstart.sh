#!/usr/bin/env bash
# Quick start: installs what is needed, builds, starts fabric-agent and asks it for fabricctl's
# main views. On a machine without RDMA hardware the agent runs on the bundled example host
# (tests/hosts: roce-9port, the RoCE GPU host described in tests/hosts/README.md), generated into
# the build tree. From a terminal the agent then keeps serving until Ctrl-C; otherwise it stops.
#   usage: scripts/quickstart.sh [EXAMPLE_HOST]   (fabric-mkhost --list names the hosts)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FABRIC_BUILD_DIR:-build}

scripts/install-deps.sh
echo "== building fabric-agent and fabricctl in $build (log: $build/quickstart-build.log)"
mkdir -p "$build"
if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$build" -j"$(nproc)" --target fabric-agent fabricctl fabric-mkhost; } \
     >"$build/quickstart-build.log" 2>&1; then
  tail -n 40 "$build/quickstart-build.log"
  echo "quickstart: build failed (full log: $build/quickstart-build.log)" >&2
  exit 1
fi

agent_args=()
if [[ -z "${1:-}" ]] && [[ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]]; then
  echo "== this host has RDMA devices: discovering /sys"
else
  host=${1:-roce-9port}
  root="$build/example-hosts/$host"
  rm -rf "$root"
  "$build/tests/hosts/fabric-mkhost" "$host" "$root"
  echo "== no RDMA hardware here: using the bundled example host '$host' ($root)"
  agent_args+=("--sysfs=$root/sys" "--procfs=$root/proc")
fi

socket="$(pwd)/$build/run/agent.sock"
echo "== starting fabric-agent --socket=$socket ${agent_args[*]}"
"$build/agent/daemon/fabric-agent" --socket="$socket" "${agent_args[@]}" &
agent=$!
trap 'kill -TERM $agent 2>/dev/null; wait $agent 2>/dev/null || true' EXIT
ctl() { "$build/agent/fabricctl/fabricctl" "$@" --target="unix://$socket"; }
for _ in $(seq 100); do
  ctl health --liveness >/dev/null 2>&1 && break
  kill -0 $agent 2>/dev/null || { echo "quickstart: fabric-agent exited" >&2; exit 1; }
  sleep 0.1
done

run() {
  echo
  echo "\$ fabricctl $* --target=unix://$socket"
  ctl "$@" || echo "(exit $?)"
}
run inventory
run topo
run select --gpus=all
run env --gpus=all
run health

if [[ -t 0 ]]; then
  echo
  echo "== fabric-agent is serving at unix://$socket (pid $agent); Ctrl-C stops it"
  wait $agent
fi

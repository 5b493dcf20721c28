#!/usr/bin/env bash
# Quick start: installs what is needed, builds, starts fabric-agent and asks it for fabricctl's
# main views. On a machine without RDMA hardware the agent runs on the bundled example host
# (tests/hosts: roce-9port, the RoCE GPU host described in tests/hosts/README.md), generated into
# the build tree. From a terminal the agent then keeps serving until Ctrl-C; otherwise it stops.
#   usage: scripts/quickstart.sh [EXAMPLE_HOST]   (fabric-mkhost --list names the hosts)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FABRIC_BUILD_DIR:-build}

# Each phase's wall time, said as it ends and together at the end.
phases=()
phase_start=$SECONDS
phase() {  # name: the phase that just ended
  phases+=("$(printf '%5ds  %s' $((SECONDS - phase_start)) "$1")")
  echo "   ($1: $((SECONDS - phase_start)) s)"
  phase_start=$SECONDS
}

# Only what building and running need; the tests' packages come with scripts/test.sh.
scripts/install-deps.sh --build
phase "install packages"

# clang with precompiled headers, -O1, Ninja and ccache (scripts/build-env.sh), the three
# binaries this script runs and nothing else (no tests): 211 s on a bare 2-core machine against
# GCC -O3's 9 minutes (docs/BENCHMARKS.md).
source scripts/build-env.sh
fresh_tree "$build"
echo "== building fabric-agent, fabricctl and fabric-mkhost in $build (log: $build/quickstart-build.log)"
mkdir -p "$build"
if ! { CC=clang CXX=clang++ cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
         "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" \
         -DFABRIC_TESTS=OFF "${launcher[@]}" &&
       cmake --build "$build" -j"$(nproc)" --target fabric-agent fabricctl fabric-mkhost; } \
     >"$build/quickstart-build.log" 2>&1; then
  tail -n 40 "$build/quickstart-build.log"
  echo "quickstart: build failed (full log: $build/quickstart-build.log)" >&2
  exit 1
fi
phase "configure and build"

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

phase "start the agent (first answer)"

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
phase "fabricctl's views"

echo
echo "== quick start: $SECONDS s in all"
printf '%s\n' "${phases[@]}"

if [[ -t 0 ]]; then
  echo
  echo "== fabric-agent is serving at unix://$socket (pid $agent); Ctrl-C stops it"
  wait $agent
fi

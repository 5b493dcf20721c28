#!/usr/bin/env bash
# Installs what building, running and testing fabric-agent needs, from Debian 12 packages only.
# Idempotent: packages already present are not reinstalled. Run as root (or with sudo).
set -euo pipefail

packages=(
  # build
  build-essential cmake pkg-config git
  # the host model and (later) the API
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc libabsl-dev
  # RDMA, netlink, systemd
  libibverbs-dev librdmacm-dev rdma-core ibverbs-utils ibverbs-providers perftest
  # fabric-probe's NUMA placement, as perftest's (libnuma)
  libnuma-dev
  # HMAC-SHA256 of the probe responder's shared secret (libcrypto)
  libssl-dev
  libnl-3-dev libnl-route-3-dev libsystemd-dev
  # pod routing system test: real ARP requests from the far side of a bridge
  arping
  # command line
  libcli11-dev
  # the Prometheus metrics endpoint (HTTP)
  libmicrohttpd-dev
  # the CNI plugin (JSON) and a real runtime driving it in tests
  nlohmann-json3-dev podman runc containernetworking-plugins
  # tests, benchmarks, fuzzing, formatting
  googletest libgtest-dev libgmock-dev libbenchmark-dev clang clang-format libclang-rt-14-dev
  # rebuilds of unchanged sources (CI clones share the cache), line coverage of the tests
  ccache gcovr
  # the linker (lld: minutes off each build; cmake/FabricHelpers.cmake)
  lld
  python3 python3-grpcio python3-protobuf python3-yaml python3-prometheus-client iproute2 systemd
  # LLDP neighbour system test: lldpd is the switch (the test starts its own; the service may be off)
  lldpd
  # directed-route SMPs to the InfiniBand node behind a port (agent/fabric/neighbors)
  libibumad-dev
  # vendor and device names from the PCI ID database (fabricctl's tables)
  libpci-dev pci.ids
  # Soft-RoCE VM rig (tests/vm)
  qemu-system-x86 busybox-static cpio kmod
  # the SPANK plugin (slurm/spank.h) and its system test: a real one-node Slurm cluster
  slurmctld slurmd slurm-client munge libslurm-dev
)

if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then exec sudo -E "$0" "$@"; fi
  echo "install-deps: run as root (apt-get needs it)" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Installs what building, running and testing fabric-agent needs, from Debian 12 packages only.
# Idempotent: packages already present are not reinstalled. Run as root (or with sudo).
#   usage: scripts/install-deps.sh [--build]   (--build: only what building and running need)
set -euo pipefail

# What building the binaries and running the agent need (the quick start: --build).
build_packages=(
  build-essential cmake ninja-build pkg-config
  # CPack's DEB generator reads the binaries with file (cmake --build BUILD --target fabric_debs)
  file
  # clang with precompiled headers compiles our gRPC-heavy files in about half GCC's time (the
  # quick start and the ASan build); lld links three times faster than ld.bfd; ccache
  clang lld ccache
  # the host model and the API
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc libabsl-dev
  # RDMA, netlink, systemd
  libibverbs-dev librdmacm-dev ibverbs-providers libnl-3-dev libnl-route-3-dev libsystemd-dev
  # fabric-probe's NUMA placement, as perftest's (libnuma)
  libnuma-dev
  # HMAC-SHA256 of the probe responder's shared secret (libcrypto)
  libssl-dev
  # command line; the Prometheus metrics endpoint (HTTP); the CNI plugin's JSON
  libcli11-dev libmicrohttpd-dev nlohmann-json3-dev
  # the Kubernetes API server (the DRA driver): HTTPS calls, a kubeconfig file's YAML
  libcurl4-openssl-dev libyaml-cpp-dev
  # directed-route SMPs to the InfiniBand node behind a port (agent/fabric/neighbors)
  libibumad-dev
  # vendor and device names from the PCI ID database (fabricctl's tables)
  libpci-dev pci.ids
  # NCCL topology files, the XML cloud VM shapes publish (agent/inventory/topology/nccl_topo.h)
  libtinyxml2-dev
)
# What the tests add (scripts/test.sh): the default.
test_packages=(
  git rdma-core ibverbs-utils perftest
  # pod routing system test: real ARP requests from the far side of a bridge
  arping
  # a real runtime driving the CNI plugin in tests
  podman runc containernetworking-plugins
  # tests, benchmarks, fuzzing, formatting
  googletest libgtest-dev libgmock-dev libbenchmark-dev clang-format libclang-rt-14-dev
  # line coverage of the tests
  gcovr
  python3 python3-grpcio python3-protobuf python3-yaml python3-prometheus-client iproute2 systemd
  # the tests' Kubernetes API server validates what the DRA driver writes against the API's schema
  python3-jsonschema
  # LLDP neighbour system test: lldpd is the switch (the test starts its own; the service may be off)
  lldpd
  # the Debian packages' install test (a bare Debian 12 root) and their check
  mmdebstrap lintian
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

packages=("${build_packages[@]}")
case "${1:-}" in
  --build) ;;
  "") packages+=("${test_packages[@]}") ;;
  *) echo "usage: $0 [--build]" >&2; exit 2 ;;
esac

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

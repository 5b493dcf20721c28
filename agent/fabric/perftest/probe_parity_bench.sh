#!/bin/bash
# probe_parity_bench: fabric-probe --perftest against stock perftest as the client of the same
# stock ib_write_bw server, same flags, interleaved (perftest, ours, perftest, ours, ...); prints
# each run's BW average, the medians and their ratio (goal: 1.00 +/- 0.03). Runs on a host with an
# RDMA device and perftest, or in the Soft-RoCE rig:
#
#   tests/vm/rig.sh run --timeout 900 -- agent/fabric/perftest/probe_parity_bench.sh \
#     build/agent/fabric/probes/fabric-probe
#
# Environment: ROUNDS (5), SIZE (65536), ITERS (1000), DEV (FABRIC_VM_RDMA_DEV or the first
# device), PEER (the server's address; default the VM's own). Use a release build: ASan slows
# the posting loop and so the figures.
set -uo pipefail

probe="${1:?usage: probe_parity_bench.sh FABRIC_PROBE}"
rounds="${ROUNDS:-5}"
size="${SIZE:-65536}"
iters="${ITERS:-1000}"
dev="${DEV:-${FABRIC_VM_RDMA_DEV:-$(ibv_devices 2>/dev/null | awk 'NR > 2 { print $1; exit }')}}"
ip="${PEER:-${FABRIC_VM_IP:-127.0.0.1}}"
work="${FABRIC_VM_OUT:-$(mktemp -d)}"
port=18515

listening() { [[ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]]; }
# One run: a stock server and CLIENT... as the client; prints the client's BW average (MB/s).
run() {
  timeout 300 ib_write_bw -d "$dev" -p "$port" -s "$size" -n "$iters" -F >"$work/server.out" 2>&1 &
  local spid=$! i
  for ((i = 0; i < 50; i++)); do listening "$port" && break; sleep 0.1; done
  timeout 300 "$@" -d "$dev" -p "$port" -s "$size" -n "$iters" >"$work/client.out" 2>&1
  local rc=$?
  wait "$spid"
  ((rc == 0)) || { cat "$work/client.out" >&2; return 1; }
  grep -A1 '#bytes' "$work/client.out" | tail -n1 | awk '{ print $4 }'
}

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

theirs=() ours=()
for ((r = 1; r <= rounds; r++)); do
  t=$(run ib_write_bw -F "$ip") || exit 1
  o=$(run "$probe" write_bw "$ip" --perftest --retry 10) || exit 1
  theirs+=("$t")
  ours+=("$o")
  echo "round $r: perftest $t MB/s, fabric-probe $o MB/s"
done
mt=$(printf '%s\n' "${theirs[@]}" | median)
mo=$(printf '%s\n' "${ours[@]}" | median)
echo "write_bw -s $size -n $iters on $dev, $rounds pairs: median perftest $mt MB/s," \
  "fabric-probe $mo MB/s, ratio $(awk -v a="$mo" -v b="$mt" 'BEGIN { printf "%.3f", a / b }')"
echo "write_lat -s 2: not measured (fabric-probe --perftest runs write_bw only so far)"

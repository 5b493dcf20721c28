#!/bin/bash
# probe_parity_bench: fabric-probe --perftest against stock perftest as the client of the same
# stock ib_write_bw server, same flags, interleaved (perftest, ours, perftest, ours, ...); prints
# each run's BW average (write_bw) and typical latency (write_lat), the medians and their ratios
# (goal: 1.00 +/- 0.03). Runs on a host with an
# RDMA device and perftest, or in the Soft-RoCE rig:
#
#   tests/vm/rig.sh run --timeout 900 -- agent/fabric/perftest/probe_parity_bench.sh \
#     build/agent/fabric/probe_cli/fabric-probe
#
# Environment: ROUNDS (5), SIZE (65536), ITERS (1000), LAT_SIZE (2), LAT_ITERS (300), DEV
# (FABRIC_VM_RDMA_DEV or the first device), PEER (the server's address; default the VM's own). Use
# a release build: ASan slows the posting loop and so the figures. In one VM both ends spin on its
# one CPU: latency there is the scheduler's, the same for both tools.
set -uo pipefail

probe="${1:?usage: probe_parity_bench.sh FABRIC_PROBE}"
rounds="${ROUNDS:-5}"
size="${SIZE:-65536}"
iters="${ITERS:-1000}"
lat_size="${LAT_SIZE:-2}"
lat_iters="${LAT_ITERS:-300}"
dev="${DEV:-${FABRIC_VM_RDMA_DEV:-$(ibv_devices 2>/dev/null | awk 'NR > 2 { print $1; exit }')}}"
ip="${PEER:-${FABRIC_VM_IP:-127.0.0.1}}"
work="${FABRIC_VM_OUT:-$(mktemp -d)}"
port=18515

listening() { [[ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]]; }
# run TEST COLUMN SIZE ITERS CLIENT...: a stock ib_TEST server and CLIENT... as the client; prints
# COLUMN of the client's report line (4: BW average in MB/s, 5: t_typical in usec).
run() {
  local test=$1 col=$2 sz=$3 n=$4
  shift 4
  timeout 300 "ib_$test" -d "$dev" -p "$port" -s "$sz" -n "$n" -F >"$work/server.out" 2>&1 &
  local spid=$! i
  for ((i = 0; i < 50; i++)); do listening "$port" && break; sleep 0.1; done
  timeout 300 "$@" -d "$dev" -p "$port" -s "$sz" -n "$n" >"$work/client.out" 2>&1
  local rc=$?
  wait "$spid"
  ((rc == 0)) || { cat "$work/client.out" >&2; return 1; }
  grep -A1 '#bytes' "$work/client.out" | tail -n1 | awk -v c="$col" '{ print $c }'
}

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

# compare TEST COLUMN SIZE ITERS UNIT: ROUNDS interleaved pairs, the medians and their ratio.
compare() {
  local test=$1 col=$2 sz=$3 n=$4 unit=$5 t o r mt mo
  local theirs=() ours=()
  for ((r = 1; r <= rounds; r++)); do
    t=$(run "$test" "$col" "$sz" "$n" "ib_$test" -F "$ip") || exit 1
    o=$(run "$test" "$col" "$sz" "$n" "$probe" "$test" "$ip" --perftest --retry 10) || exit 1
    theirs+=("$t")
    ours+=("$o")
    echo "$test round $r: perftest $t $unit, fabric-probe $o $unit"
  done
  mt=$(printf '%s\n' "${theirs[@]}" | median)
  mo=$(printf '%s\n' "${ours[@]}" | median)
  echo "$test -s $sz -n $n on $dev, $rounds pairs: median perftest $mt $unit, fabric-probe" \
    "$mo $unit, ratio $(awk -v a="$mo" -v b="$mt" 'BEGIN { printf "%.3f", a / b }')"
}

compare write_bw 4 "$size" "$iters" "MB/s"
compare write_lat 5 "$lat_size" "$lat_iters" "usec (typical)"

#!/bin/bash
# fabric-probe against perftest on the same RDMA device, alternating runs of the same size and
# iterations, printing each figure and the ratios (goal: bandwidth >= 0.97x perftest's, typical
# latency <= 1.03x). Runs on a host with an RDMA device and perftest, or in the Soft-RoCE rig:
#
#   tests/vm/rig.sh run --timeout 600 -- agent/fabric/probes/bench_vs_perftest.sh build/agent/fabric/probe_cli/fabric-probe
#   tests/vm/rig.sh run --vms 2 --timeout 600 -- agent/fabric/probes/bench_vs_perftest.sh build/agent/fabric/probe_cli/fabric-probe
#
# With one VM (or one host, PEER unset) server and client share the machine and its device; with
# two VMs vm0 serves and vm1 measures over the virtual wire, each on its own CPU. Under the rig's
# one-CPU VMs, ping-pong latency on one VM is set by the scheduler (both sides spin on the same
# CPU), not by the device: only the two-VM latency figures say anything.
#
# Environment: ROUNDS (3), BW_SIZE (65536), BW_ITERS (1000), LAT_SIZE (2), LAT_ITERS (300),
# DEV (FABRIC_VM_RDMA_DEV or the first device), PEER (the server's address).
set -uo pipefail

probe="${1:?usage: bench_vs_perftest.sh FABRIC_PROBE}"
rounds="${ROUNDS:-3}"
bw_size="${BW_SIZE:-65536}"
bw_iters="${BW_ITERS:-1000}"
lat_size="${LAT_SIZE:-2}"
lat_iters="${LAT_ITERS:-300}"
dev="${DEV:-${FABRIC_VM_RDMA_DEV:-$(ibv_devices 2>/dev/null | awk 'NR > 2 { print $1; exit }')}}"
count="${FABRIC_VM_COUNT:-1}"
index="${FABRIC_VM_INDEX:-0}"
shared="${FABRIC_VM_SHARED:-}"
work="${FABRIC_VM_OUT:-$(mktemp -d)}"
if ((count == 2)); then
  role=$([[ $index == 0 ]] && echo server || echo client)
  server_ip="${FABRIC_VM_PEER:?}"
  [[ $role == server ]] && server_ip="${FABRIC_VM_IP:?}"
else
  role=both
  server_ip="${PEER:-${FABRIC_VM_IP:-127.0.0.1}}"
fi
port=18515

# Step commands, the same size and iterations for both tools. perftest: -F ignores the CPU
# frequency warning (emulated CPUs); its MB/s (2^20 bytes) has more digits than its Gb/s.
server_cmd() {
  case "$1" in
    pt_bw) echo ib_write_bw -d "$dev" -F -s "$bw_size" -n "$bw_iters" -p "$port" ;;
    pt_lat) echo ib_write_lat -d "$dev" -F -s "$lat_size" -n "$lat_iters" -p "$port" ;;
    fp_bw) echo "$probe" write_bw -d "$dev" -s "$bw_size" -n "$bw_iters" -p "$port" --timeout 60 ;;
    fp_lat) echo "$probe" write_lat -d "$dev" -s "$lat_size" -n "$lat_iters" -p "$port" --timeout 60 ;;
  esac
}
client_cmd() {
  case "$1" in
    fp_*) echo "$(server_cmd "$1") $server_ip --json" ;;
    *) echo "$(server_cmd "$1") $server_ip" ;;
  esac
}

# The figure of a finished client run: Gb/s average (bw) or typical usec (lat).
figure() {
  local step=$1 file=$2
  case "$step" in
    pt_bw) awk '/#bytes/ { getline; printf "%.6f\n", $4 * 1048576 * 8 / 1e9; exit }' "$file" ;;
    pt_lat) awk '/#bytes/ { getline; print $5; exit }' "$file" ;;
    fp_bw) /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bw_avg_gbps"])' "$file" ;;
    fp_lat) /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["t_typical_us"])' "$file" ;;
  esac
}

steps=()
for ((r = 1; r <= rounds; r++)); do
  # Alternate which tool goes first so that neither always runs on a warmer machine.
  if ((r % 2)); then steps+=(pt_bw fp_bw pt_lat fp_lat); else steps+=(fp_bw pt_bw fp_lat pt_lat); fi
done

run_server() {  # step i
  $(server_cmd "$1") >"$work/server.$2.out" 2>&1
}

declare -A sum n
for i in "${!steps[@]}"; do
  step=${steps[i]}
  case "$role" in
    both)
      run_server "$step" "$i" &
      spid=$!
      sleep 1
      timeout 300 $(client_cmd "$step") >"$work/client.$i.out" 2>&1
      rc=$?
      wait "$spid"
      ;;
    server)
      run_server "$step" "$i" &
      spid=$!
      sleep 1
      touch "$shared/ready.$i"
      wait "$spid"
      continue
      ;;
    client)
      for _ in $(seq 600); do [[ -e "$shared/ready.$i" ]] && break; sleep 0.1; done
      timeout 300 $(client_cmd "$step") >"$work/client.$i.out" 2>&1
      rc=$?
      ;;
  esac
  if ((rc != 0)); then
    echo "step $i $step failed (exit $rc):"
    cat "$work/client.$i.out"
    exit 1
  fi
  v=$(figure "$step" "$work/client.$i.out")
  printf '%-3s %-7s %s\n' "$i" "$step" "$v"
  sum[$step]=$(awk -v a="${sum[$step]:-0}" -v b="$v" 'BEGIN { print a + b }')
  n[$step]=$(( ${n[$step]:-0} + 1 ))
done
[[ $role == server ]] && exit 0

avg() { awk -v s="${sum[$1]}" -v c="${n[$1]}" 'BEGIN { printf "%.4f", s / c }'; }
echo
echo "device $dev, $( ((count == 2)) && echo "two VMs" || echo "one machine"), $rounds rounds"
echo "write_bw  ${bw_size} B x ${bw_iters}: perftest $(avg pt_bw) Gb/s, fabric-probe $(avg fp_bw) Gb/s," \
  "ratio $(awk -v a="$(avg fp_bw)" -v b="$(avg pt_bw)" 'BEGIN { printf "%.3f", a / b }') (goal >= 0.97)"
echo "write_lat ${lat_size} B x ${lat_iters}: perftest $(avg pt_lat) us, fabric-probe $(avg fp_lat) us typical," \
  "ratio $(awk -v a="$(avg fp_lat)" -v b="$(avg pt_lat)" 'BEGIN { printf "%.3f", a / b }') (goal <= 1.03)"

#!/bin/bash
# Runs inside both of the rig's guests: `rig.sh run --vms 2 -- guest_probes_two_vms.sh
# FABRIC_PROBE`. fabric-probe across the virtual wire, each VM on its own rxe0: vm0 serves, vm1
# runs the client against vm0's IPv4 and checks its JSON: write_bw and read_lat with the TCP
# exchange, write_bw with rdma_cm (-R). Then the failures: a client asking vm0 on a port where no
# responder listens (refused, retried until --timeout), and an address on the wire where no host
# answers, both exit 1 within the client's --timeout.
#
# Handshake through $FABRIC_VM_SHARED (seen by both VMs): vm0 starts the responder of step I on
# its own port, waits until it listens and touches ready.I (or noserver.I when it did not come
# up); vm1 waits for either, runs the client and touches gone.I. vm0 waits for vm1's final
# done.vm1 before it exits, so that its address keeps answering during vm1's negative checks.
set -uo pipefail

probe="${1:?usage: guest_probes_two_vms.sh FABRIC_PROBE}"
# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
index="${FABRIC_VM_INDEX:?run me under rig.sh run --vms 2}"
[[ "${FABRIC_VM_COUNT:-1}" == 2 ]] || { echo "FAIL needs two VMs (rig.sh run --vms 2)"; exit 1; }
ip="${FABRIC_VM_IP:?}"
peer="${FABRIC_VM_PEER:?}"
shared="${FABRIC_VM_SHARED:?}"
base_port=18520

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }



# The steps: name, test, arguments (both sides get the same; small sizes and counts, the wire is
# tens of MB/s and a round trip tens of ms under emulation).
steps=(
  "write_bw|write_bw|-n 200 -s 16384"
  "read_lat|read_lat|-n 50"
  "write_bw_cm|write_bw|-R -n 200 -s 16384"
)

# check_json TEST FILE: one JSON object for TEST over rdma on $dev with positive figures.
check_json() {
  /usr/bin/python3 - "$1" "$2" "$dev" <<'PY'
import json, sys
test, path, dev = sys.argv[1:4]
lines = [l for l in open(path) if l.strip()]
assert len(lines) == 1, f"{len(lines)} lines"
j = json.loads(lines[0])
assert j["test"] == test, j
assert j["transport"] == "rdma", j
assert j["device"] == dev, j
assert j["iterations"] > 0 and j["bytes"] > 0, j
if test.endswith("_lat"):
    assert j["t_typical_us"] > 0, j
    assert all(k in j and j[k] > 0 for k in ["t_min_us", "t_max_us", "t_avg_us", "p99_us"]), j
    assert j["t_min_us"] <= j["t_typical_us"] <= j["t_max_us"], j
else:
    assert j["bw_avg_gbps"] > 0, j
    assert j["bw_peak_gbps"] >= j["bw_avg_gbps"] and j["msg_rate_mpps"] > 0, j
print(" ".join(f"{k}={v}" for k, v in j.items() if k not in ("test", "device", "transport", "clock")))
PY
}

echo "vm$index: kernel $(uname -r), $dev on ${FABRIC_VM_NETDEV:-eth0} ($ip), peer $peer"

if ((index == 0)); then
  # ---- vm0: the responder of every step ----
  for i in "${!steps[@]}"; do
    IFS='|' read -r name test args <<<"${steps[i]}"
    port=$((base_port + i))
    # The responder waits for its client without a bound of its own: timeout bounds it.
    # shellcheck disable=SC2086
    timeout 90 "$probe" "$test" -d "$dev" -p "$port" --timeout 20 $args \
      >"$out/$name.server.out" 2>"$out/$name.server.err" &
    spid=$!
    up=0
    for ((t = 0; t < 300; t++)); do
      if listening "$port"; then up=1; break; fi
      kill -0 "$spid" 2>/dev/null || break
      sleep 0.1
    done
    if ((!up)); then
      touch "$shared/noserver.$i"
      kill "$spid" 2>/dev/null
      wait "$spid"
      fail "$name: responder did not listen on port $port (exit $?)"
      cat "$out/$name.server.err"
      continue
    fi
    touch "$shared/ready.$i"
    # Once vm1's client is gone (finished or gave up) the responder has 15 s left to end.
    grace=150
    while kill -0 "$spid" 2>/dev/null; do
      if [[ -e "$shared/gone.$i" ]] && ((--grace <= 0)); then
        echo "$name: responder still running 15 s after the client left; killing it"
        kill "$spid" 2>/dev/null
        break
      fi
      sleep 0.1
    done
    wait "$spid"
    src=$?
    if ((src == 0)); then
      ok "$name: responder on port $port served the client from $peer"
    else
      fail "$name: responder exit $src"
      cat "$out/$name.server.err"
    fi
  done
  # Stay up (answering on the wire) until vm1 is through its negative checks.
  if wait_file 150 "$shared/done.vm1"; then
    ok "vm1 finished"
  else
    fail "vm1 did not finish"
  fi
else
  # ---- vm1: the clients, against vm0 ----
  for i in "${!steps[@]}"; do
    IFS='|' read -r name test args <<<"${steps[i]}"
    port=$((base_port + i))
    if ! wait_file 120 "$shared/ready.$i" "$shared/noserver.$i"; then
      fail "$name: vm0's responder never got ready"
      touch "$shared/gone.$i"
      continue
    fi
    if [[ -e "$shared/noserver.$i" ]]; then
      fail "$name: vm0's responder did not start"
      continue
    fi
    start=$(date +%s%N)
    # shellcheck disable=SC2086
    timeout 90 "$probe" "$test" "$peer" -d "$dev" -p "$port" --retry 10 --timeout 20 --json $args \
      >"$out/$name.json" 2>"$out/$name.client.err"
    rc=$?
    took=$(ms_since "$start")
    touch "$shared/gone.$i"
    if ((rc != 0)); then
      fail "$name: client exit $rc after $took ms"
      cat "$out/$name.client.err" "$out/$name.json"
      continue
    fi
    if summary=$(check_json "$test" "$out/$name.json" 2>&1); then
      ok "$name ($args) with $peer in $took ms: $summary"
    else
      fail "$name: bad JSON: $summary"
      cat "$out/$name.json"
    fi
  done

  # No responder on vm0's port (vm0 is up and answers with RST): the client fails at once, as
  # perftest does (no --retry), naming the peer and the refusal.
  t_s=4
  port=18599
  start=$(date +%s%N)
  err=$(timeout 60 "$probe" write_bw "$peer" -d "$dev" -p "$port" --timeout "$t_s" 2>&1 >/dev/null)
  rc=$?
  took=$(ms_since "$start")
  if ((rc == 1 && took < t_s * 1000 + 8000)) &&
    grep -q "nothing listens on $peer:$port (is the peer's responder running?)" <<<"$err"; then
    ok "no responder at $peer port $port: exit 1 after $took ms (--timeout $t_s): $err"
  else
    fail "no responder at $peer port $port: exit $rc after $took ms (--timeout $t_s): $err"
  fi

  # An address on the wire where no host answers (no ARP reply): exit 1 within the timeout too
  # (timed out connecting, or no route to host once ARP gives up).
  absent=${peer%.*}.77
  start=$(date +%s%N)
  err=$(timeout 60 "$probe" read_lat "$absent" -d "$dev" -p "$base_port" --timeout "$t_s" 2>&1 >/dev/null)
  rc=$?
  took=$(ms_since "$start")
  if ((rc == 1 && took < t_s * 1000 + 8000)) &&
    grep -q "fabric-probe: error: read_lat with $absent" <<<"$err"; then
    ok "no host at $absent: exit 1 after $took ms (--timeout $t_s): $err"
  else
    fail "no host at $absent: exit $rc after $took ms (--timeout $t_s): $err"
  fi
  touch "$shared/done.vm1"
fi

if ((failures)); then
  echo "vm$index: $failures check(s) failed"
  exit 1
fi
echo "vm$index: all checks passed"

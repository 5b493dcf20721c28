#!/bin/bash
# Runs inside the rig's guest: `rig.sh run -- guest_probes.sh FABRIC_PROBE`. Every probe test over
# the real rxe0 (server and client on the same device, the client connecting to the VM's own
# IPv4), with the TCP exchange and with rdma_cm (-R); duration mode, several QPs, post lists;
# perftest against the same device; and the failures: a missing device, a server killed mid-test,
# the link going down mid-test.
set -uo pipefail

probe="${1:?usage: guest_probes.sh FABRIC_PROBE}"
# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
port=18515

# check_json TEST FILE: one JSON object with the keys of TEST, over rdma on $dev.
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
    keys = ["t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "p99_us", "p999_us"]
    assert all(k in j and j[k] > 0 for k in keys), j
    assert j["t_min_us"] <= j["t_typical_us"] <= j["p99_us"] <= j["p999_us"] <= j["t_max_us"], j
    assert "bw_avg_gbps" not in j, j
else:
    for k in ["bw_peak_gbps", "bw_avg_gbps", "msg_rate_mpps"]:
        assert k in j and j[k] > 0, (k, j)
    assert j["bw_peak_gbps"] >= j["bw_avg_gbps"], j
    assert "t_min_us" not in j, j
print(" ".join(f"{k}={v}" for k, v in j.items() if k not in ("test", "device", "transport", "clock")))
PY
}

# run_probe NAME TEST ARGS...: a server and a client with the same ARGS; checks exit codes and the
# client's JSON.
run_probe() {
  local name=$1 test=$2
  shift 2
  "$probe" "$test" -d "$dev" -p "$port" --timeout 20 "$@" >"$out/$name.server.out" 2>"$out/$name.server.err" &
  local spid=$!
  local rc
  timeout 120 "$probe" "$test" "$ip" -d "$dev" -p "$port" --retry 10 --timeout 20 --json "$@" \
    >"$out/$name.json" 2>"$out/$name.client.err"
  rc=$?
  wait "$spid"
  local src=$?
  if ((rc != 0 || src != 0)); then
    fail "$name: client exit $rc, server exit $src"
    cat "$out/$name.client.err" "$out/$name.server.err"
    return
  fi
  local summary
  if summary=$(check_json "$test" "$out/$name.json" 2>&1); then
    ok "$name: $summary"
  else
    fail "$name: bad JSON: $summary"
    cat "$out/$name.json"
  fi
}

echo "kernel $(uname -r), $dev on ${FABRIC_VM_NETDEV:-veth0} ($ip), $(nproc) cpu"
for t in write_bw send_bw read_bw; do
  run_probe "$t" "$t" -n 300 -s 65536
done
for t in write_lat send_lat read_lat; do
  run_probe "$t" "$t" -n 200
done
# rdma_cm connects the QPs (address and route resolution, the CM's own transitions).
run_probe write_bw_cm write_bw -R -n 300
run_probe read_lat_cm read_lat -R -n 200
run_probe send_lat_cm send_lat -R -n 100
run_probe write_bw_cm_2qp write_bw -R -q 2 -n 200
# Several QPs, post lists, moderation, small messages, explicit GID index.
run_probe write_bw_4qp write_bw -q 4 -n 200 -s 4096
run_probe send_bw_postlist send_bw -l 8 -t 64 --cq-mod 16 -n 512 -s 1024
run_probe read_bw_2qp read_bw -q 2 -n 200 -s 8192 -x 1
run_probe write_lat_noinline write_lat -I 0 -s 64 -n 100
# Duration mode: a warm-up margin, then the measured window.
run_probe write_bw_duration write_bw -D 2 --margin 1
run_probe send_lat_duration send_lat -D 2 --margin 1
run_probe read_bw_duration_cm read_bw -R -D 2 --margin 1

# The server refuses a client whose parameters differ from the ones it was given.
"$probe" write_bw -d "$dev" -p "$port" -s 4096 --timeout 10 >/dev/null 2>"$out/mismatch.server.err" &
spid=$!
err=$(timeout 60 "$probe" write_bw "$ip" -d "$dev" -p "$port" --retry 10 -s 8192 --timeout 10 2>&1 >/dev/null)
rc=$?
wait "$spid"
if ((rc == 1)) && grep -q "size 4096 here, 8192 asked" <<<"$err"; then
  ok "mismatched parameters refused: $err"
else
  fail "mismatched parameters: exit $rc: $err"
fi

# A device that does not exist: exit 1 and a message naming it, on both sides.
err=$(timeout 30 "$probe" write_bw "$ip" -d no_such_dev -p "$port" --timeout 5 2>&1)
rc=$?
if ((rc == 1)) && grep -q "no RDMA device 'no_such_dev' (this host has: $dev)" <<<"$err"; then
  ok "missing device: $err"
else
  fail "missing device: exit $rc: $err"
fi
"$probe" write_bw -d no_such_dev -p "$port" --timeout 5 >/dev/null 2>"$out/nodev.server.err" &
spid=$!
err=$(timeout 30 "$probe" write_bw "$ip" -d "$dev" -p "$port" --retry 10 --timeout 5 2>&1)
rc=$?
wait "$spid"
src=$?
if ((rc == 1 && src == 1)) && grep -q "peer refused: no RDMA device 'no_such_dev'" <<<"$err"; then
  ok "server without the device refuses: $err"
else
  fail "server without the device: client exit $rc, server exit $src: $err"
fi

# The server vanishes mid-test (SIGKILL): the client's QP fails (transport retries exhausted) or
# its completion wait runs out, within the timeout, with a clear message, and exit 1.
for t in write_bw write_lat; do
  "$probe" "$t" -d "$dev" -p "$port" --timeout 5 >/dev/null 2>&1 &
  spid=$!
  start=$(date +%s%N)
  timeout 60 "$probe" "$t" "$ip" -d "$dev" -p "$port" --retry 10 -D 30 --margin 0 --timeout 5 \
    >/dev/null 2>"$out/vanish.$t.err" &
  cpid=$!
  sleep 2
  kill -9 "$spid"
  killed=$(date +%s%N)
  wait "$cpid"
  rc=$?
  end=$(date +%s%N)
  err=$(cat "$out/vanish.$t.err")
  took=$(((end - killed) / 1000000))
  if ((rc == 1 && took < 15000)) && grep -q "fabric-probe: error: $t with $ip" <<<"$err"; then
    ok "$t: server killed, client failed after $took ms: $err"
  else
    fail "$t: server killed: client exit $rc after $took ms: $err"
  fi
done

# perftest on the same device, for reference (and to prove the device works for it too).
for t in ib_write_bw ib_write_lat; do
  n=300
  [[ $t == *lat ]] && n=200
  # Stock perftest gives up when it cannot calibrate its clock on a busy VM ("Correlation
  # coefficient r^2 < 0.9"): its failure, not ours, so that pair runs once more.
  for _ in 1 2; do
    timeout 120 "$t" -d "$dev" -n "$n" >"$out/$t.server.out" 2>&1 &
    spid=$!
    sleep 0.5
    timeout 120 "$t" -d "$dev" -n "$n" "$ip" >"$out/$t.client.out" 2>&1
    rc=$?
    wait "$spid"
    grep -qs "Correlation coefficient r^2" "$out/$t".*.out || break
    echo "$t: stock perftest could not calibrate its clock; once more"
  done
  if ((rc == 0)); then
    ok "$t: $(grep -A1 '#bytes' "$out/$t.client.out" | tail -n1 | tr -s ' ')"
  else
    fail "$t failed"
    cat "$out/$t.client.out"
  fi
done

# The link goes down mid-test (last: it disturbs rxe0): the QP fails with a completion error at
# once, both sides exit 1 and the server names the client's reason.
"$probe" write_bw -d "$dev" -p "$port" --timeout 5 >/dev/null 2>"$out/linkdown.server.err" &
spid=$!
timeout 60 "$probe" write_bw "$ip" -d "$dev" -p "$port" --retry 10 -D 30 --margin 0 --timeout 5 \
  >/dev/null 2>"$out/linkdown.client.err" &
cpid=$!
# Down only once the test runs: the control connection is up, then time for the QP set-up (slow
# under emulation and sanitizers; a fixed short sleep raced it).
for _ in $(seq 1 300); do
  ss -Htn state established "( sport = :$port )" | grep -q . && break
  sleep 0.1
done
sleep 3
ip link set "${FABRIC_VM_NETDEV:-veth0}" down
down=$(date +%s%N)
wait "$cpid"
rc=$?
wait "$spid"
src=$?
took=$((($(date +%s%N) - down) / 1000000))
err=$(cat "$out/linkdown.client.err")
if ((rc == 1 && src == 1 && took < 15000)) && grep -q "completion error" <<<"$err" &&
  grep -q "peer failed" "$out/linkdown.server.err"; then
  ok "link down mid-test: both sides failed within $took ms: $err"
else
  fail "link down mid-test: client exit $rc, server exit $src after $took ms: $err"
  cat "$out/linkdown.server.err"
fi
ip link set "${FABRIC_VM_NETDEV:-veth0}" up

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"

#!/bin/bash
# Runs inside the rig's guest: `rig.sh run -- guest_probe_access.sh FABRIC_AGENT FABRIC_PROBE`.
# The agent's probe responder guards over the real rxe0 (fabric-probe as the client, on the same
# device, connecting to the VM's own IPv4, so the peer it sees is $ip):
#   - --probe-allow without the client: fabric-probe exits 1 with the responder's reason, and the
#     agent logs the refusal before any device work;
#   - --probe-secret-file: a client with another secret, or with none, exits 1 with the reason;
#     one with the same secret (another file, no trailing newline) runs write_bw and an rdma_cm
#     write_lat over RDMA, after those refusals, on the same agent.
set -uo pipefail

agent="${1:?usage: guest_probe_access.sh FABRIC_AGENT FABRIC_PROBE}"
probe="${2:?usage: guest_probe_access.sh FABRIC_AGENT FABRIC_PROBE}"
# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
port=18515

# start_agent NAME ARGS...: an agent serving probes on $port with ARGS; waits (at most 60 s) until
# it says so. Sets $apid.
start_agent() {
  local name=$1
  shift
  "$agent" --socket="/run/$name/agent.sock" --probe-listen=":$port" --probe-rate=0 "$@" \
    2>"$out/$name.log" &
  apid=$!
  local start
  start=$(date +%s)
  until grep -q "probe responder on" "$out/$name.log"; do
    if ! kill -0 "$apid" 2>/dev/null || (($(date +%s) - start > 60)); then
      fail "agent $name did not start its responder"
      cat "$out/$name.log"
      return 1
    fi
    sleep 0.2
  done
}

# stop_agent NAME: SIGTERM, exit 0.
stop_agent() {
  kill -TERM "$apid"
  wait "$apid"
  local rc=$?
  if ((rc == 0)); then ok "agent $1 exits 0 on SIGTERM"; else fail "agent $1: exit $rc on SIGTERM"; fi
}

# refused NAME WANT ARGS...: fabric-probe write_bw with ARGS exits 1 and its error says WANT.
refused() {
  local name=$1 want=$2
  shift 2
  local err rc
  err=$(timeout 60 "$probe" write_bw "$ip" -d "$dev" -p "$port" -n 200 --timeout 20 "$@" 2>&1 >/dev/null)
  rc=$?
  if ((rc == 1)) && grep -qF "$want" <<<"$err"; then
    ok "$name: exit 1: $err"
  else
    fail "$name: exit $rc (want 1 and \"$want\"): $err"
  fi
}

# served NAME TEST ARGS...: fabric-probe TEST with ARGS passes over RDMA on $dev (JSON checked).
served() {
  local name=$1 test=$2
  shift 2
  local rc summary
  timeout 120 "$probe" "$test" "$ip" -d "$dev" -p "$port" --timeout 20 --json "$@" \
    >"$out/$name.json" 2>"$out/$name.err"
  rc=$?
  if ((rc != 0)); then
    fail "$name: exit $rc: $(cat "$out/$name.err")"
    return
  fi
  if summary=$(/usr/bin/python3 - "$out/$name.json" "$test" "$dev" <<'PY' 2>&1
import json, sys
path, test, dev = sys.argv[1:4]
j = json.loads(open(path).read())
assert j["test"] == test and j["transport"] == "rdma" and j["device"] == dev, j
assert j["iterations"] > 0 and j["bytes"] > 0, j
key = "t_typical_us" if test.endswith("_lat") else "bw_avg_gbps"
assert j[key] > 0, j
print(f"{key}={j[key]} iterations={j['iterations']}")
PY
  ); then
    ok "$name: $summary"
  else
    fail "$name: bad JSON: $summary"
    cat "$out/$name.json"
  fi
}

echo "kernel $(uname -r), $dev on ${FABRIC_VM_NETDEV:-veth0} ($ip)"

# 1. An allow-list that leaves the client out (only veth1's address, not $ip).
if start_agent deny --probe-allow="10.77.0.2/32"; then
  refused "not in --probe-allow" "peer refused: this responder does not serve $ip (not in its allow-list)"
  # The agent refused from the peer's address alone: no device named in its log line.
  if grep -q "probe responder: write_bw for $ip: this responder does not serve $ip" "$out/deny.log" &&
    ! grep -q "probe responder: write_bw for $ip on " "$out/deny.log"; then
    ok "agent logged the refusal without touching $dev"
  else
    fail "agent's log of the refusal:"
    cat "$out/deny.log"
  fi
  stop_agent deny
fi

# 2. The shared secret: a wrong one and none are refused; the same one passes real RDMA tests.
printf 'cluster-a\n' >"$out/secret-agent"
printf 'cluster-a' >"$out/secret-same"
printf 'cluster-b\n' >"$out/secret-other"
if start_agent secret --probe-allow="10.77.0.0/24" --probe-secret-file="$out/secret-agent"; then
  refused "wrong secret" "the responder did not prove the shared secret" \
    --secret-file="$out/secret-other"
  refused "no secret" "peer refused: this responder requires the shared secret"
  served secret_write_bw write_bw -n 300 -s 65536 --secret-file="$out/secret-same"
  served secret_write_lat_cm write_lat -R -n 200 --secret-file="$out/secret-same"
  if grep -q "probe responder: write_bw for $ip on $dev: done" "$out/secret.log"; then
    ok "agent logged the served test"
  else
    fail "agent's log has no served write_bw:"
    cat "$out/secret.log"
  fi
  stop_agent secret
fi

if ((failures)); then
  for f in deny secret; do
    echo "--- agent $f log"
    cat "$out/$f.log" 2>/dev/null
  done
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"

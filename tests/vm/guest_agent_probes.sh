#!/bin/bash
# Runs inside the rig's guest: `rig.sh run -- guest_agent_probes.sh FABRIC_AGENT FABRICCTL`. The
# agent's probes over the real rxe0: agent B serves probes (--probe-listen), agent A's config
# schedules write_bw and write_lat against B every 2 s (one device to itself, as perftest runs in
# the rig: two processes, so each has its own device lock), `fabricctl probe` runs an rdma_cm
# test through A, and A's health marks rxe0:1 degraded (emulated rxe moves far less than the
# port's rate); agent C's schedule tests a "perftest:" peer, a stock ib_write_bw server.
set -uo pipefail

agent="${1:?usage: guest_agent_probes.sh FABRIC_AGENT FABRICCTL}"
ctl="${2:?usage: guest_agent_probes.sh FABRIC_AGENT FABRICCTL}"
# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
port=18515

cat >"$out/a.json" <<EOF
{"probes": {"peers": ["$ip:$port"], "intervalSeconds": 2, "tests": ["write_bw", "write_lat"],
            "iterations": 200, "timeoutSeconds": 20, "degradedFraction": 0.9}}
EOF
"$agent" --socket=/run/b/agent.sock --probe-listen=":$port" --probe-rate=0 \
  --probe-perftest="write_bw -p 18520 -n 200" --probe-perftest="send_lat -p 18521 -n 200" \
  --probe-perftest="read_bw -R -p 18522 -n 200" 2>"$out/b.log" &
bpid=$!
"$agent" --socket=/run/a/agent.sock --config="$out/a.json" 2>"$out/a.log" &
apid=$!
ctl_() { "$ctl" "$@" --target=unix:///run/a/agent.sock --timeout=10; }

# The schedule's results, as JSON, once both tests have an RDMA result (at most 60 s).
start=$(date +%s)
until ctl_ probes --json >"$out/probes.json" 2>/dev/null &&
  /usr/bin/python3 - "$out/probes.json" <<'PY'; do
import json, sys
r = json.load(open(sys.argv[1])).get("results", [])
sys.exit(0 if {x["test"] for x in r if x.get("ok")} >= {"write_bw", "write_lat"} else 1)
PY
  if (($(date +%s) - start > 60)); then
    fail "no scheduled results within 60 s"
    cat "$out/probes.json" "$out/a.log" "$out/b.log"
    break
  fi
  sleep 0.5
done
# check_results FILE: the newest scheduled RDMA results of both tests, with the port's share.
check_results() {
  /usr/bin/python3 - "$1" "$dev" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
dev = sys.argv[2]
ok = [x for x in j["results"] if x.get("ok")]
bw = next(x for x in ok if x["test"] == "write_bw")
lat = next(x for x in ok if x["test"] == "write_lat")
for x in (bw, lat):
    assert x["transport"] == "rdma", x
    assert x["device"] == dev and x["port"] == 1 and x["remote_device"] == dev, x
    assert x["source"] == "SOURCE_SCHEDULE", x
    assert "gid_index" in x, x
assert bw["bw_avg_gbps"] > 0 and bw["bw_peak_gbps"] >= bw["bw_avg_gbps"], bw
assert bw["port_rate_gbps"] > 0 and 0 < bw["fraction_of_rate"] < 0.9 and bw["degraded"], bw
assert 0 < lat["t_min_us"] <= lat["t_typical_us"] <= lat["t_max_us"], lat
print(f"write_bw {bw['bw_avg_gbps']:.3f} Gb/s ({100 * bw['fraction_of_rate']:.1f}% of "
      f"{bw['port_rate_gbps']} Gb/s), write_lat {lat['t_typical_us']:.0f} us, "
      f"{j.get('rounds', 0)} rounds")
PY
}
if summary=$(check_results "$out/probes.json" 2>&1); then
  ok "scheduled probes over $dev: $summary"
else
  fail "scheduled results: $summary"
  cat "$out/probes.json"
fi

# The degraded port is a health warning (exit 1), naming the port and the figures.
health=$(ctl_ health)
rc=$?
if grep -q "WARNING probe $dev:1: write_bw to $ip:$port" <<<"$health" && ((rc == 1)); then
  ok "health: $dev:1 degraded (exit $rc)"
else
  fail "health (exit $rc): $health"
fi

# On demand through the agent, connected by rdma_cm; the table says which device and GID.
if table=$(ctl_ probe --peer="$ip:$port" --test=read_lat -R -n 100 --step-timeout=20 2>&1) &&
  grep -q "Device *: $dev" <<<"$table" && grep -q "Connection *: rdma_cm" <<<"$table"; then
  ok "fabricctl probe read_lat -R: $(tail -2 <<<"$table" | head -1 | tr -s ' ')"
else
  fail "fabricctl probe read_lat -R: $table"
fi

# B served them all, and said so.
if "$ctl" probes --target=unix:///run/b/agent.sock | grep -q "responder: \*:$port ([1-9][0-9]* served"; then
  ok "agent B's responder counted its tests"
else
  fail "agent B's responder: $("$ctl" probes --target=unix:///run/b/agent.sock 2>&1)"
fi

# Stock perftest clients against agent B's --probe-perftest servers (while A's schedule keeps
# testing B on the same device: they take turns): write_bw twice in a row (B serves again and
# again), send_lat, read_bw over -R; each stock client prints its figures and B logs each test.
# Stock perftest calibrates the TSC at start and gives up on a busy VM ("Correlation coefficient
# r^2 < 0.9", then "Can't produce a report"): its failure, not ours, so that client runs once more.
pt_client() {
  local o rc
  for _ in 1 2; do
    o=$(timeout 60 "$@" -d "$dev" -n 200 "$ip" 2>&1)
    rc=$?
    grep -q "Correlation coefficient r^2" <<<"$o" || break
    echo "stock $1 could not calibrate its clock; once more" >&2
  done
  printf '%s\n' "$o"
  return "$rc"
}
for i in 1 2; do
  if o=$(pt_client ib_write_bw -p 18520) && grep -qE "^ *65536 +200 " <<<"$o"; then
    ok "stock ib_write_bw against agent B ($i): $(grep -E "^ *65536 +200 " <<<"$o" | tr -s ' ')"
  else
    fail "stock ib_write_bw against agent B ($i): $o"
  fi
done
if o=$(pt_client ib_send_lat -p 18521) && grep -qE "^ *2 +200 " <<<"$o"; then
  ok "stock ib_send_lat against agent B: $(grep -E "^ *2 +200 " <<<"$o" | tr -s ' ')"
else
  fail "stock ib_send_lat against agent B: $o"
fi
if o=$(pt_client ib_read_bw -R -p 18522) && grep -qE "^ *65536 +200 " <<<"$o"; then
  ok "stock ib_read_bw -R against agent B: $(grep -E "^ *65536 +200 " <<<"$o" | tr -s ' ')"
else
  fail "stock ib_read_bw -R against agent B: $o"
fi
served=$(grep -c "perftest responder (.*): $ip (perftest 6.06) on $dev: " "$out/b.log")
if ((served == 4)); then
  ok "agent B logged the 4 stock clients: $(grep "perftest responder (write_bw" "$out/b.log" | tail -1 | sed 's/.*responder/responder/')"
else
  fail "agent B logged $served stock clients, not 4"
fi
# An agent that does not admit this host's address turns the stock client away and says why.
"$agent" --socket=/run/d/agent.sock --probe-allow=192.0.2.0/24 \
  --probe-perftest="write_bw -p 18523 -n 200" 2>"$out/d.log" &
dpid=$!
for _ in $(seq 50); do grep -q "serving stock perftest clients" "$out/d.log" && break; sleep 0.1; done
sleep 0.5
if ! o=$(pt_client ib_write_bw -p 18523) &&
  grep -q "perftest client $ip.* is not in the allow-list (192.0.2.0/24)" "$out/d.log"; then
  ok "agent D turned away a client outside --probe-allow"
else
  fail "agent D and a client outside --probe-allow: $o; $(cat "$out/d.log")"
fi
kill -TERM "$dpid"
wait "$dpid" || fail "agent D exit $? on SIGTERM"

# A "perftest:" peer: a stock ib_write_bw server, restarted by a loop as operators run it, which
# agent C's schedule tests on perftest's own protocol.
(while :; do timeout 60 ib_write_bw -d "$dev" -p 18517 -n 200 >/dev/null 2>&1; done) &
loop=$!
cat >"$out/c.json" <<EOF
{"probes": {"peers": ["perftest:$ip:18517"], "intervalSeconds": 2, "tests": ["write_bw"],
            "iterations": 200, "timeoutSeconds": 20}}
EOF
"$agent" --socket=/run/c/agent.sock --config="$out/c.json" 2>"$out/c.log" &
cpid=$!
start=$(date +%s)
until "$ctl" probes --json --target=unix:///run/c/agent.sock --timeout=10 >"$out/c.out" \
  2>/dev/null && summary=$(/usr/bin/python3 - "$out/c.out" "$ip" "$dev" <<'PY'
import json, sys
ok = [x for x in json.load(open(sys.argv[1])).get("results", []) if x.get("ok")]
assert ok, "no result yet"
r = ok[0]
assert r["peer"] == f"perftest:{sys.argv[2]}:18517" and r["test"] == "write_bw", r
assert r["transport"] == "rdma" and r["device"] == sys.argv[3] and not r.get("remote_device"), r
assert r["bw_avg_gbps"] > 0 and r["iterations"] == 200 and "perftest" in r["clock"], r
print(f"{r['bw_avg_gbps']:.3f} Gb/s over {r['iterations']} messages ({r['clock']})")
PY
); do
  if (($(date +%s) - start > 60)); then
    summary="no result within 60 s: $(cat "$out/c.out")"
    break
  fi
  sleep 0.5
done
if [[ $summary == *Gb/s* ]]; then ok "agent C against a stock perftest server: $summary"; else
  fail "agent C: $summary"
  cat "$out/c.log"
fi
kill -TERM "$cpid"
wait "$cpid"
crc=$?
# The same on demand, through agent A (C gone: the stock server serves one client at a time).
if table=$(ctl_ probe --peer="perftest:$ip:18517" --test=write_bw -n 200 --step-timeout=20 2>&1) &&
  grep -q "Device *: $dev" <<<"$table"; then
  ok "fabricctl probe perftest:$ip:18517: $(grep -E "^ *[0-9]+ " <<<"$table" | tail -1 | tr -s ' ')"
else
  fail "fabricctl probe perftest:$ip:18517: $table"
fi
kill "$loop"
wait "$loop" 2>/dev/null
pkill -f "ib_write_bw -d $dev -p 18517"
((crc == 0)) || fail "agent C exit $crc on SIGTERM"

kill -TERM "$apid" "$bpid"
wait "$apid"
arc=$?
wait "$bpid"
brc=$?
if ((arc == 0 && brc == 0)); then ok "both agents exit 0 on SIGTERM"; else
  fail "SIGTERM: agent A exit $arc, agent B exit $brc"
fi

if ((failures)); then
  echo "--- agent A log"
  cat "$out/a.log"
  echo "--- agent B log"
  cat "$out/b.log"
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"

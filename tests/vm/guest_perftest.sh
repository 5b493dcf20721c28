#!/bin/bash
# Runs inside the rig's guest: `rig.sh run -- guest_perftest.sh FABRIC_PROBE [tcp|cm]`. fabric-probe on
# stock perftest's protocol against Debian's perftest (6.06) over the real rxe0, both ways: a
# stock ib_write_bw client served by `fabric-probe write_bw --perftest`, and fabric-probe the
# client of a stock server (GID chosen and -x, MB/s and Gb/s, several QPs), the server printing
# exactly the client's own report line; read_bw, send_bw, write_lat, read_lat and send_lat with
# their stock tools either way, over the TCP exchange and over rdma_cm (-R); a client outside
# --allow; peers that send garbage, a truncated key, or vanish mid-exchange.
set -uo pipefail

probe="${1:?usage: guest_perftest.sh FABRIC_PROBE [tcp|cm [FAKE_LIBCUDA]]}"
part="${2:-all}"
fake_cuda="${3:-}"
probe_env=(env)  # variables for fabric-probe alone (pair)
# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
port=18515

# The line under the table's header, blanks squeezed.
report_line() { grep -A1 '#bytes' "$1" | tail -n1 | tr -s ' \t' ' '; }

# lat_ok LINE N: a latency line with N iterations and t_min <= t_typical <= t_max.
lat_ok() { awk -v n="$2" '{ exit !($2 == n && $3 > 0 && $3 <= $5 && $5 <= $4) }' <<<"$1"; }
# lat_dur_ok LINE RTT: -D's line (#bytes #iterations t_avg tps), t_avg x tps x RTT = 1 s: the same
# window and count behind both figures.
lat_dur_ok() {
  awk -v r="$2" '{ x = $3 * $4 * r / 1e6; exit !(NF == 4 && $2 > 0 && x > 0.97 && x < 1.03) }' <<<"$1"
}

# pair NAME ROLE TEST "ARGS" ["OURS"]: fabric-probe TEST --perftest as ROLE (server or client)
# and stock ib_TEST as the other end, both with ARGS (fabric-probe with OURS too); both exit 0. write_bw and read_bw: both print the
# same report line (the server prints the client's). send_bw: each prints its own, with the same
# size and message count, the receiver without a peak. Latency: each side measures its own, ours
# with the iterations asked (read_lat: the client alone).
pair() {
  local name=$1 role=$2 test=$3 args=$4 ours theirs
  # shellcheck disable=SC2206
  local probe_cmd=("${probe_env[@]}" "$probe" "$test" --perftest -d "$dev" -p "$port" --timeout 20
    ${5:-})
  local stock_cmd=("ib_$test" -d "$dev" -p "$port")
  if [[ $role == server ]]; then stock_cmd+=("$ip"); else probe_cmd+=("$ip" --retry 10); fi
  local first=("${probe_cmd[@]}") second=("${stock_cmd[@]}")
  [[ $role == client ]] && first=("${stock_cmd[@]}") second=("${probe_cmd[@]}")
  local rc src spid i
  # Stock perftest calibrates the TSC at start and gives up on a busy VM ("Correlation
  # coefficient r^2 < 0.9"): its failure, not ours; such a pair runs once more.
  for _ in 1 2; do
    # shellcheck disable=SC2086
    timeout 120 "${first[@]}" $args >"$out/$name.first.out" 2>"$out/$name.first.err" &
    spid=$!
    # An rdma_cm listener has no TCP socket to wait for: our server says when it listens (an ASan
    # build takes seconds to start); our client tries again while a stock server is not there yet.
    if [[ " $args " == *" -R "* && $role == server ]]; then
      for ((i = 0; i < 300; i++)); do
        grep -q "waiting for a perftest client" "$out/$name.first.err" 2>/dev/null && break
        sleep 0.1
      done
    elif [[ " $args " == *" -R "* ]]; then
      sleep 1
    else
      for ((i = 0; i < 50; i++)); do listening "$port" && break; sleep 0.1; done
    fi
    # shellcheck disable=SC2086
    timeout 120 "${second[@]}" $args >"$out/$name.second.out" 2>"$out/$name.second.err"
    rc=$?
    wait "$spid"
    src=$?
    grep -qs "Correlation coefficient r^2" "$out/$name".* || break
    echo "$name: stock perftest could not calibrate its clock; once more"
  done
  ours=$(report_line "$out/$name.first.out")
  theirs=$(report_line "$out/$name.second.out")
  [[ $role == client ]] && { local t=$ours; ours=$theirs; theirs=$t; }
  local n good=0 what
  n=$(grep -oE -- '-n [0-9]+' <<<"$args" | cut -d' ' -f2)
  # -b: both ends move data. send_bw -D: each end prints its own window's count (with -b its
  # sends and receives).
  local kind=$test
  [[ " $args " == *" -b "* ]] && kind=bidir
  [[ $test == send_bw && " $args " == *" -D "* ]] && kind=own_window
  case $kind in
    bidir)
      # Each end prints its own message count beside the sum of both reports.
      what="ours '$ours', stock '$theirs'"
      [[ -n "$ours" && "$(cut -d' ' -f2,4-6 <<<"$theirs")" == "$(cut -d' ' -f2,4-6 <<<"$ours")" ]] &&
        good=1
      ;;
    own_window)
      what="ours '$ours', stock '$theirs'"
      # Both count over nearly the same window of their own clocks. With -b each counts both
      # directions (one alone would be half the other's), and on the VM's one CPU two busy-polling
      # ends see that window's traffic apart by up to a third (on two CPUs within a sixth).
      local lo=0.85 hi=1.18
      [[ " $args " == *" -b "* ]] && lo=0.6 hi=1.6
      awk -v t="$theirs" -v lo="$lo" -v hi="$hi" '{ split(t, s, " ") }
        { exit !($1 == s[1] && $2 > 0 && s[2] > 0 && $3 == 0 && s[3] == 0 && $4 > 0 && s[4] > 0 &&
                 $4 / s[4] > lo && $4 / s[4] < hi) }' <<<"$ours" && good=1
      ;;
    write_bw | read_bw)
      what="both print '$ours'"
      [[ -n "$ours" && "$theirs" == "$ours" ]] && good=1
      ;;
    send_bw)
      what="ours '$ours', stock '$theirs'"
      local q
      q=$(grep -oE -- '-q [0-9]+' <<<"$args" | cut -d' ' -f2)
      awk -v m="$((n * ${q:-1}))" -v t="$theirs" -v r="$role" '
        { split(t, s, " ") }
        { exit !($1 == s[1] && $2 == m && s[2] == m && $4 > 0 && s[4] > 0 &&
                 (r == "server" ? $3 == 0 : s[3] == 0)) }' <<<"$ours" && good=1
      ;;
    *_lat)
      what="ours '$ours', stock '$theirs'"
      if [[ " $args " == *" -D "* && $test == read_lat ]]; then
        if [[ $role == server ]]; then lat_dur_ok "$theirs" 1 && [[ -z $ours ]] && good=1
        else lat_dur_ok "$ours" 1 && good=1; fi
      elif [[ " $args " == *" -D "* ]]; then
        lat_dur_ok "$ours" 2 && lat_dur_ok "$theirs" 2 && good=1
      elif [[ $test != read_lat ]]; then
        lat_ok "$ours" "$n" && lat_ok "$theirs" "$n" && good=1
      elif [[ $role == server ]]; then lat_ok "$theirs" "$n" && [[ -z $ours ]] && good=1
      else lat_ok "$ours" "$n" && good=1; fi
      ;;
  esac
  if ((rc == 0 && src == 0 && good)); then
    ok "$name: fabric-probe the $role of a stock ib_$test: $what"
  else
    fail "$name: exits $src (first) and $rc (second); $what"
    cat "$out/$name".*
  fi
}

# The TCP exchange: every test either way; --json; --allow; bad peers.
part_tcp() {
# -x 1 (the GID in the keys) rides on read_bw, send_bw_qps and the latency pairs below.
pair default server write_bw "-n 300"
pair gbits server write_bw "-n 500 -s 4096 --report_gbits"
pair small_qps server write_bw "-n 400 -s 64 -q 2"
pair client_default client write_bw "-n 300"
pair client_gbits client write_bw "-n 500 -s 4096 --report_gbits"
pair client_qps client write_bw "-n 400 -s 64 -q 2"
pair lat_server server write_lat "-n 300"
pair lat_client client write_lat "-n 300"
pair lat_client_gid client write_lat "-n 200 -s 64 -x 1"
# -D for latency: each end times its own window (a margin either side with -D 4) and prints the
# window's average and rate.
pair lat_dur_server server write_lat "-D 4"
pair send_lat_dur_client client send_lat "-D 3"
pair read_lat_dur_client client read_lat "-D 3"
for role in server client; do
  pair "read_bw_$role" "$role" read_bw "-n 300 -x 1"
  pair "read_bw_qps_$role" "$role" read_bw "-n 400 -s 4096 -q 2 --report_gbits"
  pair "send_bw_$role" "$role" send_bw "-n 300"
  pair "send_bw_qps_$role" "$role" send_bw "-n 400 -s 512 -q 2 -x 1"
  pair "read_lat_$role" "$role" read_lat "-n 300"
  pair "send_lat_$role" "$role" send_lat "-n 300 -s 64 -x 1"
done
# NUMA placement as current perftest, once the device is known: --pin_cores narrows our server's
# CPUs (read from /proc while it waits for the client), --numa_node=0 binds our client to node 0.
timeout 60 "$probe" write_bw --perftest -d "$dev" -p "$port" -n 100 --pin_cores 0 \
  >"$out/pin.out" 2>"$out/pin.err" &
spid=$!
for ((i = 0; i < 300; i++)); do grep -q "waiting for a perftest client" "$out/pin.err" && break; sleep 0.1; done
pinned=$(awk '/^Cpus_allowed_list/ { print $2 }' "/proc/$spid/status")
timeout 60 ib_write_bw -d "$dev" -p "$port" -n 100 "$ip" >/dev/null 2>&1
wait "$spid"
src=$?
timeout 60 ib_write_bw -d "$dev" -p "$port" -n 100 >/dev/null 2>&1 &
spid=$!
timeout 60 "$probe" write_bw "$ip" --perftest -d "$dev" -p "$port" -n 100 --retry 10 --numa_node 0 \
  >"$out/node.out" 2>"$out/node.err"
rc=$?
wait "$spid"
if ((src == 0 && rc == 0)) && [[ $pinned == 0 ]] && grep -q "ran on CPUs 0" "$out/pin.err" &&
  grep -q "ran on NUMA node 0" "$out/node.err"; then
  ok "numa: --pin_cores 0 (Cpus_allowed_list $pinned), --numa_node 0"
else
  fail "numa: exits $src/$rc, Cpus_allowed_list '$pinned'; $(cat "$out/pin.err" "$out/node.err")"
fi
# -b: both ends move data and print the same sum of both reports (NGC's -b -q 2 -D).
pair bidir_server server write_bw "-n 300 -b"
pair bidir_client client read_bw "-n 300 -b -q 2"
pair bidir_dur_client client write_bw "-D 4 -b -q 2"
# send_bw -b (run_iter_bi): both ends send and receive; by iterations each prints the sum, with -D
# its own window's sends and receives. send_bw -D alone: each end its own window.
pair send_bidir_server server send_bw "-n 300 -b"
pair send_bidir_dur_client client send_bw "-D 4 -b"
pair send_dur_server server send_bw "-D 4"

# --json: perftest's --out_json file, read by the keys NGC's scripts read.
timeout 120 ib_write_bw -d "$dev" -p "$port" -n 300 --report_gbits >"$out/json.server.out" 2>&1 &
spid=$!
timeout 120 "$probe" write_bw "$ip" --perftest -d "$dev" -p "$port" --retry 10 -n 300 \
  --report_gbits --json >"$out/json.client.out" 2>"$out/json.client.err"
rc=$?
wait "$spid"
if ((rc == 0)) && summary=$(/usr/bin/python3 - "$out/json.client.out" "$dev" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
info, res = j["test_info"], j["results"]
assert info["test"] == "RDMA_Write_BW_Test" and info["Device"] == sys.argv[2], info
assert res["MsgSize"] == 65536 and res["n_iterations"] == 300, res
assert res["BW_average"] > 0 and res["BW_peak"] >= res["BW_average"] and res["MsgRate"] > 0, res
print(f'BW_average {res["BW_average"]} Gb/s, BW_peak {res["BW_peak"]}, MsgRate {res["MsgRate"]}')
PY
); then
  ok "json: $summary"
else
  fail "json: client exit $rc"
  cat "$out/json.client.out" "$out/json.client.err"
fi

# A client outside the allow-list is refused before anything is set up for it.
"$probe" write_bw --perftest -d "$dev" -p "$port" --timeout 5 --allow 10.99.0.0/24 \
  >/dev/null 2>"$out/refused.server.err" &
spid=$!
for ((i = 0; i < 50; i++)); do listening "$port" && break; sleep 0.1; done
timeout 60 ib_write_bw -d "$dev" -p "$port" -n 100 "$ip" >"$out/refused.client.out" 2>&1
rc=$?
wait "$spid"
src=$?
if ((rc != 0 && src == 1)) && grep -q "not in the allow-list" "$out/refused.server.err"; then
  ok "refused: $(cat "$out/refused.server.err")"
else
  fail "refused: client exit $rc, server exit $src: $(cat "$out/refused.server.err")"
fi

# bad_peer NAME EXPECT PYTHON: a hand-made peer; the server fails with EXPECT in its error, and
# exits within the bound.
bad_peer() {
  local name=$1 expect=$2 script=$3
  "$probe" write_bw --perftest -d "$dev" -p "$port" --timeout 3 >/dev/null \
    2>"$out/$name.server.err" &
  local spid=$! i
  for ((i = 0; i < 50; i++)); do listening "$port" && break; sleep 0.1; done
  timeout 30 /usr/bin/python3 -c "$script" "$ip" "$port" >"$out/$name.peer.out" 2>&1
  local start=$SECONDS
  wait "$spid"
  local src=$?
  if ((src == 1)) && grep -q "$expect" "$out/$name.server.err"; then
    ok "$name: $(cat "$out/$name.server.err")"
  else
    fail "$name: server exit $src after $((SECONDS - start)) s: $(cat "$out/$name.server.err")"
    cat "$out/$name.peer.out"
  fi
}
prologue='
import socket, struct, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
def x(b, n):
    s.sendall(b)
    got = b""
    while len(got) < n:
        c = s.recv(n - len(got))
        if not c: raise SystemExit("closed")
        got += c
    return got
'
bad_peer garbage_version "is not a number" "$prologue
x(b'hello'.ljust(16, b'\0'), 16)"
bad_peer old_version "older than 5.70" "$prologue
x(b'5.60'.ljust(16, b'\0'), 16)"
bad_peer truncated_key "peer closed" "$prologue
x(b'6.06'.ljust(16, b'\0'), 16); x(struct.pack('>I', 4096), 4); x(struct.pack('>I', 64), 4)
x(b'3\0', 2); s.sendall(b'0000:0010:000123:'); time.sleep(0.5); s.close()"
bad_peer garbage_key "hex digits" "$prologue
x(b'6.06'.ljust(16, b'\0'), 16); x(struct.pack('>I', 4096), 4); x(struct.pack('>I', 64), 4)
x(b'3\0', 2); s.sendall(b'z' * 107 + b'\0'); time.sleep(0.5)"
bad_peer huge_page "not a page size" "$prologue
x(b'6.06'.ljust(16, b'\0'), 16); x(struct.pack('>I', 0xffffffff), 4); time.sleep(0.5)"
bad_peer silent "timed out waiting for the page size" "$prologue
x(b'6.06'.ljust(16, b'\0'), 16); time.sleep(6)"
}

# rdma_cm (-R); perftest's -D, warm-up, -m and --output.
part_cm() {
# -R: the exchange and the QPs over rdma_cm (perftest's binary keys), every test, both ways;
# several QPs, which a stock client asks rdma_cm for all at once.
for role in server client; do
  pair "cm_write_bw_$role" "$role" write_bw "-n 300 -R -q 2"
  pair "cm_read_bw_$role" "$role" read_bw "-n 300 -R"
  pair "cm_send_bw_$role" "$role" send_bw "-n 300 -R -q 2"
  pair "cm_read_lat_$role" "$role" read_lat "-n 300 -R"
  pair "cm_send_lat_$role" "$role" send_lat "-n 200 -R"
done
pair cm_write_lat_server server write_lat "-n 200 -R"
# -T (type of service, as OCI's `-R -T 105`): both ways; our client's QP carries it as its
# traffic class (queried from the kernel), and perftest's JSON says TOS.
pair cm_tos_server server write_bw "-n 300 -R -T 105"
pair cm_tos_client client read_bw "-n 300 -R -T 41" "--out_json --out_json_file $out/tos.json"
if grep -q "the QPs' traffic class is 41 (-T 41)" "$out/cm_tos_client.second.err" &&
  /usr/bin/python3 -c 'import json,sys; i=json.load(open(sys.argv[1]))["test_info"]; assert i["TOS"] == 41 and i["Data_ex_method"] == "rdma_cm", i' \
    "$out/tos.json"; then
  ok "tos: $(grep "traffic class" "$out/cm_tos_client.second.err"), JSON TOS 41"
else
  fail "tos: $(cat "$out/cm_tos_client.second.err" "$out/tos.json")"
fi

# -a (OCI's `ib_read_bw -a -R`, perftest's least -n to keep the VM's time): the client runs every
# size from 2 B to 8 MiB and prints a line
# each; the server prints the last size's line, the client's own. Both ways. send_bw: each end
# prints every size, its own figures (the receiver's without a peak). With -b: both ends print
# every size, the same sums.
all_sizes() {
  local name=$1 role=$2 test=$3 extra=${4:-} ours theirs client_out server_out
  # A send_bw receiver needs two polls (16 completions each) to time a window; with -b both
  # time their sends.
  local n=5
  [[ $test == send_bw && " $extra " != *" -b "* ]] && n=20
  # shellcheck disable=SC2206
  local probe_cmd=("$probe" "$test" --perftest -d "$dev" -p "$port" --timeout 60 -a -R -n "$n" $extra)
  # shellcheck disable=SC2206
  local stock_cmd=("ib_$test" -d "$dev" -p "$port" -a -R -n "$n" $extra)
  local rc src
  # Stock perftest calibrates its clock for every size's report and gives up on a busy VM
  # ("Correlation coefficient r^2 < 0.9"): its failure, not ours, so the run goes once more.
  for _ in 1 2; do
    rm -f "$out/$name".*
    if [[ $role == server ]]; then
      timeout 120 "${probe_cmd[@]}" >"$out/$name.server.out" 2>"$out/$name.server.err" &
      for ((i = 0; i < 300; i++)); do
        grep -q "waiting for a perftest client" "$out/$name.server.err" 2>/dev/null && break
        sleep 0.1
      done
      timeout 120 "${stock_cmd[@]}" "$ip" >"$out/$name.client.out" 2>&1
    else
      timeout 120 "${stock_cmd[@]}" >"$out/$name.server.out" 2>&1 &
      sleep 1
      timeout 120 "${probe_cmd[@]}" "$ip" --retry 10 >"$out/$name.client.out" 2>"$out/$name.client.err"
    fi
    rc=$?
    wait $!
    src=$?
    grep -qs "Correlation coefficient r^2" "$out/$name".* || break
    echo "$name: stock perftest could not calibrate its clock; once more"
  done
  client_out=$(grep -E "^ *[0-9]+ +$n " "$out/$name.client.out" | tr -s ' \t' ' ')
  server_out=$(grep -E "^ *[0-9]+ +$n " "$out/$name.server.out" | tr -s ' \t' ' ')
  local sizes all server_ok=0
  all=$(for ((k = 1; k < 24; k++)); do printf '%d ' $((1 << k)); done)
  sizes=$(awk '{ printf "%s ", $1 }' <<<"$client_out")
  if [[ " $extra " == *" -b "* ]]; then
    [[ -n $client_out && "$(cut -d' ' -f2,4-6 <<<"$server_out")" == "$(cut -d' ' -f2,4-6 <<<"$client_out")" ]] &&
      server_ok=1
  elif [[ $test == send_bw ]]; then
    [[ $(awk '{ printf "%s ", $1 }' <<<"$server_out") == "$all" ]] &&
      awk '{ if ($3 != 0) exit 1 }' <<<"$server_out" && server_ok=1
  else
    [[ "$server_out" == "$(tail -1 <<<"$client_out")" ]] && server_ok=1
  fi
  if ((rc == 0 && src == 0 && server_ok)) && [[ $sizes == "$all" ]]; then
    ok "$name: fabric-probe the $role of a stock ib_$test -a $extra: 23 sizes, the server's last '$(tail -1 <<<"$server_out")'"
  else
    fail "$name: exits $rc/$src; sizes '$sizes'; server '$server_out'"
    cat "$out/$name".*
  fi
}
all_sizes all_client client read_bw
all_sizes all_server server write_bw
all_sizes all_send_server server send_bw
all_sizes all_bidir_client client write_bw -b
all_sizes all_send_bidir_server server send_bw -b

# -D as perftest's whole run (a quarter margin either side), both ways: the window's messages.
pair dur_server server write_bw "-D 4"
pair dur_client client write_bw "-D 4 --report_gbits"
# perftest's warm-up and -m (the smaller MTU wins): the same line both sides.
pair warm_mtu_client client write_bw "-n 300 --perform_warm_up -m 1024"
pair warm_mtu_server server read_bw "-n 300 --perform_warm_up -m 1024"

# --output: the one figure alone, the same on both sides; --out_json: the file beside the table.
timeout 120 ib_write_bw -d "$dev" -p "$port" -n 300 --output=bandwidth >"$out/output.server.out" 2>&1 &
spid=$!
timeout 120 "$probe" write_bw "$ip" --perftest -d "$dev" -p "$port" --retry 10 -n 300 \
  --output=bandwidth --out_json --out_json_file "$out/output.json" >"$out/output.client.out" \
  2>"$out/output.client.err"
rc=$?
wait "$spid"
ours=$(cat "$out/output.client.out")
theirs=$(grep -E '^[0-9.]+$' "$out/output.server.out")
if ((rc == 0)) && [[ $ours =~ ^[0-9]+\.[0-9]{6}$ && $ours == "$theirs" ]] &&
  /usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; assert r["bw_avg"] > 0, r' \
    "$out/output.json"; then
  ok "output: both print '$ours'; the file: $(tr -d '\n' <"$out/output.json" | tail -c 60)"
else
  fail "output: client exit $rc; ours '$ours', stock '$theirs'"
  cat "$out"/output.*
fi

# GPU memory behind the loader seam: a stand-in libcuda.so.1 (the fake, its allocations in host
# memory) found the way the real one is, with the real rxe0 registering and moving the bytes.
if [[ -n $fake_cuda ]]; then
  libdir=$(mktemp -d)
  ln -s "$fake_cuda" "$libdir/libcuda.so.1"
  probe_env=(env LD_LIBRARY_PATH="$libdir" FAKE_CUDA_HOST_BACKED=1)
  # The peer-memory path (ibv_reg_mr on the device pointer), either end.
  pair gpu_client client write_bw "-n 300" "--use_cuda 0"
  pair gpu_server server read_bw "-n 300" "--use_cuda_bus_id 0000:3b:00.0"
  if grep -q "the buffer is in CUDA GPU 0 (peer memory)" "$out/gpu_client.second.err"; then
    ok "gpu: $(grep "the buffer is in" "$out/gpu_client.second.err")"
  else
    fail "gpu: $(cat "$out/gpu_client.second.err")"
  fi
  # Our own protocol (what the agent's schedule runs with `memory: gpu-peermem`): the client's
  # buffer in the GPU, against our server in host memory.
  timeout 60 "$probe" write_bw -d "$dev" -p "$port" --timeout 20 >/dev/null 2>&1 &
  spid=$!
  for ((i = 0; i < 50; i++)); do listening "$port" && break; sleep 0.1; done
  timeout 60 env LD_LIBRARY_PATH="$libdir" FAKE_CUDA_HOST_BACKED=1 "$probe" write_bw "$ip" \
    -d "$dev" -p "$port" -n 300 --use_cuda 0 --retry 10 >"$out/gpu_own.out" 2>&1
  rc=$?
  wait "$spid"
  if ((rc == 0)) && grep -qE "Memory +: CUDA GPU 0 \(peer memory\)" "$out/gpu_own.out"; then
    ok "gpu_own: $(grep -E "Memory +:" "$out/gpu_own.out" | tr -s ' ')"
  else
    fail "gpu_own: exit $rc: $(cat "$out/gpu_own.out")"
  fi
  # dma-buf on a provider that cannot take one (rxe), and no libcuda at all: one line each,
  # exit 1, nothing left behind to crash on.
  gpu_refused() {
    local name=$1 expect=$2 envs=$3 flags=$4
    timeout 60 ib_write_bw -d "$dev" -p "$port" -n 100 >/dev/null 2>&1 &
    local spid=$!
    for ((i = 0; i < 50; i++)); do listening "$port" && break; sleep 0.1; done
    # shellcheck disable=SC2086
    timeout 60 env $envs "$probe" write_bw "$ip" --perftest -d "$dev" -p "$port" -n 100 \
      --timeout 5 $flags >/dev/null 2>"$out/$name.err"
    local rc=$?
    wait "$spid"
    if ((rc == 1)) && [[ $(wc -l <"$out/$name.err") -le 2 ]] && grep -q "$expect" "$out/$name.err"; then
      ok "$name: $(tail -n1 "$out/$name.err")"
    else
      fail "$name: exit $rc: $(cat "$out/$name.err")"
    fi
  }
  gpu_refused gpu_dmabuf_rxe "dma-buf" "LD_LIBRARY_PATH=$libdir" "--use_cuda 0 --use_cuda_dmabuf"
  gpu_refused gpu_no_libcuda "libcuda.so.1" "" "--use_cuda 0"
  probe_env=(env)
fi
}

case $part in
  tcp) part_tcp ;;
  cm) part_cm ;;
  *) part_tcp && part_cm ;;
esac

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"

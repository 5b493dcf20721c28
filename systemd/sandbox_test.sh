#!/usr/bin/env bash
# Runs the real fabric-agent under the real fabric-agent.service, with a real systemd as PID 1,
# on a machine (or container) where systemd is not running: systemd boots in fresh
# mount/pid/uts/net/ipc/cgroup namespaces, in a cgroup subtree of its own, and sees only this
# test's units. /etc and /var/lib are overlays (writes stay in the namespace), /proc/sys and /sys are
# read-only there, so nothing of the machine changes. Then, under every sandboxing directive:
#   - the shipped sysusers.d, /etc/default and config files are installed and used;
#   - the daemon becomes active (READY=1), answers `fabricctl health --liveness`, runs as
#     fabric-agent with exactly CAP_NET_RAW CAP_NET_ADMIN CAP_IPC_LOCK, no_new_privs and seccomp,
#     logs no warning (every netlink/uevent source opened, nothing refused) and discovers as
#     much as an unsandboxed discovery;
#   - /run/fabric-agent is 0750 and the socket 0660: a fabric-agent group member connects,
#     another user cannot; the published host in /run/fabric-env (the shipped tmpfiles.d entry)
#     is written and every user can read it;
#   - it keeps pinging the watchdog, survives `systemctl reload`, stops with status 0;
#   - a bad config (exit 2) fails the unit without a restart loop.
# Exit 0 pass, 1 fail, 77 skip: not root, a tool missing, no daemon built, or this machine cannot
# host systemd in namespaces (e.g. a container with read-only cgroups).
#
# usage: sandbox_test.sh --dir=SYSTEMD_SOURCE_DIR --agent=FABRIC_AGENT --fabricctl=FABRICCTL
set -uo pipefail

dir="" agent="" fabricctl=""
for arg in "$@"; do
  case "$arg" in
    --dir=*) dir="${arg#--dir=}" ;;
    --agent=*) agent="${arg#--agent=}" ;;
    --fabricctl=*) fabricctl="${arg#--fabricctl=}" ;;
    "") ;;  # CMake's empty argument when the fabric-agent target does not exist.
    *) echo "sandbox_test: unknown argument: $arg" >&2; exit 2 ;;
  esac
done
skip() { echo "SKIP: $*"; exit 77; }
[[ -n "$dir" && -n "$fabricctl" ]] || { echo "usage: see the header" >&2; exit 2; }
[[ -n "$agent" ]] || skip "the fabric-agent target does not exist yet (agent/daemon)"
[[ -x "$agent" ]] || { echo "FAIL: $agent is not built (cmake --build BUILD --target fabric-agent)"; exit 1; }
[[ -x "$fabricctl" ]] || { echo "FAIL: $fabricctl is not built"; exit 1; }
[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, cgroups, a systemd as PID 1)"
systemd_bin=/lib/systemd/systemd
[[ -x $systemd_bin ]] || skip "no $systemd_bin"
for tool in unshare nsenter setpriv systemd-sysusers; do
  command -v "$tool" >/dev/null || skip "$tool not installed"
done

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
indent() { sed 's/^/  /'; }

work=$(mktemp -d)
cgroups=()
ns_pid=""
cleanup() {
  for cg in "${cgroups[@]}"; do echo $$ >"$(dirname "$cg")/cgroup.procs" 2>/dev/null; done
  if [[ -n "$ns_pid" ]] && kill -0 "$ns_pid" 2>/dev/null; then
    kill -KILL "$ns_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$ns_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  # Depth first: the units' cgroups, then ours (empty once the namespace's processes are gone).
  for cg in "${cgroups[@]}"; do
    find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

# --- the units systemd will see --------------------------------------------------------------
mkdir -p "$work/units/fabric-agent.service.d"
# The binaries are copied into the sandbox's /run (its /tmp is a fresh tmpfs, and a build tree may
# live below /tmp).
sed "s|^ExecStart=/usr/bin/fabric-agent |ExecStart=/run/sdtest/bin/fabric-agent |" \
  "$dir/fabric-agent.service" \
  >"$work/units/fabric-agent.service"
# Test-only settings. The watchdog is shortened so one test run sees several pings (the daemon
# pings at half of whatever WatchdogSec says).
sanitizer_env=""
if grep -q __asan_init "$agent"; then
  # LeakSanitizer ptrace()s the process's own threads at exit, which SystemCallFilter= forbids.
  sanitizer_env="Environment=ASAN_OPTIONS=detect_leaks=0"
fi
cat >"$work/units/fabric-agent.service.d/test.conf" <<EOF
[Service]
WatchdogSec=3s
StandardOutput=append:/run/sdtest/agent.log
StandardError=inherit
$sanitizer_env
EOF
# Minimal stand-ins for the targets the unit's default dependencies name.
for t in sysinit basic shutdown network rdma-hw multi-user; do
  printf '[Unit]\nDescription=%s (sandbox test)\n' "$t" >"$work/units/$t.target"
done
printf '[Unit]\nDescription=system slice\n' >"$work/units/system.slice"
printf '[Unit]\nDescription=sandbox test\n' >"$work/units/sandbox-test.target"
printf '[Unit]\nDescription=exit\nDefaultDependencies=no\nSuccessAction=exit-force\n' \
  >"$work/units/sandbox-exit.target"

# PID 1 of the new namespaces: isolate the file system, install the shipped files, exec systemd.
cat >"$work/init.sh" <<EOF
#!/bin/bash
set -e
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/lock /run/sdtest/etc-upper /run/sdtest/etc-work /run/sdtest/lib-upper \
  /run/sdtest/lib-work
cp -r "$work/units" /run/sdtest/units
mkdir -p /run/sdtest/bin /run/sdtest/shipped
cp "$agent" "$fabricctl" /run/sdtest/bin/
cp "$dir/fabric-agent.sysusers.conf" "$dir/fabric-agent.default" "$dir/config.json" \
  "$dir/fabric-agent.tmpfiles.conf" /run/sdtest/shipped/
mount -t overlay overlay \
  -o lowerdir=/etc,upperdir=/run/sdtest/etc-upper,workdir=/run/sdtest/etc-work /etc
# /var/lib too: StateDirectory= (the health memory) is created there, and a machine's own
# /var/lib/fabric-agent neither leaks in nor changes.
mount -t overlay overlay \
  -o lowerdir=/var/lib,upperdir=/run/sdtest/lib-upper,workdir=/run/sdtest/lib-work /var/lib
mkdir -p /var/lib/fabric-agent
mount -t tmpfs -o mode=0755 tmpfs /var/lib/fabric-agent
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /var/tmp
mount -t tmpfs tmpfs /var/log
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
mount -o remount,bind,ro /sys
# What a package install does: the user, its directories (tmpfiles.d), the defaults file, the
# config.
systemd-sysusers - </run/sdtest/shipped/fabric-agent.sysusers.conf
systemd-tmpfiles --create /run/sdtest/shipped/fabric-agent.tmpfiles.conf
mkdir -p /etc/default /etc/fabric-agent
cp /run/sdtest/shipped/fabric-agent.default /etc/default/fabric-agent
cp /run/sdtest/shipped/config.json /etc/fabric-agent/config.json
hostname fabric-sandbox
export SYSTEMD_UNIT_PATH=/run/sdtest/units container=fabric-sandbox-test
export SYSTEMD_LOG_TARGET=console SYSTEMD_LOG_LEVEL=info
exec $systemd_bin --system --unit=sandbox-test.target --show-status=no
EOF
chmod +x "$work/init.sh"

# --- a cgroup subtree of our own in each hierarchy systemd manages ---------------------------
if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then unified=/sys/fs/cgroup
else unified=/sys/fs/cgroup/unified; fi
while IFS=: read -r _ ctrl path; do
  case "$ctrl" in
    "") base=$unified ;;
    name=systemd) base=/sys/fs/cgroup/systemd ;;
    devices | pids | memory) base=/sys/fs/cgroup/$ctrl ;;
    *) continue ;;
  esac
  [[ -d "$base" ]] || continue
  cg="$base${path%/}/fabric-sandbox-$$"
  if ! mkdir "$cg" 2>/dev/null || ! echo $$ >"$cg/cgroup.procs" 2>/dev/null; then
    skip "cannot create and enter cgroup $cg (read-only or delegated cgroups here)"
  fi
  cgroups+=("$cg")
done <<<"$(cat /proc/self/cgroup)"  # read whole first: moving changes the file under `read`

setsid unshare --mount --uts --net --ipc --pid --cgroup --fork --mount-proc "$work/init.sh" \
  >"$work/systemd.log" 2>&1 &
unshare_pid=$!
# Our shell stays behind in the test cgroups; leave them so they can be removed later.
for cg in "${cgroups[@]}"; do echo $$ >"$(dirname "$cg")/cgroup.procs" 2>/dev/null; done

for _ in $(seq 100); do
  ns_pid=$(pgrep -P "$unshare_pid" | head -n 1)
  [[ -n "$ns_pid" ]] && break
  sleep 0.1
done
[[ -n "$ns_pid" ]] || { cat "$work/systemd.log"; skip "unshare did not start"; }
in_ns() { nsenter -t "$ns_pid" -m -p -n -u -i -C "$@"; }
sctl() { in_ns systemctl "$@"; }

booted=""
for _ in $(seq 100); do
  state=$(sctl is-system-running 2>/dev/null)
  if [[ "$state" == running || "$state" == degraded ]]; then booted=1; break; fi
  kill -0 "$ns_pid" 2>/dev/null || break
  sleep 0.2
done
if [[ -z "$booted" ]]; then
  sed 's/^/  systemd: /' "$work/systemd.log" | tail -n 30
  skip "systemd did not come up in namespaces on this machine"
fi
pass "systemd $(sctl --version | head -n 1 | cut -d' ' -f2) is PID 1 of a sandbox"

show() { sctl show -p "$1" --value fabric-agent; }
agent_log() { in_ns cat /run/sdtest/agent.log 2>/dev/null; }
dump() {
  echo "  --- systemctl status"
  sctl status --no-pager fabric-agent 2>&1 | indent
  echo "  --- daemon output"
  agent_log | tail -n 20 | indent
  echo "  --- systemd"
  tail -n 20 "$work/systemd.log" | indent
}

# --- start -----------------------------------------------------------------------------------
if ! timeout 60 nsenter -t "$ns_pid" -m -p -n -u -i -C systemctl start fabric-agent; then
  fail "systemctl start fabric-agent"
  dump
  exit 1
fi
pass "fabric-agent.service started (Type=notify: READY=1 arrived)"
main_pid=$(show MainPID)
args=$(in_ns cat "/proc/$main_pid/cmdline" | tr '\0' ' ')
if [[ "$args" == *"--config=/etc/fabric-agent/config.json"* ]]; then
  pass "the shipped /etc/default file passed --config: $args"
else fail "the daemon runs without the shipped --config: $args"; fi

status=$(in_ns cat "/proc/$main_pid/status")
field() { awk -v k="$1:" '$1 == k { print $2 }' <<<"$status"; }
uid=$(in_ns id -u fabric-agent)
gid=$(in_ns id -g fabric-agent)
if [[ "$(field Uid)" == "$uid" && "$(field Gid)" == "$gid" ]]; then
  pass "runs as fabric-agent ($uid:$gid)"
else fail "runs as uid $(field Uid) gid $(field Gid)"; fi
# CAP_NET_ADMIN (12), CAP_NET_RAW (13), CAP_IPC_LOCK (14).
for c in CapEff CapPrm CapBnd CapAmb; do
  if [[ "$(field $c)" == 0000000000007000 ]]; then pass "$c = NET_ADMIN NET_RAW IPC_LOCK"
  else fail "$c is $(field $c), expected 0000000000007000"; fi
done
if [[ "$(field NoNewPrivs)" == 1 ]]; then pass "no_new_privs"
else fail "NoNewPrivs $(field NoNewPrivs)"; fi
if [[ "$(field Seccomp)" == 2 ]]; then pass "seccomp filter mode"
else fail "Seccomp $(field Seccomp)"; fi

# --- the socket ------------------------------------------------------------------------------
perms=$(in_ns stat -c '%a %U %G' /run/fabric-agent /run/fabric-agent/agent.sock)
if [[ "$perms" == $'750 fabric-agent fabric-agent\n660 fabric-agent fabric-agent' ]]; then
  pass "/run/fabric-agent 0750, agent.sock 0660, both fabric-agent:fabric-agent"
else fail "socket permissions: $perms"; fi
health() { in_ns "$@" /run/sdtest/bin/fabricctl health --liveness --timeout=5; }
if out=$(health); then pass "root: fabricctl health --liveness: $out"
else fail "root: fabricctl health --liveness: $out"; dump; fi
if out=$(health setpriv --reuid=65534 --regid=65534 --groups="$gid"); then
  pass "a fabric-agent group member connects"
else fail "a fabric-agent group member cannot connect: $out"; fi
if out=$(health setpriv --reuid=65534 --regid=65534 --clear-groups); then
  fail "a user outside the group connected: $out"
else pass "a user outside the group is refused"; fi
# The published host: the tmpfiles.d directory, written by the daemon, readable by anyone.
dir_mode=$(in_ns stat -c '%U %a' /run/fabric-env 2>&1)
if bytes=$(in_ns setpriv --reuid=65534 --regid=65534 --clear-groups \
  sh -c 'wc -c </run/fabric-env/host.pb' 2>&1) && [[ $dir_mode == "fabric-agent 755" ]] && ((bytes > 0))
then pass "published host: /run/fabric-env $dir_mode, host.pb ($bytes bytes) readable by nobody"
else fail "published host: /run/fabric-env '$dir_mode', host.pb read by nobody: '$bytes'"; fi

# Every event source opened, nothing refused by the sandbox: the daemon logs a warning when it
# degrades (netlink or uevents unavailable, an unwritable file) rather than failing to start.
# ("<4>warning:" is its format under journald, "fabric-agent: warning:" elsewhere.)
if complaints=$(agent_log | grep -E '^<[0-4]>|: (warning|error): '); then
  fail "the daemon complains under the sandbox:"
  indent <<<"$complaints"
else
  pass "the daemon logged no warning or error under the sandbox"
fi

# Nothing the daemon reads is hidden from it: its inventory has the same discovery problems
# (fields it could not read) as an unsandboxed discovery in the same namespaces. ProcSubset=pid,
# for one, would hide /proc/net/route and /proc/sys/kernel/*.
inventory() { in_ns /run/sdtest/bin/fabricctl inventory --json "$@" 2>/dev/null; }
problems() { grep -E '^ *"(field|path)":' <<<"$1" | sort; }
daemon_inv=$(inventory --target=unix:///run/fabric-agent/agent.sock)
local_inv=$(inventory --sysfs=/sys --procfs=/proc)
daemon_problems=$(problems "$daemon_inv")
local_problems=$(problems "$local_inv")
if ! grep -q '"sysfs_root"' <<<"$daemon_inv" || ! grep -q '"sysfs_root"' <<<"$local_inv"; then
  fail "fabricctl inventory --json printed no inventory (daemon: ${#daemon_inv} bytes," \
    "local: ${#local_inv} bytes)"
elif [[ "$daemon_problems" == "$local_problems" ]]; then
  pass "the daemon's inventory has the problems of an unsandboxed discovery" \
    "($(grep -c '"field"' <<<"$local_problems") here)"
else
  fail "the sandbox hides files from discovery; daemon vs unsandboxed:"
  diff <(echo "$daemon_problems") <(echo "$local_problems") | indent
fi

# --- watchdog and reload ---------------------------------------------------------------------
sleep 4  # more than WatchdogSec=3s: without pings systemd would have killed it by now.
if [[ "$(show ActiveState)" == active && "$(show NRestarts)" == 0 &&
  -n "$(show WatchdogTimestamp)" ]]; then
  pass "watchdog: still active after more than WatchdogSec, pinged at $(show WatchdogTimestamp)"
else fail "watchdog: state $(show ActiveState), restarts $(show NRestarts)"; fi
sctl reload fabric-agent
sleep 0.5
if [[ "$(show MainPID)" == "$main_pid" && "$(show ActiveState)" == active ]] &&
  agent_log | grep -q "reloaded .*(SIGHUP)"; then
  pass "systemctl reload: same process, config re-read"
else fail "systemctl reload"; dump; fi

# --- stop ------------------------------------------------------------------------------------
start_ns=$(date +%s%N)
sctl stop fabric-agent
stop_ms=$((($(date +%s%N) - start_ns) / 1000000))
if [[ "$(show Result)" == success && "$(show ExecMainStatus)" == 0 ]]; then
  pass "systemctl stop: exit status 0 in ${stop_ms} ms"
else fail "systemctl stop: result $(show Result), status $(show ExecMainStatus)"; fi
if in_ns test -e /run/fabric-agent; then fail "/run/fabric-agent left behind after stop"
else pass "/run/fabric-agent removed after stop"; fi

# --- a bad config: no restart loop -----------------------------------------------------------
in_ns sh -c 'echo "{\"selection\": {\"noSuchKey\": 1}}" >/etc/fabric-agent/config.json'
sctl reset-failed fabric-agent 2>/dev/null
sctl start fabric-agent 2>/dev/null
sleep 3  # more than RestartSec=2s
if [[ "$(show ActiveState)" == failed && "$(show ExecMainStatus)" == 2 &&
  "$(show NRestarts)" == 0 ]]; then
  pass "a bad config: exit 2, unit failed, not restarted (RestartPreventExitStatus=2)"
else
  fail "a bad config: state $(show ActiveState), status $(show ExecMainStatus)," \
    "restarts $(show NRestarts)"
fi

# --- shut the sandbox down -------------------------------------------------------------------
sctl start sandbox-exit.target 2>/dev/null
for _ in $(seq 50); do kill -0 "$ns_pid" 2>/dev/null || break; sleep 0.1; done

if ((failures > 0)); then
  echo "sandbox_test: $failures failure(s)"
  exit 1
fi
echo "sandbox_test: all checks passed"

#!/usr/bin/env bash
# System test of fabric_spank.so on a real one-node Slurm cluster (shared/notes/slurm-rig.md):
# munged, slurmctld and slurmd under a private temp root and private ports, 8 fake GPUs
# (mknod'ed 195:N nodes in gres.conf), and the real fabric-agent on the 8-GPU example host
# dgx-h100-ib. Checks what the tasks of srun and sbatch get, that the user's settings win, that a
# task still runs when neither the agent nor local discovery answers, and prints the plugin's
# added task start time (a figure, not an assertion).
# The tasks get their settings through fabric-env (the agent's published host) when no target is
# named, else through fabricctl.
#   usage: spank_test.sh --plugin SO --agent BIN --fabricctl BIN --fabric-env BIN --mkhost BIN
#          --nccl-env-plugin SO
# Exits 77 (skip) when not root or when Slurm or munge is missing; with CI=true a missing tool is
# a failure instead (CI installs them: scripts/install-deps.sh).
set -uo pipefail

plugin= agent= fabricctl= fabric_env= mkhost= nccl_env_plugin=
bench_runs=${FABRIC_SPANK_BENCH_RUNS:-9}  # Read now: FABRIC_* is cleared before the tasks run.
while (($#)); do
  case $1 in
    --plugin) plugin=$2 ;;
    --agent) agent=$2 ;;
    --fabricctl) fabricctl=$2 ;;
    --fabric-env) fabric_env=$2 ;;
    --mkhost) mkhost=$2 ;;
    --nccl-env-plugin) nccl_env_plugin=$2 ;;
    *) echo "usage: $0 --plugin SO --agent BIN --fabricctl BIN --fabric-env BIN --mkhost BIN" \
         "--nccl-env-plugin SO" >&2
       exit 2 ;;
  esac
  shift 2
done
for f in "$plugin" "$agent" "$fabricctl" "$fabric_env" "$mkhost" "$nccl_env_plugin"; do
  [[ -n $f && -e $f ]] || { echo "spank_test: missing or unbuilt: '$f'" >&2; exit 2; }
done
# slurmstepd and the tasks run elsewhere (the spool): absolute paths.
plugin=$(realpath "$plugin") agent=$(realpath "$agent") fabricctl=$(realpath "$fabricctl")
fabric_env=$(realpath "$fabric_env") mkhost=$(realpath "$mkhost")
nccl_env_plugin=$(realpath "$nccl_env_plugin")

if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (munged, slurmd, mknod)"; exit 77; fi
for tool in munged mungekey slurmctld slurmd srun sbatch sinfo; do
  if ! command -v "$tool" >/dev/null && [[ ! -x /usr/sbin/$tool ]]; then
    if [[ ${CI:-} == true ]]; then
      echo "FAIL: $tool is not installed, and CI must run this test (scripts/install-deps.sh)" >&2
      exit 1
    fi
    echo "SKIP: $tool is not installed (slurmctld slurmd slurm-client munge: install-deps.sh)"
    exit 77
  fi
done
export PATH=$PATH:/usr/sbin

R=$(mktemp -d /var/tmp/fabric-spank.XXXXXX)
agent_pid=
failures=0
cleanup() {
  [[ -n $agent_pid ]] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  local pids= p
  for d in slurmd slurmctld munged; do
    [[ -s $R/run/$d.pid ]] && pids="$pids $(cat "$R/run/$d.pid")"
  done
  [[ -n $pids ]] && kill -TERM $pids 2>/dev/null
  # Reparented daemons stay zombies until PID 1 reaps them: a zombie counts as gone.
  for _ in $(seq 100); do
    local alive=
    for p in $pids; do
      [[ -e /proc/$p ]] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null && alive=1
    done
    [[ -z $alive ]] && break
    sleep 0.05
  done
  rm -rf "$R"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
logs() {
  for l in "$R"/log/*.log "$R"/agent.log; do
    [[ -s $l ]] && { echo "--- $l (tail)"; tail -n 20 "$l"; }
  done
}
die() { echo "FAIL: $*"; logs; exit 1; }

# Two free TCP ports next to each other (slurmctld, slurmd), away from the rig's 16817/16818.
port_free() { ! ss -Htln "sport = :$1" 2>/dev/null | grep -q .; }
ctld_port=
for _ in $(seq 50); do
  p=$((20000 + RANDOM % 20000))
  if port_free $p && port_free $((p + 1)); then ctld_port=$p; break; fi
done
[[ -n $ctld_port ]] || die "no two free ports found"

H=$(hostname -s)
mkdir -p "$R"/{etc,log,run,state,spool,dev,munge,host,empty}
chmod 755 "$R" "$R/run"
chmod 700 "$R/munge"  # munged: socket dir o+x, key dir private
mungekey -c -k "$R/munge/munge.key" || die "mungekey failed"
munged -S "$R/run/munge.socket" --key-file="$R/munge/munge.key" --pid-file="$R/run/munged.pid" \
  --log-file="$R/log/munged.log" --seed-file="$R/munge/munged.seed" || die "munged did not start"
for i in 0 1 2 3 4 5 6 7; do mknod "$R/dev/nvidia$i" c 195 $i || die "mknod failed"; done
cat >"$R/etc/slurm.conf" <<EOF
ClusterName=fabrictest
SlurmctldHost=$H(127.0.0.1)
SlurmUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
AuthType=auth/munge
AuthInfo=socket=$R/run/munge.socket
StateSaveLocation=$R/state
SlurmdSpoolDir=$R/spool
SlurmctldPidFile=$R/run/slurmctld.pid
SlurmdPidFile=$R/run/slurmd.pid
SlurmctldLogFile=$R/log/slurmctld.log
SlurmdLogFile=$R/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
GresTypes=gpu
PlugStackConfig=$R/etc/plugstack.conf
NodeName=$H NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 Gres=gpu:8 State=UNKNOWN
PartitionName=fabrictest Nodes=$H Default=YES MaxTime=INFINITE State=UP
EOF
printf 'AutoDetect=off\nName=gpu File=%s/dev/nvidia[0-7]\n' "$R" >"$R/etc/gres.conf"
: >"$R/etc/plugstack.conf"
export SLURM_CONF=$R/etc/slurm.conf
slurmctld || die "slurmctld did not start"
slurmd || die "slurmd did not start"
up=
for _ in $(seq 150); do
  [[ $(sinfo -h -n "$H" -o %t 2>/dev/null) == idle ]] && { up=1; break; }
  sleep 0.1
done
[[ -n $up ]] || die "the Slurm node is not idle after 15 s"

"$mkhost" dgx-h100-ib "$R/host" >/dev/null || die "fabric-mkhost dgx-h100-ib failed"
sock=$R/run/agent.sock
ctl() { timeout 30 "$fabricctl" "$@" --target="unix://$sock" 2>/dev/null; }
start_agent() {
  "$agent" --socket="$sock" --sysfs="$R/host/sys" --procfs="$R/host/proc" \
    --host-file-dir="$R/run/fe" >>"$R/agent.log" 2>&1 &
  agent_pid=$!
  for _ in $(seq 100); do
    ctl health --liveness >/dev/null && return 0
    kill -0 $agent_pid 2>/dev/null || break
    sleep 0.1
  done
  die "fabric-agent did not answer within 10 s"
}
start_agent

plugstack() {  # ARGS...: the plugin's line; none: no plugin
  if (($#)); then echo "required $plugin $*" >"$R/etc/plugstack.conf"; else : >"$R/etc/plugstack.conf"; fi
}
plugstack fabricctl="$fabricctl" target="unix://$sock" fallback_sysfs="$R/host/sys"

# The caller's own fabric variables would reach the tasks (srun passes its environment).
for v in $(compgen -e); do
  case $v in NCCL_* | UCX_* | NVSHMEM_* | UCCL_* | MC_* | FABRIC_*) unset "$v" ;; esac
done
run() {  # srun ARGS...: stdout to $R/out, stderr to $R/err, labelled by task
  timeout 120 srun --label "$@" >"$R/out" 2>"$R/err"
}
task() { sed -n "s/^ *$1: //p" "$R/out"; }  # task N's lines
val() { task "$1" | sed -n "s/^$2=//p"; }  # task N's value of VAR
expected_pin() { ctl select --gpus="$1" | sed -n 's/^GPU .* -> \([^ ]*\) .*/\1/p' | head -n 1; }

# 1. Two tasks, one GPU each: the same job variables, each its own GPU's NIC.
run -n2 --gpus-per-task=1 env || die "srun -n2 --gpus-per-task=1 env failed: $(cat "$R/err")"
nccl0=$(task 0 | grep '^NCCL_' | sort)
nccl1=$(task 1 | grep '^NCCL_' | sort)
gpu0=$(val 0 CUDA_VISIBLE_DEVICES) gpu1=$(val 1 CUDA_VISIBLE_DEVICES)
pin0=$(val 0 UCX_NET_DEVICES) pin1=$(val 1 UCX_NET_DEVICES)
[[ -n $gpu0 && -n $gpu1 && $gpu0 != "$gpu1" ]] || die "tasks' GPUs: '$gpu0' '$gpu1' (gres)"
if [[ -n $nccl0 && $nccl0 == "$nccl1" ]]; then pass "both tasks: the same NCCL_* ($(echo $nccl0))"
else fail "NCCL_* differ or are missing: task 0 '$nccl0', task 1 '$nccl1'"; fi
want_hca=$(ctl env --gpus="$gpu0,$gpu1" --format=nul | tr '\0' '\n' | sed -n 's/^NCCL_IB_HCA=//p')
if [[ -n $want_hca && $(val 0 NCCL_IB_HCA) == "$want_hca" ]]; then
  pass "NCCL_IB_HCA is the step's ($want_hca, fabricctl env --gpus=$gpu0,$gpu1)"
else fail "NCCL_IB_HCA '$(val 0 NCCL_IB_HCA)', fabricctl env --gpus=$gpu0,$gpu1 says '$want_hca'"; fi
want0=$(expected_pin "$gpu0") want1=$(expected_pin "$gpu1")
if [[ -n $want0 && $pin0 == "$want0" && $pin1 == "$want1" && $pin0 != "$pin1" ]]; then
  pass "pins: GPU $gpu0 -> $pin0, GPU $gpu1 -> $pin1 (as fabricctl select)"
else fail "pins: GPU $gpu0 -> '$pin0' (select: '$want0'), GPU $gpu1 -> '$pin1' (select: '$want1')"; fi
grep -q 'fabric-env' "$R/err" && fail "stderr has a fabric-env line: $(cat "$R/err")"

# 1b. No target named: fabric-env answers from the agent's published host, the same settings.
# The fabricctl named is a fake that fails: only fabric-env can have answered.
printf '#!/bin/sh\necho "fake fabricctl was asked" >&2\nexit 1\n' >"$R/nofabricctl"
chmod 755 "$R/nofabricctl"
plugstack fabricctl="$R/nofabricctl" fabric_env="$fabric_env" host_file="$R/run/fe/host.pb"
run -n2 --gpus-per-task=1 env || die "srun (fabric-env) failed: $(cat "$R/err")"
fe_want0=$(expected_pin "$(val 0 CUDA_VISIBLE_DEVICES)")
fe_want1=$(expected_pin "$(val 1 CUDA_VISIBLE_DEVICES)")
if [[ $(val 0 NCCL_IB_HCA) == "$want_hca" && $(val 1 NCCL_IB_HCA) == "$want_hca" &&
  -n $fe_want0 && $(val 0 UCX_NET_DEVICES) == "$fe_want0" &&
  $(val 1 UCX_NET_DEVICES) == "$fe_want1" ]] && ! grep -q 'fabric-env' "$R/err"; then
  pass "fabric-env from the published host: the same NCCL_IB_HCA and pins, fabricctl not asked"
else fail "fabric-env: NCCL_IB_HCA '$(val 0 NCCL_IB_HCA)', pins '$(val 0 UCX_NET_DEVICES)'" \
  "'$(val 1 UCX_NET_DEVICES)', stderr '$(cat "$R/err")'"; fi
# 1c. nccl_env_plugin=: NCCL gets the environment plugin in place of its variables; a task that
# loads it as NCCL does (dlopen, ncclEnvPlugin_v1, init with NCCL's version) gets the step's
# NCCL_IB_HCA for NCCL 2.30.7, and the pins still come as variables.
plugstack fabricctl="$R/nofabricctl" fabric_env="$fabric_env" host_file="$R/run/fe/host.pb" \
  nccl_env_plugin="$nccl_env_plugin"
cat >"$R/nccl_load.py" <<'PY'
import ctypes, os
v1 = ctypes.CFUNCTYPE
class Plugin(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("init", v1(ctypes.c_int, ctypes.c_uint8, ctypes.c_uint8, ctypes.c_uint8, ctypes.c_char_p)),
                ("finalize", v1(ctypes.c_int)),
                ("getEnv", v1(ctypes.c_char_p, ctypes.c_char_p))]
p = Plugin.in_dll(ctypes.CDLL(os.environ["NCCL_ENV_PLUGIN"]), "ncclEnvPlugin_v1")
assert p.init(2, 30, 7, b"") == 0
print("PLUGIN_HCA=" + (p.getEnv(b"NCCL_IB_HCA") or b"<null>").decode())
PY
FABRIC_ENV_BIN=$fabric_env run -n2 --gpus-per-task=1 sh -c "env; /usr/bin/python3 -E $R/nccl_load.py" ||
  die "srun (nccl_env_plugin) failed: $(cat "$R/err")"
pl_gpus="$(val 0 CUDA_VISIBLE_DEVICES),$(val 1 CUDA_VISIBLE_DEVICES)"
pl_want=$(ctl env --gpus="$pl_gpus" --nccl-version=2.30.7 --format=nul | tr '\0' '\n' |
  sed -n 's/^NCCL_IB_HCA=//p')
if [[ $(val 0 NCCL_ENV_PLUGIN) == "$nccl_env_plugin" && -z $(task 0 | grep '^NCCL_IB_HCA=') &&
  -n $pl_want && $(val 0 PLUGIN_HCA) == "$pl_want" && $(val 1 PLUGIN_HCA) == "$pl_want" &&
  -n $(val 0 UCX_NET_DEVICES) ]] && ! grep -qE 'fabric-env|fabric NCCL env plugin' "$R/err"; then
  pass "nccl_env_plugin: NCCL_ENV_PLUGIN set, no NCCL_IB_HCA variable; the plugin loaded as NCCL does answers $pl_want"
else fail "nccl_env_plugin: NCCL_ENV_PLUGIN '$(val 0 NCCL_ENV_PLUGIN)', plugin's NCCL_IB_HCA" \
  "'$(val 0 PLUGIN_HCA)'/'$(val 1 PLUGIN_HCA)' (want '$pl_want'), stderr '$(cat "$R/err")'"; fi

# A file fabric-env cannot read: fabricctl is asked, and the line says why.
echo "not a published host" >"$R/corrupt.pb"
plugstack fabricctl="$fabricctl" fabric_env="$fabric_env" host_file="$R/corrupt.pb" \
  fallback_sysfs="$R/host/sys"
run -n1 --gpus-per-task=1 env || die "srun (corrupt host file) failed: $(cat "$R/err")"
if [[ -n $(val 0 NCCL_IB_HCA) ]] && grep -q "fabric-env: .*$R/corrupt.pb.*asked fabricctl" "$R/err"
then pass "unreadable host file: fabricctl answered, stderr says why"
else fail "corrupt host file: NCCL_IB_HCA '$(val 0 NCCL_IB_HCA)', stderr '$(cat "$R/err")'"; fi
plugstack fabricctl="$fabricctl" target="unix://$sock" fallback_sysfs="$R/host/sys"

# 2. --fabric-env=off: nothing from the plugin.
run --fabric-env=off -n2 --gpus-per-task=1 env || die "srun --fabric-env=off failed: $(cat "$R/err")"
if grep -qE '^ *[0-9]+: (NCCL_|UCX_NET_DEVICES=)' "$R/out"; then
  fail "--fabric-env=off: $(grep -E 'NCCL_|UCX_NET' "$R/out" | head -n 3)"
else pass "--fabric-env=off: no NCCL_*/UCX_NET_DEVICES"; fi

# default=off in plugstack.conf: off unless the user asks for it.
plugstack fabricctl="$fabricctl" target="unix://$sock" default=off
run -n1 --gpus-per-task=1 env || die "srun (default=off) failed: $(cat "$R/err")"
off=$(grep -c '^ *0: NCCL_IB_HCA=' "$R/out")
run --fabric-env=on -n1 --gpus-per-task=1 env || die "srun --fabric-env=on failed: $(cat "$R/err")"
on=$(grep -c '^ *0: NCCL_IB_HCA=' "$R/out")
if [[ $off == 0 && $on == 1 ]]; then pass "default=off: none; --fabric-env=on: NCCL_IB_HCA"
else fail "default=off: $off NCCL_IB_HCA lines (want 0), with --fabric-env=on $on (want 1)"; fi

# A malformed plugstack.conf argument: the task runs, and says so.
plugstack fabricctl="$fabricctl" timeout=forever
run -n1 sh -c 'echo task-ran' && rc=0 || rc=$?
if [[ $rc == 0 && $(task 0) == task-ran ]] && grep -q "fabric-env: .*'timeout=forever'" "$R/err"
then pass "bad plugstack.conf argument: task ran, stderr names it"
else fail "bad argument: rc $rc, stdout '$(cat "$R/out")', stderr '$(cat "$R/err")'"; fi
plugstack fabricctl="$fabricctl" target="unix://$sock" fallback_sysfs="$R/host/sys"

# 3. The user's value wins, also the empty string.
for mine in mine ""; do
  NCCL_IB_HCA=$mine run -n2 --gpus-per-task=1 env || die "srun with NCCL_IB_HCA='$mine' failed"
  got=$(grep -cx " *[01]: NCCL_IB_HCA=$mine" "$R/out")
  others=$(grep -c '^ *[01]: NCCL_SOCKET_IFNAME=' "$R/out")
  if [[ $got == 2 && $others == 2 ]]; then pass "NCCL_IB_HCA='$mine' from the user kept in both tasks"
  else fail "NCCL_IB_HCA='$mine': $(grep 'NCCL_IB_HCA\|NCCL_SOCKET' "$R/out" | tr '\n' ' ')"; fi
done

# 4. sbatch: the batch script's variables do not pin the steps' tasks to the batch's GPU.
cat >"$R/job.sh" <<'EOF'
#!/bin/bash
echo "batch UCX_NET_DEVICES=$UCX_NET_DEVICES"
srun --label -n2 --gpus-per-task=1 env
EOF
if timeout 120 sbatch -W -o "$R/job.out" -n2 --gres=gpu:2 "$R/job.sh" >/dev/null 2>"$R/err"; then
  cp "$R/job.out" "$R/out"
  sg0=$(val 0 CUDA_VISIBLE_DEVICES) sg1=$(val 1 CUDA_VISIBLE_DEVICES)
  sp0=$(val 0 UCX_NET_DEVICES) sp1=$(val 1 UCX_NET_DEVICES)
  w0=$(expected_pin "$sg0") w1=$(expected_pin "$sg1")
  if [[ -n $sg0 && -n $w0 && $sp0 == "$w0" && $sp1 == "$w1" && $sp0 != "$sp1" ]]; then
    pass "sbatch steps: GPU $sg0 -> $sp0, GPU $sg1 -> $sp1 ($(grep '^batch' "$R/job.out"))"
  else fail "sbatch steps: GPU $sg0 -> '$sp0' (want '$w0'), GPU $sg1 -> '$sp1' (want '$w1')"; fi
else
  fail "sbatch -W failed: $(cat "$R/err") $(cat "$R/job.out" 2>/dev/null)"
fi

# 5. Without the agent fabricctl discovers the host itself (fallback_sysfs).
kill -TERM $agent_pid && wait $agent_pid 2>/dev/null
agent_pid=
run -n2 --gpus-per-task=1 env || die "srun without the agent failed: $(cat "$R/err")"
if [[ $(val 0 NCCL_IB_HCA) == "$want_hca" && $(val 0 UCX_NET_DEVICES) == "$pin0" ]]; then
  pass "agent stopped: the same settings from fallback_sysfs"
else fail "agent stopped, fallback: NCCL_IB_HCA '$(val 0 NCCL_IB_HCA)', pin '$(val 0 UCX_NET_DEVICES)'"; fi

# 6. Neither the agent nor local discovery: the tasks run, each says why in one line.
plugstack fabricctl="$fabricctl" target="unix://$sock" fallback_sysfs="$R/empty"
run -n2 --gpus-per-task=1 sh -c 'echo task-ran; env' && rc=0 || rc=$?
lines=$(grep -c 'fabric-env: no fabric settings for this task: .' "$R/err")
for t in 0 1; do
  why=$(grep -c "^ *$t: fabric-env: no fabric settings for this task: ." "$R/err")
  [[ $why == 1 ]] || fail "task $t: $why fabric-env lines on stderr (want 1): $(cat "$R/err")"
done
# The reason names both tries: the agent's (exit 3: unreachable), then the fallback sysfs.
both="the agent did not answer (.* 3: .*), nor did discovery from $R/empty (.* exited with [0-9]"
if [[ $rc == 0 && $(grep -c '^ *[01]: task-ran$' "$R/out") == 2 && $lines == 2 ]] &&
  grep -q "this task: $both" "$R/err" &&
  ! grep -qE '^ *[01]: NCCL_' "$R/out"; then
  pass "no agent, no sysfs: tasks ran (exit 0); stderr: $(grep -m1 fabric-env "$R/err")"
else fail "no agent, no sysfs: rc $rc, stdout '$(grep task-ran "$R/out")', stderr '$(cat "$R/err")'"; fi

# 7. A fabricctl that hangs is killed at the plugin's timeout; the task still runs.
printf '#!/bin/sh\nexec sleep 30\n' >"$R/hang"
chmod 755 "$R/hang"
plugstack fabricctl="$R/hang" timeout=300ms
start=$(date +%s%N)
run -n1 sh -c 'echo task-ran' && rc=0 || rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [[ $rc == 0 && $(task 0) == task-ran ]] && grep -q 'within 300ms' "$R/err" && ((ms < 10000)); then
  pass "a hanging fabricctl: killed at 300ms, task ran (srun took ${ms}ms)"
else fail "hanging fabricctl: rc $rc, ${ms}ms, stdout '$(cat "$R/out")', stderr '$(cat "$R/err")'"; fi

# Records that are not NAME=VALUE with a variable's name are skipped; a value may hold '=' and
# a newline. Fake fabricctls print them, and too much (these cases are under test, not fabricctl).
cat >"$R/odd" <<'EOF'
#!/bin/sh
printf '%s\0' 'FABRIC_T_GOOD=a=b
c' 1BAD=x no_equals =y FABRIC_SPANK_OWNED=z
EOF
cat >"$R/big" <<'EOF'
#!/bin/sh
head -c 70000 /dev/zero | tr '\0' a
EOF
chmod 755 "$R/odd" "$R/big"
plugstack fabricctl="$R/odd"
run -n1 printenv FABRIC_T_GOOD && rc=0 || rc=$?
if [[ $rc == 0 && $(task 0 | tr '\n' '~') == "a=b~c~" ]] && grep -q 'skipped 4 malformed' "$R/err"
then pass "odd records: the valid one set (with '=' and a newline), 4 skipped and counted"
else fail "odd records: rc $rc, stdout '$(cat "$R/out")', stderr '$(cat "$R/err")'"; fi
plugstack fabricctl="$R/big"
run -n1 sh -c 'echo task-ran' && rc=0 || rc=$?
if [[ $rc == 0 && $(task 0) == task-ran ]] && grep -q 'printed more than 65536 bytes' "$R/err"
then pass "70000 bytes from fabricctl: cut off, the task ran"
else fail "big output: rc $rc, stdout '$(cat "$R/out")', stderr '$(cat "$R/err")'"; fi

# 8. The added task start time: srun -n1 true without the plugin, with it through fabric-env
# (the published host) and through fabricctl (the agent), interleaved.
start_agent
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
n=$bench_runs
: >"$R/with" && : >"$R/without" && : >"$R/file"
for _ in $(seq "$n"); do
  for mode in with file without; do
    if [[ $mode == with ]]; then plugstack fabricctl="$fabricctl" target="unix://$sock"
    elif [[ $mode == file ]]; then
      plugstack fabric_env="$fabric_env" host_file="$R/run/fe/host.pb"
    else plugstack; fi
    start=$(date +%s%N)
    timeout 60 srun -n1 true 2>>"$R/err.bench" || fail "srun -n1 true ($mode the plugin) failed"
    echo $((($(date +%s%N) - start) / 1000000)) >>"$R/$mode"
  done
done
with=$(median <"$R/with") without=$(median <"$R/without") file=$(median <"$R/file")
echo "bench: srun -n1 true, median of $n: ${without} ms without the plugin;" \
  "${file} ms through fabric-env, added $((file - without)) ms ($fabric_env);" \
  "${with} ms through fabricctl, added $((with - without)) ms ($fabricctl)"

if ((failures)); then logs; echo "spank_test: $failures check(s) failed"; exit 1; fi
echo "spank_test: all checks passed"

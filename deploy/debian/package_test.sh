#!/usr/bin/env bash
# The Debian packages on a bare Debian 12: a fresh root made by mmdebstrap from the Debian mirror
# this machine's apt uses (minbase plus systemd, as a GPU host has), the built .debs installed in
# it by apt, which resolves their Depends, then what the packages promise:
#   - the binaries run (--version; fabricctl inventory on an example host; the agent itself
#     serving on /run/fabric-agent/agent.sock as its user), fabric-env and fabric-cni are static;
#   - the unit in /lib/systemd/system with the paths it names present (binary, defaults, config,
#     Documentation=), the user and group, /run/fabric-agent, /run/fabric-env and /run/cdi, the
#     man pages and completions, the conffiles registered;
#   - enabled, never started: the root pretends systemd runs (/run/systemd/system) and a logging
#     systemctl stands in for it, so a start, restart or stop shows in its log;
#   - an upgrade (the same package repacked with a higher version) keeps an edited conffile, the
#     state and the operator's disable, and restarts the agent only with try-restart;
#   - remove stops it and keeps state and configuration; purge drops both (the user stays);
#   - fabric-agent-spank, when built: in Slurm's plugin directory, naming /usr/bin's binaries.
#   usage: package_test.sh --debs=DIR --mkhost=PATH [--cache=DIR] [--prefix=PREFIX] [--keep]
# --keep leaves the root (its path is printed) for a look after a failure. --cache keeps the
# bare root (a tarball) and apt's downloads between runs. Exit 77 (skipped) when not root, when
# the build does not install to /usr (no packages), or without mmdebstrap or a reachable mirror;
# a missing .deb is a failure.
set -euo pipefail

debs="" mkhost="" cache=/var/tmp/fabric-package-test prefix=/usr keep=0
for arg in "$@"; do
  case $arg in
    --debs=*) debs=${arg#*=} ;;
    --mkhost=*) mkhost=${arg#*=} ;;
    --cache=*) cache=${arg#*=} ;;
    --prefix=*) prefix=${arg#*=} ;;
    --keep) keep=1 ;;
    *) echo "usage: $0 --debs=DIR --mkhost=PATH [--cache=DIR] [--prefix=PREFIX] [--keep]" >&2
       exit 2 ;;
  esac
done
if [[ $(id -u) -ne 0 ]]; then echo "SKIPPED: needs root (chroot, mounts)"; exit 77; fi
if [[ $prefix != /usr ]]; then
  echo "SKIPPED: this build installs to $prefix; the packages need -DCMAKE_INSTALL_PREFIX=/usr"
  exit 77
fi
shopt -s nullglob
agent_debs=("$debs"/fabric-agent_*.deb)
spank_debs=("$debs"/fabric-agent-spank_*.deb)
shopt -u nullglob
if ((${#agent_debs[@]} != 1)); then
  echo "FAILED: want one fabric-agent_*.deb in '$debs', found ${#agent_debs[@]}" \
    "(cmake --build BUILD --target fabric_debs)" >&2
  exit 1
fi
agent_deb=${agent_debs[0]}
spank_deb=${spank_debs[0]:-}
[[ -x $mkhost ]] || { echo "FAILED: no fabric-mkhost at '$mkhost'" >&2; exit 1; }
if ! command -v mmdebstrap >/dev/null; then
  echo "SKIPPED: mmdebstrap missing (apt-get install mmdebstrap)"
  exit 77
fi

failures=0
check() {  # DESCRIPTION COMMAND...: one check; the command's output is shown when it fails
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then
    echo "ok: $what"
  else
    echo "FAILED: $what"
    [[ -z $out ]] || printf '%s\n' "$out" | sed 's/^/    /' | head -n 20
    failures=$((failures + 1))
  fi
}
t0=$SECONDS phase_start=$SECONDS
phase() { echo "== $1: $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }

# --- the bare root --------------------------------------------------------------------------
# The Debian 12 suites this machine's apt reads (the same mirror, updates and security), else
# deb.debian.org.
# shellcheck disable=SC2016  # apt's own $(FIELD) placeholders
mapfile -t sources < <(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' \
    'Identifier: Packages' 2>/dev/null |
  awk '$2 ~ /^bookworm(-updates|-security)?$/ { c[$1 " " $2] = c[$1 " " $2] " " $3 }
       END { for (k in c) print "deb " k c[k] }' | sort)
if ((${#sources[@]} == 0)); then
  sources=("deb http://deb.debian.org/debian bookworm main"
           "deb http://deb.debian.org/debian bookworm-updates main"
           "deb http://deb.debian.org/debian-security bookworm-security main")
fi
include=systemd,ca-certificates
key=$(printf '%s\n' "$include" "${sources[@]}" | sha256sum | cut -c1-12)
tarball=$cache/bookworm-minbase-$key.tar
mkdir -p "$cache/archives/partial"
if [[ ! -f $tarball ]]; then
  echo "== making the bare root (cached as $tarball) from:"
  printf '   %s\n' "${sources[@]}"
  # Package lists kept: apt-get update in the copy then only checks them.
  if ! mmdebstrap --quiet --variant=minbase --include="$include" --skip=cleanup/apt/lists \
      --format=tar bookworm "$tarball.tmp" "${sources[@]}"; then
    rm -f "$tarball.tmp"
    echo "SKIPPED: mmdebstrap could not make a Debian 12 root (no mirror reachable?)"
    exit 77
  fi
  mv "$tarball.tmp" "$tarball"
  phase "bare root made (mmdebstrap, not cached before)"
fi

root=$(mktemp -d /var/tmp/fabric-package-root.XXXXXX)
agent_pid=""
cleanup() {
  [[ -z $agent_pid ]] || kill "$agent_pid" 2>/dev/null || true
  for m in var/cache/apt/archives proc; do umount -l "$root/$m" 2>/dev/null || true; done
  if ((keep)); then echo "kept the root: $root"; else rm -rf --one-file-system "$root"; fi
  echo "== cleaned up: $((SECONDS - phase_start)) s; $((SECONDS - t0)) s in all"
}
trap cleanup EXIT
tar -C "$root" -xf "$tarball"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --bind "$cache/archives" "$root/var/cache/apt/archives"
mkdir -p "$root/tmp/debs"
cp "$agent_deb" ${spank_deb:+"$spank_deb"} "$root/tmp/debs/"
# "systemd is running" for the maintainer scripts; the stand-in logs what they ask of it, does
# nothing of what only a running manager does, and hands the unit-file operations (preset,
# enable, disable, is-enabled) to the real systemctl, offline (--root=/) in the root.
mkdir -p "$root/run/systemd/system"
cat >"$root/usr/local/sbin/systemctl" <<'EOF'
#!/bin/sh
echo "$*" >>/var/log/systemctl-calls
for a in "$@"; do
  case $a in
    is-active) exit 3 ;;
    start | stop | restart | try-restart | reload | reload-or-restart | daemon-reload) exit 0 ;;
  esac
done
exec /usr/bin/systemctl --root=/ "$@"
EOF
chmod 0755 "$root/usr/local/sbin/systemctl"
# apt runs dpkg, and so the maintainer scripts, with a PATH of its own (DPkg::Path).
echo 'DPkg::Path "/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin";' \
  >"$root/etc/apt/apt.conf.d/99fabric-package-test"
in_root() {
  chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"
}
calls=$root/var/log/systemctl-calls  # what the maintainer scripts asked of systemd
: >"$calls"
phase "fresh root unpacked"

if ! in_root apt-get update -qq >"$root/tmp/update.log" 2>&1; then
  cat "$root/tmp/update.log"
  echo "SKIPPED: apt-get update failed in the bare root (no mirror reachable?)"
  exit 77
fi
phase "apt-get update"

# --- install ---------------------------------------------------------------------------------
agent_name=$(basename "$agent_deb")
version=$(dpkg-deb -f "$agent_deb" Version)
if ! in_root sh -c "cd /tmp/debs && apt-get install -y -q --no-install-recommends ./$agent_name" \
    >"$root/tmp/install.log" 2>&1; then
  cat "$root/tmp/install.log"
  echo "FAILED: apt-get install ./$agent_name"
  exit 1
fi
phase "apt-get install ./$agent_name (its Depends from the mirror)"

check "fabric-agent --version is $version" \
  sh -c "chroot '$root' /usr/bin/fabric-agent --version | grep -Fx 'fabric-agent $version'"
check "fabricctl --version runs" in_root fabricctl --version
check "fabric-probe --help runs" in_root fabric-probe --help
for b in /usr/bin/fabric-env /usr/lib/cni/fabric-cni; do
  check "$b is static (it runs in other containers and on the node)" \
    sh -c "chroot '$root' ldd '$b' 2>&1 | grep -q 'not a dynamic executable'"
done
check "fabric-cni --version runs" in_root /usr/lib/cni/fabric-cni --version
plugin=$(cd "$root" && ls usr/lib/*/fabric-agent/libnccl-env-fabric.so 2>/dev/null | head -n 1)
check "NCCL's env plugin is in /usr/lib/<triplet>/fabric-agent, needing libc alone" \
  sh -c "[ -n '$plugin' ] && chroot '$root' ldd '/$plugin' | grep -v -E 'linux-vdso|libc.so|ld-linux' |
         (! grep -q .)"
"$mkhost" roce-9port "$root/tmp/host" >/dev/null
check "fabricctl inventory --sysfs on the example host roce-9port lists its mlx5 NICs" \
  sh -c "chroot '$root' fabricctl inventory --sysfs=/tmp/host/sys --procfs=/tmp/host/proc |
         grep -q mlx5_"

unit=$root/lib/systemd/system/fabric-agent.service
check "the unit is /lib/systemd/system/fabric-agent.service" test -f "$unit"
check "the unit runs /usr/bin/fabric-agent, installed" \
  sh -c "grep -q '^ExecStart=/usr/bin/fabric-agent ' '$unit' &&
         test -x '$root/usr/bin/fabric-agent'"
check "the unit's EnvironmentFile= /etc/default/fabric-agent is installed" \
  sh -c "grep -q '^EnvironmentFile=-/etc/default/fabric-agent$' '$unit' &&
         test -f '$root/etc/default/fabric-agent'"
check "the defaults' --config=/etc/fabric-agent/config.json is installed" \
  sh -c "grep -q -- '--config=/etc/fabric-agent/config.json' '$root/etc/default/fabric-agent' &&
         test -f '$root/etc/fabric-agent/config.json'"
check "the unit's Documentation= (fabric-agent(8), systemd.md) is installed" \
  sh -c "grep -q '^Documentation=man:fabric-agent(8) file:/usr/share/doc/fabric-agent/systemd.md$' \
           '$unit' && test -s '$root/usr/share/man/man8/fabric-agent.8.gz' &&
         test -s '$root/usr/share/doc/fabric-agent/systemd.md'"
check "the unit's socket is in its RuntimeDirectory=fabric-agent" \
  sh -c "grep -q '^RuntimeDirectory=fabric-agent$' '$unit' &&
         grep -q -- '--socket=/run/fabric-agent/agent.sock' '$unit'"
check "the unit's User=/Group= fabric-agent exist (sysusers.d at install)" \
  sh -c "grep -q '^User=fabric-agent$' '$unit' && grep -q '^Group=fabric-agent$' '$unit' &&
         chroot '$root' getent passwd fabric-agent && chroot '$root' getent group fabric-agent"
check "the user is a system user without a login shell" \
  sh -c "chroot '$root' getent passwd fabric-agent |
         awk -F: '\$3 < 1000 && \$7 ~ /nologin\$/ { ok = 1 } END { exit !ok }'"
# Owners by name inside the root: its passwd, not this machine's.
mode() { chroot "$root" stat -c '%U:%G %a' "$1"; }
check "/run/fabric-agent made at install: fabric-agent:fabric-agent 0750" \
  test "$(mode /run/fabric-agent)" = 'fabric-agent:fabric-agent 750'
check "/run/fabric-env made at install: fabric-agent:fabric-agent 0755" \
  test "$(mode /run/fabric-env)" = 'fabric-agent:fabric-agent 755'
check "/run/cdi made at install" test -d "$root/run/cdi"
for page in man8/fabric-agent.8.gz man8/fabric-cni.8.gz man1/fabricctl.1.gz man1/fabric-env.1.gz \
            man1/fabric-probe.1.gz; do
  check "man page /usr/share/man/$page" sh -c "gzip -t '$root/usr/share/man/$page'"
done
for b in fabric-agent fabricctl fabric-probe fabric-env fabric-cni; do
  check "completions of $b" test -s "$root/usr/share/bash-completion/completions/$b" \
    -a -s "$root/usr/share/zsh/vendor-completions/_$b"
done
check "copyright and changelog in /usr/share/doc/fabric-agent" \
  test -s "$root/usr/share/doc/fabric-agent/copyright" \
    -a -s "$root/usr/share/doc/fabric-agent/changelog.gz"
check "conffiles: /etc/default/fabric-agent and /etc/fabric-agent/config.json" \
  sh -c "chroot '$root' dpkg-query -W -f='\${Conffiles}' fabric-agent > '$root/tmp/conffiles' &&
         grep -q ' /etc/default/fabric-agent ' '$root/tmp/conffiles' &&
         grep -q ' /etc/fabric-agent/config.json ' '$root/tmp/conffiles'"
check "the unit is enabled (multi-user.target.wants)" \
  test -L "$root/etc/systemd/system/multi-user.target.wants/fabric-agent.service"
check "install asked systemd to reload its units" grep -qx -- '--system daemon-reload' "$calls"
check "install started nothing (systemctl calls: $(paste -sd, "$calls"))" \
  sh -c "! grep -E '(^| )(start|restart|try-restart|reload-or-restart)( |$)' '$calls'"
phase "installed package checked"

# The packaged agent as the unit runs it (its user, its socket in /run/fabric-agent) outside
# systemd, on the example host: the directory install made must be usable without the unit.
# The state directory as the unit's StateDirectory= makes it; the published host and the state
# are named, as an example host's --sysfs root alone publishes nothing.
uid=$(chroot "$root" id -u fabric-agent) gid=$(chroot "$root" id -g fabric-agent)
install -d -m 0700 -o "$uid" -g "$gid" "$root/var/lib/fabric-agent"
chroot --userspec="$uid:$gid" "$root" /usr/bin/env -i PATH=/usr/bin:/bin \
  /usr/bin/fabric-agent --sysfs=/tmp/host/sys --procfs=/tmp/host/proc \
  --config=/etc/fabric-agent/config.json --host-file-dir=/run/fabric-env \
  --state-dir=/var/lib/fabric-agent >"$root/tmp/agent.log" 2>&1 &
agent_pid=$! failed_before=$failures
for _ in $(seq 100); do
  in_root fabricctl health --liveness >/dev/null 2>&1 && break
  kill -0 "$agent_pid" 2>/dev/null || break
  sleep 0.1
done
check "the packaged agent, as fabric-agent, answers on /run/fabric-agent/agent.sock" \
  in_root fabricctl health --liveness
check "its socket is fabric-agent:fabric-agent 0660" \
  test "$(mode /run/fabric-agent/agent.sock)" = 'fabric-agent:fabric-agent 660'
for _ in $(seq 50); do
  [[ -s $root/run/fabric-env/host.pb ]] && break
  sleep 0.1
done
check "it published the host in /run/fabric-env (within 5 s)" test -s "$root/run/fabric-env/host.pb"
kill "$agent_pid" 2>/dev/null || true
wait "$agent_pid" 2>/dev/null || true
agent_pid=""
((failures == failed_before)) || sed 's/^/    agent: /' "$root/tmp/agent.log" | tail -n 20
phase "the packaged agent run"

if [[ -n $spank_deb ]]; then
  spank_name=$(basename "$spank_deb")
  check "apt-get install ./$spank_name" \
    in_root sh -c "cd /tmp/debs && apt-get install -y -q --no-install-recommends ./$spank_name"
  so=$(chroot "$root" dpkg -L fabric-agent-spank | grep '/fabric_spank\.so$' || true)
  check "fabric_spank.so in Slurm's plugin directory (/usr/lib/<triplet>/slurm-wlm)" \
    sh -c "echo '$so' | grep -Eq '^/usr/lib/[^/]+-linux-gnu/slurm-wlm/fabric_spank\.so$'"
  check "it runs /usr/bin/fabricctl and /usr/bin/fabric-env" \
    sh -c "grep -aq /usr/bin/fabricctl '$root$so' && grep -aq /usr/bin/fabric-env '$root$so'"
  check "it depends on the Slurm it was built for (libslurm)" \
    sh -c "dpkg-deb -f '$spank_deb' Depends | grep -q libslurm"
  check "its libraries resolve" sh -c "! chroot '$root' ldd '$so' | grep 'not found'"
  check "apt-get purge fabric-agent-spank" in_root apt-get purge -y -q fabric-agent-spank
  phase "fabric-agent-spank checked"
fi

# --- upgrade ---------------------------------------------------------------------------------
# The same package with a higher version: dpkg runs the upgrade paths (prerm upgrade, postinst
# configure OLD). Meanwhile the operator edited a conffile and disabled the unit, and the agent
# kept state.
work=$(mktemp -d)
dpkg-deb -R "$agent_deb" "$work/pkg"
sed -i "s/^Version: .*/Version: $version+upgrade1/" "$work/pkg/DEBIAN/control"
dpkg-deb -b --root-owner-group -Znone "$work/pkg" "$root/tmp/debs/fabric-agent-upgrade.deb" \
  >/dev/null
rm -rf "$work"
echo '# edited by the operator' >>"$root/etc/default/fabric-agent"
install -d -m 0700 -o "$uid" -g "$gid" "$root/var/lib/fabric-agent"
echo state >"$root/var/lib/fabric-agent/kept"
in_root /usr/bin/systemctl disable fabric-agent.service >/dev/null 2>&1 || true
check "the operator's disable took (no multi-user.target.wants link)" \
  test ! -e "$root/etc/systemd/system/multi-user.target.wants/fabric-agent.service"
: >"$calls"
check "upgrade to $version+upgrade1" \
  in_root sh -c "cd /tmp/debs && apt-get install -y -q ./fabric-agent-upgrade.deb"
check "upgrade: the version is $version+upgrade1" \
  test "$(chroot "$root" dpkg-query -W -f="\${Version}" fabric-agent)" = "$version+upgrade1"
check "upgrade: the edited conffile kept" \
  grep -q 'edited by the operator' "$root/etc/default/fabric-agent"
check "upgrade: the state kept" test -f "$root/var/lib/fabric-agent/kept"
check "upgrade: the operator's disable kept" \
  test ! -e "$root/etc/systemd/system/multi-user.target.wants/fabric-agent.service"
check "upgrade: try-restart only (restarts a running agent): $(paste -sd, "$calls")" \
  sh -c "grep -qx 'try-restart fabric-agent.service' '$calls' &&
         ! grep -E '(^| )(start|restart|stop)( |$)' '$calls'"
phase "upgrade checked"

# --- remove and purge ------------------------------------------------------------------------
: >"$calls"
check "apt-get remove fabric-agent" in_root apt-get remove -y -q fabric-agent
check "remove: the agent stopped first" grep -qx 'stop fabric-agent.service' "$calls"
check "remove: the binaries gone" test ! -e "$root/usr/bin/fabric-agent"
check "remove: the unit gone" test ! -e "$unit"
check "remove: the state kept" test -f "$root/var/lib/fabric-agent/kept"
check "remove: the configuration kept" \
  test -f "$root/etc/default/fabric-agent" -a -f "$root/etc/fabric-agent/config.json"
check "apt-get purge fabric-agent" in_root apt-get purge -y -q fabric-agent
check "purge: the state dropped" test ! -e "$root/var/lib/fabric-agent"
check "purge: the configuration dropped" \
  test ! -e "$root/etc/default/fabric-agent" -a ! -e "$root/etc/fabric-agent"
check "purge: dpkg forgot the package" sh -c "! chroot '$root' dpkg-query -W fabric-agent"
check "purge: the user stays (Debian never removes a system user)" \
  in_root getent passwd fabric-agent
phase "remove and purge checked"

echo "== package test: $((SECONDS - t0)) s in all"
if ((failures)); then
  echo "FAILED: $failures check(s)"
  exit 1
fi
echo "all package checks passed"

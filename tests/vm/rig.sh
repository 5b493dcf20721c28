#!/bin/bash
# Soft-RoCE (rdma_rxe) VM rig: boots Debian's stock kernel under qemu (software emulation), shares
# the host's root read-only over 9p, creates rxe0 in the guest and runs a script there against the
# real kernel's sysfs and the real libibverbs. See README.md next to this file.
#
#   rig.sh prepare
#   rig.sh run [--vms 1|2] [--vm0-nics 1|2] [--timeout SECS] [--out DIR] [--env NAME=VALUE]...
#              -- SCRIPT [ARGS...]
set -euo pipefail

RIG_SELF="$(readlink -f "${BASH_SOURCE[0]}")"
readonly RIG_SELF
readonly CACHE="${FABRIC_VM_CACHE:-/var/tmp/fabric-vm}"
readonly PACKAGES=(qemu-system-x86 busybox-static cpio kmod rdma-core ibverbs-utils
                   ibverbs-providers perftest iproute2 util-linux xz-utils python3)
# Modules loaded in the guest, with their dependencies. crc32_generic is not a declared
# dependency of rdma_rxe but rxe fails with ENOENT without it.
# 8021q and macvlan: the announce library's VLAN and macvlan cases (guest_announce.sh).
readonly MODULES=(crc32_generic virtio_pci virtio_net 9pnet_virtio 9p veth 8021q macvlan
                  rdma_rxe ib_uverbs rdma_ucm ib_umad)
readonly QEMU=qemu-system-x86_64
readonly GUEST_MEM="${FABRIC_VM_MEM:-1024M}"
# One vCPU in the suite; FABRIC_VM_SMP=2 to see what a busy-polling pair does on two.
readonly GUEST_CPUS="${FABRIC_VM_SMP:-1}"

log() { echo "rig: $*" >&2; }
die() { echo "rig: error: $*" >&2; exit 2; }

usage() {
  cat >&2 <<'EOF'
usage: rig.sh prepare
       rig.sh run [--vms 1|2] [--vm0-nics 1|2] [--timeout SECS] [--out DIR] [--env NAME=VALUE]...
                  -- SCRIPT [ARGS...]

prepare  installs missing packages (as root), downloads Debian's stock kernel into the cache
         (${FABRIC_VM_CACHE:-/var/tmp/fabric-vm}) and builds the initramfs; idempotent.
run      boots 1 or 2 VMs, sets up rxe0 and runs `bash SCRIPT ARGS` in each guest, chrooted into
         the host's root (read-only). Prints the script's stdout/stderr and exits with its exit
         code; 124 on timeout (default 120 s), 125 when the VM itself failed.
         --vm0-nics 2 (with --vms 2) gives vm0 a second NIC, eth1 (down, no address, no rxe:
         the script sets it up), on the same wire, which is then a hub of all three NICs.
Both exit 77 when this machine lacks what the rig needs and cannot get it (not root).
EOF
  exit 2
}

# ---------------------------------------------------------------------------------------------
# prepare
# ---------------------------------------------------------------------------------------------

missing_packages() {
  local p status
  for p in "${PACKAGES[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)"
    [[ "$status" == installed ]] || echo "$p"
  done
}

ensure_packages() {
  local missing
  mapfile -t missing < <(missing_packages)
  ((${#missing[@]} == 0)) && return 0
  if ((EUID != 0)); then
    log "missing packages (install them as root, or run this as root): ${missing[*]}"
    exit 77
  fi
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! timeout 900 apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; then
    timeout 300 apt-get update -q >&2 || true
    timeout 900 apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
      || die "apt-get install failed"
  fi
}

# The versioned package that linux-image-amd64 depends on, e.g. linux-image-6.1.0-56-amd64.
kernel_package() {
  if [[ -n "${FABRIC_VM_KERNEL_PKG:-}" ]]; then
    echo "$FABRIC_VM_KERNEL_PKG"
    return
  fi
  local pkg
  pkg="$(timeout 60 apt-cache depends linux-image-amd64 2>/dev/null \
         | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')" || true
  if [[ -z "$pkg" && $EUID -eq 0 ]]; then
    timeout 300 apt-get update -q >&2 || true
    pkg="$(timeout 60 apt-cache depends linux-image-amd64 2>/dev/null \
           | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')" || true
  fi
  echo "$pkg"
}

# Prints the path of the kernel .deb in the cache, downloading it when absent.
kernel_deb() {
  local pkg="$1" deb
  mkdir -p "$CACHE/debs"
  deb="$(ls -1 "$CACHE/debs/${pkg}_"*.deb 2>/dev/null | sort -V | tail -n1 || true)"
  if [[ -z "$deb" ]]; then
    log "downloading $pkg"
    local tmp
    tmp="$(mktemp -d "$CACHE/debs/dl.XXXXXX")"
    if ! (cd "$tmp" && timeout 600 apt-get download -q "$pkg" >&2 2>"$tmp/err"); then
      if ((EUID == 0)); then
        timeout 300 apt-get update -q >&2 || true
        (cd "$tmp" && timeout 600 apt-get download -q "$pkg" >&2) || { rm -rf "$tmp"; die "apt-get download $pkg failed"; }
      else
        cat "$tmp/err" >&2; rm -rf "$tmp"; die "apt-get download $pkg failed"
      fi
    fi
    mv "$tmp"/"${pkg}_"*.deb "$CACHE/debs/"
    rm -rf "$tmp"
    deb="$(ls -1 "$CACHE/debs/${pkg}_"*.deb | sort -V | tail -n1)"
  fi
  echo "$deb"
}

# The guest's /init (busybox sh). Network and rxe are set up with the host's own ip/rdma tools
# through chroot (by full path); modules are loaded from the initramfs because the host root has
# no modules for the guest's kernel.
print_init() {
  cat <<'INIT'
#!/bin/sh
PATH=/bin:/sbin
export PATH
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys

say() { echo "fabric-vm: $*"; }
finish() {
  [ -n "$VMOUT" ] && [ -d "$VMOUT" ] && dmesg >"$VMOUT/dmesg"
  sync; say "poweroff"; poweroff -f; sleep 10
}
fail() {
  say "SETUP FAILED: $*"
  [ -n "$VMOUT" ] && [ -d "$VMOUT" ] && echo "setup failed: $*" >"$VMOUT/setup-failed"
  finish
}

VM=0
COUNT=1
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    fabric.vm=*) VM="${arg#fabric.vm=}" ;;
    fabric.count=*) COUNT="${arg#fabric.count=}" ;;
  esac
done
say "vm $VM of $COUNT, kernel $(uname -r)"

KVER="$(uname -r)"
while read -r m; do
  insmod "/lib/modules/$KVER/$m" || say "insmod $m failed"
done </modules.load

VMOUT=
R=/newroot
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot "$R" || fail "mount hostroot"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 fabricout /out || fail "mount fabricout"
VMOUT="/out/vm$VM"
mkdir -p "$VMOUT"
. /out/run.conf || fail "read run.conf"

mount -t proc proc "$R/proc" || fail "mount proc"
mount -t sysfs sysfs "$R/sys" || fail "mount sysfs"
mount -t devtmpfs devtmpfs "$R/dev" || fail "mount devtmpfs"
mkdir -p "$R/dev/pts" "$R/dev/shm"
mount -t devpts devpts "$R/dev/pts"
mount -t tmpfs tmpfs "$R/dev/shm"
mount -t tmpfs tmpfs "$R/tmp" || fail "mount /tmp"
mount -t tmpfs tmpfs "$R/run" || fail "mount /run"
mkdir -p "$R$HOST_OUT" 2>/dev/null
mount -o bind /out "$R$HOST_OUT" || fail "bind $HOST_OUT"
# Host directories under /tmp or /run that the run needs (see cmd_run), at the same paths.
n=0
for p in $SHARES; do
  mkdir -p "$R$p" 2>/dev/null
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro "share$n" "$R$p" \
    || fail "mount share $p"
  n=$((n + 1))
done

# Full paths: busybox's chroot would run its own applets for bare names.
ch() { chroot "$R" /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
if [ "$COUNT" = 1 ]; then
  NETDEV=veth0
  IP=10.77.0.1
  PEER=
  printf '%s\n' "link set lo up" "link add veth0 type veth peer name veth1" \
    "addr add 10.77.0.1/24 dev veth0" "addr add 10.77.0.2/24 dev veth1" \
    "link set veth0 up" "link set veth1 up" | ch ip -batch - || fail "veth setup"
else
  NETDEV=eth0
  IP="10.78.0.$((VM + 1))"
  PEER="10.78.0.$((2 - VM))"
  printf '%s\n' "link set lo up" "addr add $IP/24 dev eth0" "link set eth0 up" | ch ip -batch - || fail "eth0 setup"
fi
ch rdma link add rxe0 type rxe netdev "$NETDEV" || fail "rdma link add"

# Wait (bounded) for the port, the IPv4 GID and the uverbs node.
i=0
while :; do
  state="$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)"
  gid1="$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null)"
  case "$state" in *ACTIVE*)
    case "$gid1" in 0000:0000:0000:0000:0000:ffff:*)
      [ -c "$R/dev/infiniband/uverbs0" ] && break ;;
    esac ;;
  esac
  i=$((i + 1))
  [ "$i" -gt 100 ] && fail "rxe0 not ready: state '$state' gid1 '$gid1'"
  sleep 0.2
done
say "rxe0 ready: $state, gid1 $gid1"

if [ -n "$PEER" ]; then
  i=0
  until ping -c 1 -W 1 "$PEER" >/dev/null 2>&1; do
    i=$((i + 1))
    [ "$i" -gt 60 ] && fail "peer $PEER unreachable"
  done
  say "peer $PEER reachable"
fi

ulimit -l unlimited
cat >"$VMOUT/env" <<EOF
FABRIC_VM_INDEX=$VM
FABRIC_VM_COUNT=$COUNT
FABRIC_VM_IP=$IP
FABRIC_VM_PEER=$PEER
FABRIC_VM_NETDEV=$NETDEV
FABRIC_VM_RDMA_DEV=rxe0
FABRIC_VM_OUT=$HOST_OUT/vm$VM
FABRIC_VM_SHARED=$HOST_OUT
EOF
say "running script"
chroot "$R" /bin/bash "$HOST_OUT/job.sh" "$VM" >"$VMOUT/stdout" 2>"$VMOUT/stderr" </dev/null
rc=$?
echo "$rc" >"$VMOUT/rc.tmp" && mv "$VMOUT/rc.tmp" "$VMOUT/rc"
say "script exit code $rc"
finish
INIT
}

extract_vmlinux() {
  local bz="$1" out="$2" off
  for off in $(LC_ALL=C grep -abo $'\xfd7zXZ\x00' "$bz" | cut -d: -f1 | head -n 5); do
    tail -c "+$((off + 1))" "$bz" | timeout 120 xz -dc >"$out" 2>/dev/null || true
    if [[ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' ')" == 7f454c46 ]]; then
      return 0
    fi
  done
  rm -f "$out"
  log "could not extract vmlinux from the bzImage; booting the bzImage (slower)"
  return 1
}

build_initramfs() {
  local deb="$1" kver="$2" dest="$3"
  local work
  work="$(mktemp -d "$CACHE/build.XXXXXX")"
  BUILD_WORK="$work"
  trap 'rm -rf "$BUILD_WORK"' EXIT
  log "extracting $(basename "$deb")"
  timeout 300 dpkg -x "$deb" "$work/k"
  [[ -f "$work/k/boot/vmlinuz-$kver" ]] || die "no vmlinuz-$kver in $deb"
  timeout 120 depmod -b "$work/k" "$kver"

  local root="$work/root" m line path
  mkdir -p "$root"/{bin,sbin,dev,proc,sys,newroot,out,lib/modules/"$kver"}
  cp /bin/busybox "$root/bin/busybox"
  for m in $("$root/bin/busybox" --list); do
    [[ "$m" == busybox ]] || ln -sf busybox "$root/bin/$m"
  done
  : >"$root/modules.load"
  for m in "${MODULES[@]}"; do
    timeout 60 modprobe -d "$work/k" -S "$kver" --show-depends "$m" >>"$work/deps" \
      || die "modprobe --show-depends $m failed"
  done
  while read -r line; do
    [[ "$line" == insmod\ * ]] || continue
    path="${line#insmod }"
    path="${path%% *}"
    path="${path#"$work/k/lib/modules/$kver/"}"
    grep -qxF "$path" "$root/modules.load" && continue
    mkdir -p "$root/lib/modules/$kver/$(dirname "$path")"
    cp "$work/k/lib/modules/$kver/$path" "$root/lib/modules/$kver/$path"
    echo "$path" >>"$root/modules.load"
  done <"$work/deps"
  cp "$work/k/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$root/lib/modules/$kver/"
  timeout 60 depmod -b "$root" "$kver"
  print_init >"$root/init"
  chmod 755 "$root/init"

  mkdir -p "$dest"
  cp "$work/k/boot/vmlinuz-$kver" "$dest/vmlinuz.tmp"
  # The bzImage spends ~6 s decompressing itself under software emulation. Its payload is an ELF
  # vmlinux with a PVH entry note, which qemu boots directly.
  rm -f "$dest/vmlinux"
  extract_vmlinux "$dest/vmlinuz.tmp" "$dest/vmlinux.tmp" && mv "$dest/vmlinux.tmp" "$dest/vmlinux"
  (cd "$root" && find . -print0 | LC_ALL=C sort -z \
     | cpio --null -o -H newc -R 0:0 --quiet) | gzip -1 >"$dest/initramfs.tmp"
  mv "$dest/vmlinuz.tmp" "$dest/vmlinuz"
  mv "$dest/initramfs.tmp" "$dest/initramfs.cpio.gz"
  rm -rf "$work"
  trap - EXIT
}

# What the built initramfs depends on; bump INITRAMFS_FORMAT when build_initramfs changes.
readonly INITRAMFS_FORMAT=1
rig_stamp() {
  { echo "$INITRAMFS_FORMAT ${MODULES[*]}"; print_init; sha256sum /bin/busybox; } \
    | sha256sum | cut -c1-16
}

cmd_prepare() {
  (($# == 0)) || usage
  ensure_packages
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock"
  timeout 900 flock 9 || die "could not lock $CACHE/.lock"

  local pkg deb kver dir stamp
  pkg="$(kernel_package)"
  if [[ -z "$pkg" ]]; then
    if [[ -s "$CACHE/kernel.current" ]]; then
      log "cannot resolve linux-image-amd64; keeping cached kernel $(cat "$CACHE/kernel.current")"
      return 0
    fi
    die "cannot resolve the package linux-image-amd64 depends on (apt-get update?)"
  fi
  kver="${pkg#linux-image-}"
  dir="$CACHE/$kver"
  stamp="$(rig_stamp)"
  if [[ -f "$dir/vmlinuz" && -f "$dir/initramfs.cpio.gz" && "$(cat "$dir/stamp" 2>/dev/null)" == "$stamp" ]]; then
    log "kernel $kver and initramfs already prepared in $dir"
  else
    deb="$(kernel_deb "$pkg")"
    build_initramfs "$deb" "$kver" "$dir"
    echo "$stamp" >"$dir/stamp"
    log "prepared kernel $kver in $dir"
  fi
  echo "$kver" >"$CACHE/kernel.current.tmp"
  mv "$CACHE/kernel.current.tmp" "$CACHE/kernel.current"
  # Drop kernels that linux-image-amd64 no longer points to.
  local old
  for old in "$CACHE"/*/stamp; do
    [[ -f "$old" && "$(dirname "$old")" != "$dir" ]] || continue
    log "removing old kernel $(dirname "$old")"
    rm -rf "$(dirname "$old")"
  done
  find "$CACHE/debs" -maxdepth 1 -name 'linux-image-*.deb' ! -name "${pkg}_*" -delete 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------------------------

QEMU_PIDS=()

kill_vms() {
  local pid
  ((${#QEMU_PIDS[@]} == 0)) && return 0
  for pid in "${QEMU_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  local i
  for i in $(seq 1 20); do
    local alive=0
    for pid in "${QEMU_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${QEMU_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${QEMU_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  QEMU_PIDS=()
}

# Starts one VM in the background; its pid is appended to QEMU_PIDS.
# The chain setpriv(pdeathsig) -> timeout -> setpriv(pdeathsig) -> qemu makes sure no VM outlives
# this script, even when the script is killed with SIGKILL, and none outlives the deadline.
start_vm() {
  local idx="$1" count="$2" limit="$3"
  shift 3
  local vmdir="$OUT/vm$idx"
  mkdir -p "$vmdir"
  local args=(
    -accel tcg -cpu max -smp "$GUEST_CPUS" -m "$GUEST_MEM"
    -nodefaults -no-reboot -display none -monitor none -nic none
    -serial "file:$vmdir/console.log"
    -kernel "$KERNEL" -initrd "$KDIR/initramfs.cpio.gz"
    -append "console=ttyS0 panic=-1 quiet mitigations=off fabric.vm=$idx fabric.count=$count ${FABRIC_VM_KERNEL_ARGS:-}"
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
    -virtfs "local,path=$OUT,mount_tag=fabricout,security_model=none"
  )
  local i
  for i in "${!SHARES[@]}"; do
    args+=(-virtfs "local,path=${SHARES[i]},mount_tag=share$i,security_model=none,readonly=on,multidevs=remap")
  done
  args+=("$@")
  setpriv --pdeathsig TERM -- timeout -k 5 "$((limit + 10))" \
    setpriv --pdeathsig KILL -- "$QEMU" "${args[@]}" >"$vmdir/qemu.log" 2>&1 &
  QEMU_PIDS+=("$!")
}

port_listening() {
  [[ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]]
}

print_consoles() {
  local i
  for ((i = 0; i < VMS; i++)); do
    echo "----- vm$i console ($OUT/vm$i/console.log) -----" >&2
    cat "$OUT/vm$i/console.log" >&2 2>/dev/null || true
    if [[ -s "$OUT/vm$i/qemu.log" ]]; then
      echo "----- vm$i qemu ($OUT/vm$i/qemu.log) -----" >&2
      cat "$OUT/vm$i/qemu.log" >&2
    fi
  done
  echo "----- end of consoles -----" >&2
}

cmd_run() {
  VMS=1
  local vm0_nics=1 timeout_s=120 out="" envs=()
  while (($#)); do
    case "$1" in
      --vms) VMS="${2:?}"; shift 2 ;;
      --vms=*) VMS="${1#*=}"; shift ;;
      --vm0-nics) vm0_nics="${2:?}"; shift 2 ;;
      --vm0-nics=*) vm0_nics="${1#*=}"; shift ;;
      --timeout) timeout_s="${2:?}"; shift 2 ;;
      --timeout=*) timeout_s="${1#*=}"; shift ;;
      --out) out="${2:?}"; shift 2 ;;
      --out=*) out="${1#*=}"; shift ;;
      --env) envs+=("${2:?}"); shift 2 ;;
      --env=*) envs+=("${1#*=}"); shift ;;
      --) shift; break ;;
      *) usage ;;
    esac
  done
  (($# >= 1)) || usage
  [[ "$VMS" == 1 || "$VMS" == 2 ]] || die "--vms must be 1 or 2"
  [[ "$vm0_nics" == 1 || ("$vm0_nics" == 2 && "$VMS" == 2) ]] \
    || die "--vm0-nics must be 1, or 2 with --vms 2"
  [[ "$timeout_s" =~ ^[0-9]+$ && "$timeout_s" -gt 0 ]] || die "--timeout must be a positive integer"
  local e
  for e in "${envs[@]}"; do
    [[ "$e" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env wants NAME=VALUE, got '$e'"
  done

  local script
  script="$(readlink -f "$1")" || die "no such script: $1"
  shift
  [[ -f "$script" ]] || die "no such script: $script"
  case "$script" in /proc/*|/sys/*|/dev/*)
    die "$script is not visible in the guest (its /proc, /sys, /dev are its own)" ;;
  esac
  # The guest's /tmp and /run are its own: share the directories the run needs there (the
  # checkout, the script's, and those of path arguments such as a build's binaries) read-only
  # at the same paths. A checkout under /tmp, as CI may make, then works like any other.
  SHARES=()
  local p d s covered
  for p in "$(dirname "$RIG_SELF")/../.." "$(dirname "$script")" "$@"; do
    [[ -e "$p" ]] || continue
    d="$(readlink -f "$p")"
    [[ -d "$d" ]] || d="$(dirname "$d")"
    case "$d" in /tmp/*|/run/*) ;; *) continue ;; esac
    case "$d" in *[!A-Za-z0-9/._+-]*) die "path must be plain (letters, digits, /._+-): $d" ;; esac
    covered=0
    for s in "${SHARES[@]}"; do [[ "$d" == "$s" || "$d" == "$s"/* ]] && covered=1; done
    ((covered)) || SHARES+=("$d")
  done
  # Parents before children, so that a later mount is not hidden by an earlier one.
  if ((${#SHARES[@]})); then
    mapfile -t SHARES < <(printf '%s\n' "${SHARES[@]}" | awk '{ print length, $0 }' | sort -n | cut -d' ' -f2-)
  fi

  command -v "$QEMU" >/dev/null || { log "$QEMU is not installed; run: $RIG_SELF prepare"; exit 77; }
  [[ -s "$CACHE/kernel.current" ]] || "$RIG_SELF" prepare
  local kver
  kver="$(cat "$CACHE/kernel.current")"
  KDIR="$CACHE/$kver"
  [[ -f "$KDIR/vmlinuz" && -f "$KDIR/initramfs.cpio.gz" ]] || die "cache incomplete; run: $RIG_SELF prepare"
  KERNEL="$KDIR/vmlinuz"
  [[ -f "$KDIR/vmlinux" ]] && KERNEL="$KDIR/vmlinux"
  [[ "$(cat "$KDIR/stamp" 2>/dev/null)" == "$(rig_stamp)" ]] \
    || log "warning: initramfs built by another version of rig.sh; run: $RIG_SELF prepare"

  if [[ -z "$out" ]]; then
    mkdir -p "$CACHE/runs"
    # Old runs are kept two days for debugging.
    find "$CACHE/runs" -mindepth 1 -maxdepth 1 -type d -name 'run.*' -mmin +2880 \
      -exec rm -rf {} + 2>/dev/null || true
    out="$(mktemp -d "$CACHE/runs/run.XXXXXX")"
  else
    mkdir -p "$out"
    out="$(readlink -f "$out")"
    [[ -z "$(ls -A "$out")" ]] || die "--out $out is not empty"
  fi
  OUT="$out"
  case "$OUT" in
    *[!A-Za-z0-9/._+-]*) die "output dir path must be plain (letters, digits, /._+-): $OUT" ;;
    /tmp/*|/run/*|/proc/*|/sys/*|/dev/*) die "output dir cannot live under $OUT" ;;
  esac

  local cwd="$PWD"
  case "$cwd" in /tmp|/tmp/*|/run|/run/*)
    covered=0
    for s in "${SHARES[@]}"; do [[ "$cwd" == "$s" || "$cwd" == "$s"/* ]] && covered=1; done
    ((covered)) || cwd=/ ;;
  esac
  printf 'HOST_OUT=%q\nSHARES=%q\n' "$OUT" "${SHARES[*]}" >"$OUT/run.conf"
  {
    echo '#!/bin/bash'
    echo '# Generated by rig.sh: runs inside the guest, chrooted into the host root.'
    echo 'vm="$1"'
    echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8'
    printf 'set -a; . %q/vm"$vm"/env; set +a\n' "$OUT"
    for e in "${envs[@]}"; do printf 'export %q\n' "$e"; done
    echo "export FABRIC_VM0_NICS=$vm0_nics"
    echo 'ulimit -l unlimited'
    printf 'cd %q 2>/dev/null || cd /\n' "$cwd"
    printf 'exec /bin/bash'
    printf ' %q' "$script" "$@"
    echo
  } >"$OUT/job.sh"

  trap 'kill_vms' EXIT
  trap 'kill_vms; exit 130' INT
  trap 'kill_vms; exit 143' TERM

  local start=$SECONDS deadline=$((SECONDS + timeout_s))
  if ((VMS == 1)); then
    start_vm 0 1 "$timeout_s"
  elif ((vm0_nics == 2)); then
    # A socket netdev with listen/connect is a point-to-point link; three NICs on one wire need
    # a hub: every socket netdev joined to one UDP multicast group on the loopback (each NIC
    # also sees its own frames, which Linux ignores). Group and port at random: two runs at
    # once would otherwise share a wire.
    local mcast="239.255.$((RANDOM % 254 + 1)).$((RANDOM % 254 + 1)):$((20000 + RANDOM % 40000))"
    local hub="mcast=$mcast,localaddr=127.0.0.1"
    start_vm 0 2 "$timeout_s" \
      -netdev "socket,id=n0,$hub" -device "virtio-net-pci,netdev=n0,mac=52:54:00:4e:78:01" \
      -netdev "socket,id=n1,$hub" -device "virtio-net-pci,netdev=n1,mac=52:54:00:4e:78:03"
    start_vm 1 2 "$timeout_s" \
      -netdev "socket,id=n0,$hub" -device "virtio-net-pci,netdev=n0,mac=52:54:00:4e:78:02"
  else
    local port=""
    for _ in 1 2 3 4 5; do
      port=$((20000 + RANDOM % 40000))
      port_listening "$port" && continue
      start_vm 0 2 "$timeout_s" \
        -netdev "socket,id=n0,listen=127.0.0.1:$port" \
        -device "virtio-net-pci,netdev=n0,mac=52:54:00:4e:78:01"
      local ok=0 t0=$SECONDS
      while ((SECONDS < t0 + 10)); do
        if port_listening "$port"; then ok=1; break; fi
        kill -0 "${QEMU_PIDS[0]}" 2>/dev/null || break
        sleep 0.1
      done
      ((ok)) && break
      kill_vms
      port=""
    done
    [[ -n "$port" ]] || { print_consoles; die "could not start vm0 listening on 127.0.0.1"; }
    start_vm 1 2 "$timeout_s" \
      -netdev "socket,id=n0,connect=127.0.0.1:$port" \
      -device "virtio-net-pci,netdev=n0,mac=52:54:00:4e:78:02"
  fi

  local timed_out=0 pid alive
  while :; do
    alive=0
    for pid in "${QEMU_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    if ((SECONDS >= deadline)); then timed_out=1; break; fi
    sleep 0.2
  done
  kill_vms
  local elapsed=$((SECONDS - start))

  local i rc=0 vmrc failed=0
  for ((i = 0; i < VMS; i++)); do
    local d="$OUT/vm$i"
    if ((VMS > 1)); then
      echo "----- vm$i stdout -----"
      echo "----- vm$i stderr -----" >&2
    fi
    cat "$d/stdout" 2>/dev/null || true
    cat "$d/stderr" >&2 2>/dev/null || true
    if [[ -f "$d/rc" ]] && vmrc="$(cat "$d/rc")" && [[ "$vmrc" =~ ^[0-9]+$ ]]; then
      ((rc == 0)) && rc="$vmrc"
    elif ((!timed_out)); then
      if [[ -f "$d/setup-failed" ]]; then
        log "vm$i: $(cat "$d/setup-failed")"
      else
        log "vm$i: stopped without reporting an exit code"
      fi
      failed=1
    fi
  done
  if ((timed_out)); then
    log "timed out after ${timeout_s}s; output in $OUT"
    print_consoles
    exit 124
  fi
  if ((failed)); then
    log "VM failure after ${elapsed}s; output in $OUT"
    print_consoles
    exit 125
  fi
  if ((rc != 0)); then
    print_consoles
    log "guest script exited $rc after ${elapsed}s; output in $OUT"
  else
    log "guest script passed in ${elapsed}s; output in $OUT"
  fi
  exit "$rc"
}

(($# >= 1)) || usage
cmd="$1"
shift
case "$cmd" in
  prepare) cmd_prepare "$@" ;;
  run) cmd_run "$@" ;;
  -h|--help|help) usage ;;
  *) usage ;;
esac

#!/bin/bash
# Runs inside the rig's guest (rig.sh run -- guest_sysfs_check.sh): checks what the real kernel's
# sysfs shows for a Soft-RoCE device, the facts the discovery code relies on.
set -uo pipefail

# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
port="/sys/class/infiniband/$dev/ports/1"

expect_eq() {  # name actual expected
  if [[ "$2" == "$3" ]]; then ok "$1 = '$2'"; else fail "$1 = '$2', expected '$3'"; fi
}

read_file() { cat "$1" 2>&1; }

# The IPv4-mapped GID the kernel prints for $ip: 0000:...:ffff:AABB:CCDD.
ipv4_gid() {
  local a b c d
  IFS=. read -r a b c d <<<"$1"
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d"
}

echo "kernel $(uname -r), device $dev on $netdev ($ip)"
[[ -d "/sys/class/infiniband/$dev" ]] || { echo "FAIL no /sys/class/infiniband/$dev"; exit 1; }

expect_eq "node_type" "$(read_file "/sys/class/infiniband/$dev/node_type")" "1: CA"
ports=("/sys/class/infiniband/$dev/ports"/*)
expect_eq "ports" "${ports[*]##*/}" "1"
expect_eq "port 1 state" "$(read_file "$port/state")" "4: ACTIVE"
expect_eq "port 1 phys_state" "$(read_file "$port/phys_state")" "5: LinkUp"
expect_eq "port 1 link_layer" "$(read_file "$port/link_layer")" "Ethernet"
expect_eq "parent netdev" "$(read_file "/sys/class/infiniband/$dev/parent")" "$netdev"

gid0="$(read_file "$port/gids/0")"
if [[ "$gid0" == fe80:0000:0000:0000:* ]]; then ok "gid 0 = $gid0 (link-local)"; else fail "gid 0 = '$gid0', expected fe80:..."; fi
expect_eq "gid 0 type" "$(read_file "$port/gid_attrs/types/0")" "RoCE v2"
expect_eq "gid 0 ndev" "$(read_file "$port/gid_attrs/ndevs/0")" "$netdev"

expect_eq "gid 1" "$(read_file "$port/gids/1")" "$(ipv4_gid "$ip")"
expect_eq "gid 1 type" "$(read_file "$port/gid_attrs/types/1")" "RoCE v2"
expect_eq "gid 1 ndev" "$(read_file "$port/gid_attrs/ndevs/1")" "$netdev"

# An unused entry: the GID reads as zeros, its attributes fail with EINVAL.
expect_eq "gid 5 (unused)" "$(read_file "$port/gids/5")" "0000:0000:0000:0000:0000:0000:0000:0000"
for attr in types ndevs; do
  out="$(cat "$port/gid_attrs/$attr/5" 2>&1)"
  rc=$?
  if ((rc != 0)) && [[ "$out" == *"Invalid argument"* ]]; then
    ok "gid_attrs/$attr/5 fails with EINVAL ($out)"
  else
    fail "gid_attrs/$attr/5: exit $rc, '$out'; expected EINVAL"
  fi
done

uverbs=""
for u in /sys/class/infiniband_verbs/uverbs*; do
  [[ "$(cat "$u/ibdev" 2>/dev/null)" == "$dev" ]] && uverbs="$(basename "$u")"
done
if [[ -n "$uverbs" && -c "/dev/infiniband/$uverbs" ]]; then
  ok "uverbs device $uverbs with node /dev/infiniband/$uverbs"
else
  fail "no uverbs device node for $dev (found '$uverbs')"
fi

umad=""
for u in /sys/class/infiniband_mad/umad*; do
  [[ "$(cat "$u/ibdev" 2>/dev/null)" == "$dev" && "$(cat "$u/port" 2>/dev/null)" == 1 ]] \
    && umad="$(basename "$u")"
done
if [[ -n "$umad" && -c "/dev/infiniband/$umad" ]]; then
  ok "umad device $umad (port 1) with node /dev/infiniband/$umad"
else
  fail "no umad device node for $dev port 1 (found '$umad')"
fi

if devinfo="$(timeout 30 ibv_devinfo -v -d "$dev" 2>&1)"; then
  if grep -q 'PORT_ACTIVE' <<<"$devinfo" && grep -q 'link_layer:.*Ethernet' <<<"$devinfo"; then
    ok "ibv_devinfo -v -d $dev: PORT_ACTIVE, Ethernet"
  else
    fail "ibv_devinfo -v -d $dev output lacks PORT_ACTIVE/Ethernet"
  fi
  grep -E 'hca_id|GID\[' <<<"$devinfo"
else
  fail "ibv_devinfo -v -d $dev failed: $devinfo"
fi

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"

#!/bin/bash
# Runs inside the rig's guest: `rig.sh run -- guest_fabricctl.sh FABRICCTL`. Checks what fabricctl
# discovers from the real kernel's sysfs for the rig's Soft-RoCE device.
set -uo pipefail

bin="${1:?usage: guest_fabricctl.sh FABRICCTL_BINARY}"
dev="${FABRIC_VM_RDMA_DEV:-rxe0}"
netdev="${FABRIC_VM_NETDEV:-veth0}"
ip="${FABRIC_VM_IP:-10.77.0.1}"
out="${FABRIC_VM_OUT:-/tmp}"

if [[ ! -x "$bin" ]]; then
  echo "FAIL $bin is not an executable in the guest (the guest sees the host's root read-only," \
       "but not the host's /tmp)"
  exit 1
fi

failures=0
json="$out/inventory.json"
"$bin" inventory --json --sysfs=/sys --procfs=/proc >"$json" 2>"$out/inventory.json.stderr"
rc=$?
if ((rc != 0)); then
  echo "FAIL fabricctl inventory --json exited $rc"
  cat "$out/inventory.json.stderr"
  failures=$((failures + 1))
else
  echo "ok   fabricctl inventory --json exited 0"
  /usr/bin/python3 - "$json" "$dev" "$netdev" "$ip" <<'PY' || failures=$((failures + 1))
import json
import sys

path, dev_name, netdev, ip = sys.argv[1:5]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


with open(path) as f:
    host = json.load(f)

devices = host.get("rdma_devices", [])
names = [d.get("name") for d in devices]
check(dev_name in names, f"rdma_devices has {dev_name} (found {names})")
dev = next((d for d in devices if d.get("name") == dev_name), None)
if dev is not None:
    check(dev.get("parent_netdev") == netdev,
          f"parent_netdev == {netdev!r} (got {dev.get('parent_netdev')!r})")
    check(str(dev.get("uverbs_device", "")).startswith("uverbs"),
          f"uverbs_device starts with 'uverbs' (got {dev.get('uverbs_device')!r})")
    ports = dev.get("ports", [])
    check(len(ports) >= 1, f"at least one port (got {len(ports)})")
    if ports:
        port = ports[0]
        check(port.get("number") == 1, f"ports[0].number == 1 (got {port.get('number')!r})")
        check(port.get("state") == "PORT_STATE_ACTIVE",
              f"ports[0].state == PORT_STATE_ACTIVE (got {port.get('state')!r})")
        check(port.get("link_layer") == "LINK_LAYER_ETHERNET",
              f"ports[0].link_layer == LINK_LAYER_ETHERNET (got {port.get('link_layer')!r})")
        # ib_umad is loaded in the guest: RoCE ports have MAD nodes too.
        check(str(port.get("umad_device", "")).startswith("umad"),
              f"ports[0].umad_device starts with 'umad' (got {port.get('umad_device')!r})")
        gids = port.get("gids", [])
        by_index = {int(g["index"]): g for g in gids}  # fabricctl prints zeros
        g0 = by_index.get(0, {})
        check(g0.get("type") == "GID_TYPE_ROCE_V2" and str(g0.get("gid", "")).startswith("fe80:"),
              f"gid 0 is a RoCE v2 link-local GID (got {g0})")
        g1 = by_index.get(1, {})
        check(g1.get("type") == "GID_TYPE_ROCE_V2" and g1.get("ipv4") == ip
              and g1.get("netdev") == netdev,
              f"gid 1 is RoCE v2, ipv4 {ip}, netdev {netdev} (got {g1})")
    problems = [("device", p) for p in dev.get("problems", [])]
    for port in ports:
        problems += [(f"port {port.get('number', 0)}", p) for p in port.get("problems", [])]
    problems += [("host", p) for p in host.get("problems", [])]
    bad = [(w, p) for w, p in problems if "gid_attrs" in json.dumps(p)]
    check(not bad, f"no problem mentions gid_attrs (got {bad})")
    for where, p in problems:
        print(f"     note: {where} problem {p}")

if failures:
    print(json.dumps(dev if dev is not None else host, indent=1))
sys.exit(1 if failures else 0)
PY
fi

human="$("$bin" inventory --sysfs=/sys 2>&1)"
rc=$?
if ((rc == 0)) && grep -q "$dev" <<<"$human"; then
  echo "ok   fabricctl inventory exited 0 and names $dev"
else
  echo "FAIL fabricctl inventory exited $rc; output:"
  echo "$human"
  failures=$((failures + 1))
fi

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"

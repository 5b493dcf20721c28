#!/usr/bin/python3
"""Checks the DRA driver's manifests against the API's schema and the real binary.

  * deploy/kubernetes/components/dra: kustomization.yaml lists exactly the folder's manifests;
    every DeviceClass validates against resource.k8s.io/v1 (k8s_schema.py: the published schema,
    strictly, and the API's rules); every CEL expression names only attributes the agent
    publishes (agent/publish/dra/devices.cc); the DaemonSet patch's flags are ones
    `fabric-agent --help` lists, and the kubelet directories it names are mounted;
  * deploy/kubernetes/examples/dra-gpu-nic-claim.yaml: its ResourceClaimTemplate validates and
    pairs its requests by the standard pcieRoot attribute, which the agent publishes.

usage: manifests_dra_test.py --agent=PATH   (exit 77 without python3-yaml)
"""
import argparse
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
try:
    import yaml
except ImportError:
    print("SKIP: no yaml module (python3-yaml)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import k8s_schema  # noqa: E402

COMPONENT = os.path.join(ROOT, "deploy/kubernetes/components/dra")
EXAMPLE = os.path.join(ROOT, "deploy/kubernetes/examples/dra-gpu-nic-claim.yaml")
ATTR_RE = re.compile(r'device\.attributes\["rdma\.fabric\.io"\]\.([A-Za-z_][A-Za-z0-9_]*)')

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def published_attributes():
    """The attribute names devices.cc puts on a device (ours, unqualified, and the standard)."""
    with open(os.path.join(ROOT, "agent/publish/dra/devices.cc"), encoding="utf-8") as f:
        text = f.read()
    names = set(re.findall(r'a\.Put\("([A-Za-z_][A-Za-z0-9_]*)"', text))
    names |= set(re.findall(r'constexpr char k\w+\[\] = "([a-z.]+/[A-Za-z]+)"', text))
    return names


def docs(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def check_cel(where, expression, attrs):
    for name in ATTR_RE.findall(expression):
        if name not in attrs:
            fail("%s: CEL names rdma.fabric.io attribute %r, which the agent does not publish"
                 % (where, name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    args = ap.parse_args()
    attrs = published_attributes()
    if not {"pciAddress", "function", "linkLayer", "gpu", "resource.kubernetes.io/pcieRoot"} <= attrs:
        fail("devices.cc's attributes were not found: %s" % sorted(attrs))

    kust = docs(os.path.join(COMPONENT, "kustomization.yaml"))[0]
    listed = set(kust.get("resources", [])) | {p["path"] for p in kust.get("patches", [])}
    present = {f for f in os.listdir(COMPONENT) if f.endswith(".yaml")} - {"kustomization.yaml"}
    if listed != present:
        fail("components/dra/kustomization.yaml lists %s, the folder has %s"
             % (sorted(listed), sorted(present)))

    classes = 0
    for d in docs(os.path.join(COMPONENT, "deviceclasses.yaml")):
        for e in k8s_schema.validate("DeviceClass", d):
            fail("DeviceClass %s: %s" % (d.get("metadata", {}).get("name"), e))
        for s in d.get("spec", {}).get("selectors", []):
            check_cel("DeviceClass " + d["metadata"]["name"], s["cel"]["expression"], attrs)
        classes += 1
    if classes < 2:
        fail("deviceclasses.yaml has %d DeviceClasses, expected the driver's and rdma/hca's"
             % classes)

    help_text = subprocess.run([args.agent, "--help"], capture_output=True, text=True,
                               check=False).stdout
    patch = docs(os.path.join(COMPONENT, "daemonset-patch.yaml"))[0]
    mounts = set()
    kubelet_dir = None
    for op in patch:
        if op["path"].endswith("/args/-"):
            flag = op["value"].split("=")[0]
            if flag not in help_text:
                fail("daemonset-patch.yaml passes %s, which fabric-agent --help does not list"
                     % flag)
            if flag == "--dra-kubelet-dir":
                kubelet_dir = op["value"].split("=", 1)[1]
        if op["path"].endswith("/volumeMounts/-"):
            mounts.add(op["value"]["mountPath"])
    for needed in ("/plugins_registry", "/plugins/rdma.fabric.io"):
        if kubelet_dir is None or kubelet_dir + needed not in mounts:
            fail("the kubelet plugin's %s%s is not mounted (mounts: %s)"
                 % (kubelet_dir, needed, sorted(mounts)))

    templates = [d for d in docs(EXAMPLE) if d.get("kind") == "ResourceClaimTemplate"]
    if not templates:
        fail("the example has no ResourceClaimTemplate")
    for t in templates:
        for e in k8s_schema.validate("ResourceClaimTemplate", t):
            fail("ResourceClaimTemplate %s: %s" % (t["metadata"]["name"], e))
        devices = t["spec"]["spec"]["devices"]
        for r in devices["requests"]:
            for s in r.get("exactly", {}).get("selectors", []):
                check_cel("request " + r["name"], s["cel"]["expression"], attrs)
        matched = [c.get("matchAttribute") for c in devices.get("constraints", [])]
        if "resource.kubernetes.io/pcieRoot" not in matched or \
                "resource.kubernetes.io/pcieRoot" not in attrs:
            fail("the example pairs by %s, not by the pcieRoot the agent publishes" % matched)

    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("DRA manifests: %d DeviceClasses, %d claim templates valid" % (classes, len(templates)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

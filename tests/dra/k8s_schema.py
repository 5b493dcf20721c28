#!/usr/bin/env python3
"""What resource.k8s.io/v1 accepts, for the tests' API server and the unit tests.

Two layers, as the real API server applies them:
  1. The published OpenAPI schema (testdata/resource_v1_openapi_subset.json: the schemas the agent
     writes and reads, transcribed from kubernetes/kubernetes api/openapi-spec/v3, whose commit it
     names), with every object closed to fields it does not declare: the server's strict field
     validation (fieldValidation=Strict), which the agent asks for.
  2. The rules the API's Go validation adds (k8s.io/kubernetes pkg/apis/resource/validation):
     names, counts and formats the schema leaves to prose.

usage: k8s_schema.py --kind ResourceSlice FILE...   (exit 1 and one line per error when invalid)
"""
import argparse
import copy
import datetime
import ipaddress
import json
import os
import re
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
SUBSET = os.path.join(HERE, "testdata", "resource_v1_openapi_subset.json")
PREFIX = "io.k8s.api.resource.v1."
KINDS = {
    "ResourceSlice": PREFIX + "ResourceSlice",
    "ResourceClaim": PREFIX + "ResourceClaim",
    "DeviceClass": PREFIX + "DeviceClass",
    "ResourceClaimTemplate": PREFIX + "ResourceClaimTemplate",
}

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
                    r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")


def _close(node):
    """Every object schema that lists properties refuses others (strict field validation)."""
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for v in node.values():
            _close(v)
    elif isinstance(node, list):
        for v in node:
            _close(v)


_ROOT = None


def root():
    global _ROOT
    if _ROOT is None:
        with open(SUBSET, encoding="utf-8") as f:
            doc = json.load(f)
        schemas = copy.deepcopy(doc["schemas"])
        _close(schemas)
        _ROOT = {"components": {"schemas": schemas}}
    return _ROOT


def schema_errors(kind, obj):
    name = KINDS[kind]
    schema = {"$ref": "#/components/schemas/" + name, "components": root()["components"]}
    validator = jsonschema.Draft7Validator(schema)
    out = []
    for e in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in e.absolute_path) or "(object)"
        out.append("%s: %s" % (where, e.message))
    return out


def dns_subdomain(v, limit=253):
    return isinstance(v, str) and 0 < len(v) <= limit and bool(DNS_SUBDOMAIN.match(v))


def qualified_name(v, max_name=32, identifier=True):
    """An attribute name: C identifier (at most 32), optionally "<DNS subdomain>/" before it."""
    if not isinstance(v, str) or not v:
        return False
    prefix, _, name = v.rpartition("/")
    if prefix and not dns_subdomain(prefix, 63):
        return False
    if len(name) > max_name:
        return False
    return bool(C_IDENTIFIER.match(name)) if identifier else bool(LABEL_NAME.match(name))


def label_key(v):
    if not isinstance(v, str) or not v:
        return False
    prefix, _, name = v.rpartition("/")
    if prefix and not dns_subdomain(prefix):
        return False
    return 0 < len(name) <= 63 and bool(LABEL_NAME.match(name))


def rfc3339(v):
    try:
        datetime.datetime.strptime(v, "%Y-%m-%dT%H:%M:%SZ")
        return True
    except (TypeError, ValueError):
        return False


def _check_meta(obj, errors, namespaced):
    meta = obj.get("metadata") or {}
    if not dns_subdomain(meta.get("name", "")):
        errors.append("metadata/name: %r is not a DNS subdomain" % meta.get("name"))
    if namespaced and not DNS_LABEL.match(meta.get("namespace", "") or ""):
        errors.append("metadata/namespace: %r is not a DNS label" % meta.get("namespace"))


def _check_attribute(where, name, value, errors):
    if not qualified_name(name):
        errors.append("%s: attribute name %r is not a C identifier of at most 32 characters "
                      "(optionally after a DNS subdomain and /)" % (where, name))
    if not isinstance(value, dict):
        return
    set_fields = [k for k in ("int", "bool", "string", "version") if k in value]
    if len(set_fields) != 1:
        errors.append("%s/%s: exactly one of int, bool, string, version (got %s)"
                      % (where, name, set_fields))
    for k in ("string", "version"):
        if k in value and isinstance(value[k], str) and len(value[k]) > 64:
            errors.append("%s/%s: %s longer than 64 characters" % (where, name, k))
    if "version" in value and not SEMVER.match(str(value["version"])):
        errors.append("%s/%s: version %r is not semver 2.0" % (where, name, value["version"]))


def _check_slice(obj, errors):
    _check_meta(obj, errors, namespaced=False)
    spec = obj.get("spec") or {}
    if not dns_subdomain(spec.get("driver", ""), 63):
        errors.append("spec/driver: %r is not a DNS subdomain of at most 63" % spec.get("driver"))
    chosen = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
              if spec.get(k) not in (None, False, "")]
    if len(chosen) != 1:
        errors.append("spec: exactly one of nodeName, nodeSelector, allNodes, "
                      "perDeviceNodeSelection (got %s)" % chosen)
    pool = spec.get("pool") or {}
    if not isinstance(pool.get("name"), str) or not 0 < len(pool.get("name")) <= 253:
        errors.append("spec/pool/name: missing or longer than 253")
    if not isinstance(pool.get("generation"), int) or pool.get("generation") < 0:
        errors.append("spec/pool/generation: not an integer >= 0")
    if not isinstance(pool.get("resourceSliceCount"), int) or pool.get("resourceSliceCount") < 1:
        errors.append("spec/pool/resourceSliceCount: not an integer >= 1")
    devices = spec.get("devices") or []
    tainted = any(d.get("taints") or d.get("consumesCounters") for d in devices
                  if isinstance(d, dict))
    limit = 64 if tainted else 128
    if len(devices) > limit:
        errors.append("spec/devices: %d devices, more than %d%s"
                      % (len(devices), limit, " (a device has taints)" if tainted else ""))
    names = set()
    for i, d in enumerate(devices):
        if not isinstance(d, dict):
            continue
        where = "spec/devices/%d" % i
        n = d.get("name", "")
        if not DNS_LABEL.match(n or "") or len(n) > 63:
            errors.append("%s/name: %r is not a DNS label" % (where, n))
        if n in names:
            errors.append("%s/name: %r twice" % (where, n))
        names.add(n)
        attrs = d.get("attributes") or {}
        caps = d.get("capacity") or {}
        if len(attrs) + len(caps) > 32:
            errors.append("%s: %d attributes and capacities, more than 32"
                          % (where, len(attrs) + len(caps)))
        for name, value in attrs.items():
            _check_attribute(where + "/attributes", name, value, errors)
        taints = d.get("taints") or []
        if len(taints) > 4:
            errors.append("%s/taints: %d, more than 4" % (where, len(taints)))
        for j, t in enumerate(taints):
            tw = "%s/taints/%d" % (where, j)
            if not label_key(t.get("key")):
                errors.append("%s/key: %r is not a label key" % (tw, t.get("key")))
            v = t.get("value", "")
            if v and (len(v) > 63 or not LABEL_NAME.match(v)):
                errors.append("%s/value: %r is not a label value" % (tw, v))
            # "None" (seen, never blocking) since 1.35 (KEP-5055); older documents name two.
            if t.get("effect") not in ("NoSchedule", "NoExecute", "None"):
                errors.append("%s/effect: %r is not NoSchedule, NoExecute or None"
                              % (tw, t.get("effect")))
            if "timeAdded" in t and not rfc3339(t["timeAdded"]):
                errors.append("%s/timeAdded: %r is not RFC 3339" % (tw, t["timeAdded"]))


def _check_claim(obj, errors):
    _check_meta(obj, errors, namespaced=True)
    status = obj.get("status") or {}
    devices = status.get("devices") or []
    for i, d in enumerate(devices):
        where = "status/devices/%d" % i
        if not dns_subdomain(d.get("driver", ""), 63):
            errors.append("%s/driver: not a DNS subdomain" % where)
        if not DNS_LABEL.match(d.get("device", "") or ""):
            errors.append("%s/device: not a DNS label" % where)
        if len(d.get("conditions") or []) > 8:
            errors.append("%s/conditions: more than 8" % where)
        if len(json.dumps(d.get("data"))) > 10 * 1024 if "data" in d else False:
            errors.append("%s/data: over 10 KiB" % where)
        nd = d.get("networkData")
        if nd:
            if len(nd.get("interfaceName", "")) > 256:
                errors.append("%s/networkData/interfaceName: longer than 256" % where)
            ips = nd.get("ips") or []
            if len(ips) > 16:
                errors.append("%s/networkData/ips: more than 16" % where)
            if len(set(ips)) != len(ips):
                errors.append("%s/networkData/ips: duplicates" % where)
            for ip in ips:
                try:
                    ipaddress.ip_interface(ip)
                    if "/" not in ip:
                        raise ValueError("no prefix length")
                except ValueError as e:
                    errors.append("%s/networkData/ips: %r is not CIDR (%s)" % (where, ip, e))
            if len(nd.get("hardwareAddress", "")) > 128:
                errors.append("%s/networkData/hardwareAddress: longer than 128" % where)


def _check_class(obj, errors):
    _check_meta(obj, errors, namespaced=False)
    spec = obj.get("spec") or {}
    for i, s in enumerate(spec.get("selectors") or []):
        expr = ((s or {}).get("cel") or {}).get("expression", "")
        if not expr or len(expr) > 10 * 1024:
            errors.append("spec/selectors/%d/cel/expression: empty or over 10 Ki" % i)
    ern = spec.get("extendedResourceName")
    if ern is not None and (not label_key(ern) or "/" not in ern
                            or ern.startswith("kubernetes.io/")):
        errors.append("spec/extendedResourceName: %r is not an extended resource name" % ern)


def validate(kind, obj):
    """Every reason `obj` (a parsed object of `kind`) would be refused; empty when accepted."""
    if not isinstance(obj, dict):
        return ["(object): not a JSON object"]
    errors = []
    if obj.get("apiVersion") != "resource.k8s.io/v1":
        errors.append("apiVersion: %r is not resource.k8s.io/v1" % obj.get("apiVersion"))
    if obj.get("kind") != kind:
        errors.append("kind: %r is not %s" % (obj.get("kind"), kind))
    errors += schema_errors(kind, obj)
    {"ResourceSlice": _check_slice, "ResourceClaim": _check_claim,
     "DeviceClass": _check_class, "ResourceClaimTemplate": lambda o, e: None}[kind](obj, errors)
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", required=True, choices=sorted(KINDS))
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    bad = 0
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        for e in validate(args.kind, obj):
            print("%s: %s" % (path, e))
            bad += 1
    if bad:
        print("%d error(s)" % bad)
        return 1
    print("%d object(s) valid" % len(args.files))
    return 0


if __name__ == "__main__":
    sys.exit(main())

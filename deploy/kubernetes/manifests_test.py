#!/usr/bin/python3
"""Checks the Kubernetes manifests in deploy/kubernetes against each other and the binaries.

Run with Debian's /usr/bin/python3 (python3-yaml); exits 77 (ctest SKIP_RETURN_CODE) without yaml.

  * every YAML document parses (duplicate keys are an error), has a known kind and apiVersion and
    the fields that kind needs; namespaced objects sit in the kustomization's namespace, and
    kustomization.yaml lists exactly the manifests in the folder;
  * the DaemonSet's references resolve (ServiceAccount, ConfigMap, volumes, selector);
  * every flag of the container is `--name=value`, is listed by `fabric-agent --help` (skipped
    with a message while the daemon is not built), and each path it names is on a volume mount of
    the right kind (host /sys and /proc read-only, the socket directory and the NFD directory at
    the same host path, the config file a key of the mounted ConfigMap);
  * the probes run `fabricctl health` with flags `fabricctl health --help` lists, against the
    agent's socket;
  * the container is not privileged and adds no capability besides NET_RAW, NET_ADMIN, IPC_LOCK;
  * the image the Dockerfile's last stage builds has the binaries where the manifest runs them
    (its COPYs, and the fabric-agent package it installs: the built .deb's paths, from --debs);
  * the init container install-cni (same image, not privileged, no capability) copies fabric-cni
    from where the Dockerfile installs it to a temporary name in the host's /opt/cni/bin, then
    renames it to fabric-cni there (set -e: a failed copy is never renamed into place);
  * every examples/cni/*.conflist parses, chains fabric-cni after the first plugin, uses only keys
    of the configuration table in cni-hook/README.md, and the real fabric-cni (--cni) accepts its
    cniVersion and settings (DEL with the example's entry exits 0; a control with a wrong type is
    refused with code 7); fabric-cni's default agentSocket is the agent's hand-off socket;
  * the ConfigMap's config.json is accepted by the real loader: fabricctl on an example host
    (fabric-mkhost roce-9port) exits 0 with it and 2 with a config the loader must reject;
  * who may do what over which channel (the socket's group, the probe responder's allow-list
    and Secret, the TLS component and README.md's cert-manager example): manifests_security.py.

usage: manifests_test.py --dir=deploy/kubernetes --fabricctl=PATH --mkhost=PATH
                         [--agent=PATH] [--unit=systemd/fabric-agent.service]
                         [--dockerfile=deploy/Dockerfile] [--debs=BUILD/debs] [--cni=PATH]
                         [--examples=examples/cni] [--cni-readme=cni-hook/README.md]
(--examples and --cni-readme default to the repository's, found from this file's path.)
"""

import argparse
import json
import glob
import io
import os
import re
import shlex
import subprocess
import sys
import tarfile
import tempfile

try:
    import yaml
except ImportError:
    print("SKIP: /usr/bin/python3 has no yaml module (Debian package python3-yaml)")
    sys.exit(77)

# No __pycache__ in the source tree, where ctest runs this.
sys.dont_write_bytecode = True
import manifests_security  # noqa: E402 (needs yaml, like this file)

ALLOWED_CAPS = {"NET_RAW", "NET_ADMIN", "IPC_LOCK"}
# The CNI plugin: its conflist "type" is the file name in the CNI bin directory.
CNI_TYPE = "fabric-cni"
CNI_HOST_BIN = "/opt/cni/bin"
# The pod helper (fabric-env): installed beside the published host, which Allocate mounts.
POD_HELPER = "fabric-env"
POD_HELPER_HOST_DIR = "/run/fabric-env"
# Commands the install script may run: shell builtins and tools debian:12-slim has.
INSTALL_TOOLS = {"set", "cp", "chmod", "mv"}
# Keys of a plugin entry that belong to CNI itself rather than to the plugin.
CNI_STANDARD_KEYS = {"type"}
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
API_VERSIONS = {
    "Namespace": "v1",
    "ServiceAccount": "v1",
    "ConfigMap": "v1",
    "Service": "v1",
    "DaemonSet": "apps/v1",
}
CLUSTER_SCOPED = {"Namespace"}
KUSTOMIZATION_API = "kustomize.config.k8s.io/v1beta1"

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}")


def ok(msg):
    print(f"ok: {msg}")


def check(cond, msg):
    (ok if cond else fail)(msg)
    return cond


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (PyYAML keeps the last one silently)."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def dig(obj, *keys, default=None):
    for k in keys:
        if not isinstance(obj, dict) or k not in obj:
            return default
        obj = obj[k]
    return obj


def flags_in(text):
    """Long flags named in help or command text ("--socket", "--fail-on")."""
    return set(re.findall(r"(?:^|[\s,\"=\[])(--[a-z][a-z0-9-]*)", text, re.M))


def help_flags(cmd):
    if not os.access(cmd[0], os.X_OK):
        fail(f"{cmd[0]} is not built (cmake --build BUILD --target {os.path.basename(cmd[0])})")
        return set()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    out = res.stdout + res.stderr
    if res.returncode != 0:
        fail(f"{' '.join(cmd)} exited {res.returncode}: {out.strip()}")
    return flags_in(out)


def split_flags(args, where):
    """{flag: value} of `--name=value` arguments; anything else is a failure."""
    flags = {}
    for a in args:
        m = re.fullmatch(r"(--[a-z][a-z0-9-]*)(?:=(.*))?", a)
        if not m:
            fail(f"{where}: argument {a!r} is not of the form --name or --name=value")
            continue
        flags[m.group(1)] = m.group(2)
    return flags


def under(path, mount):
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def load_documents(d):
    docs = []  # (file, document)
    files = sorted(f for f in os.listdir(d) if f.endswith((".yaml", ".yml")))
    for f in files:
        try:
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                loaded = [x for x in yaml.load_all(fh, Loader=StrictLoader) if x is not None]
        except yaml.YAMLError as e:
            fail(f"{f}: YAML does not parse: {e}")
            continue
        check(loaded, f"{f}: has at least one document")
        docs.extend((f, x) for x in loaded)
    return files, docs


def check_kustomization(files, docs):
    kust = [x for f, x in docs if f == "kustomization.yaml"]
    if not check(len(kust) == 1, "kustomization.yaml: one document"):
        return None, {}
    k = kust[0]
    check(k.get("apiVersion") == KUSTOMIZATION_API and k.get("kind") == "Kustomization",
          f"kustomization.yaml: {KUSTOMIZATION_API} Kustomization")
    listed = k.get("resources") or []
    others = [f for f in files if f != "kustomization.yaml"]
    check(sorted(listed) == sorted(others),
          f"kustomization.yaml resources {listed} are exactly the manifests {others}")
    images = {i.get("name"): i for i in k.get("images") or []}
    return k.get("namespace"), images


def check_objects(docs, namespace):
    objects = {}  # (kind, name) -> object
    for f, x in docs:
        if f == "kustomization.yaml":
            continue
        kind, api, name = x.get("kind"), x.get("apiVersion"), dig(x, "metadata", "name")
        where = f"{f}: {kind}/{name}"
        if not check(kind in API_VERSIONS, f"{where}: known kind"):
            continue
        check(api == API_VERSIONS[kind], f"{where}: apiVersion {api} is {API_VERSIONS[kind]}")
        check(isinstance(name, str) and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name),
              f"{where}: metadata.name is a DNS label")
        ns = dig(x, "metadata", "namespace")
        if kind in CLUSTER_SCOPED:
            check(ns is None, f"{where}: cluster-scoped, no namespace")
        else:
            check(ns == namespace, f"{where}: in namespace {namespace} (kustomization's)")
        check((kind, name) not in objects, f"{where}: defined once")
        objects[(kind, name)] = x
    check(("Namespace", namespace) in objects, f"Namespace {namespace} is defined")
    return objects


def volume_key(volume, kind, rel):
    """The key of a configMap or secret volume (kind) that the container sees as file `rel`
    below the mount: `items` map keys to paths; without items every key is a file of its name."""
    items = dig(volume, kind, "items")
    if items is None:
        return rel
    return next((i.get("key") for i in items if i.get("path") == rel), None)


def check_config(objects, volume, config_path, mount_path, fabricctl, mkhost):
    cm_name = dig(volume, "configMap", "name")
    cm = objects.get(("ConfigMap", cm_name))
    if not check(cm is not None, f"--config: ConfigMap {cm_name} is defined"):
        return
    key = volume_key(volume, "configMap", os.path.relpath(config_path, mount_path))
    text = dig(cm, "data", key) if key else None
    if not check(isinstance(text, str), f"--config: ConfigMap {cm_name} has key {key}"):
        return
    try:
        parsed = json.loads(text)
        ok(f"ConfigMap {cm_name} {key} is JSON")
    except json.JSONDecodeError as e:
        fail(f"ConfigMap {cm_name} {key} is not JSON: {e}")
        return
    check(isinstance(parsed, dict) and "selection" in parsed,
          f"ConfigMap {cm_name} {key} has a selection section")
    if not (fabricctl and mkhost):
        fail("--fabricctl and --mkhost are needed to check the config with the real loader")
        return
    with tempfile.TemporaryDirectory() as tmp:
        host = os.path.join(tmp, "host")
        res = subprocess.run([mkhost, "roce-9port", host], capture_output=True, text=True,
                             timeout=60)
        if not check(res.returncode == 0, f"fabric-mkhost roce-9port: {res.stderr.strip()}"):
            return
        good = os.path.join(tmp, key)
        with open(good, "w", encoding="utf-8") as fh:
            fh.write(text)
        bad = os.path.join(tmp, "bad.json")
        bad_config = dict(parsed)
        bad_config["noSuchKey"] = True
        with open(bad, "w", encoding="utf-8") as fh:
            json.dump(bad_config, fh)

        def run(path):
            cmd = [fabricctl, "select", "--gpus=all", f"--sysfs={host}/sys",
                   f"--procfs={host}/proc", f"--config={path}"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            return r.returncode, (r.stdout + r.stderr).strip()

        rc, out = run(good)
        check(rc == 0, f"fabricctl select --config=<ConfigMap {key}> on roce-9port exits 0 "
                       f"(got {rc}{': ' + out if rc else ''})")
        rc, out = run(bad)
        check(rc == 2, f"control: fabricctl rejects a config with an unknown key, exit 2 (got {rc})")


def check_probe(name, probe, socket, fabricctl_path, ctl_flags, must_have):
    if not check(isinstance(probe, dict), f"{name} is defined"):
        return
    cmd = dig(probe, "exec", "command") or []
    if not check(len(cmd) >= 2, f"{name}: exec command {cmd}"):
        return
    check(cmd[0] == fabricctl_path, f"{name}: runs {fabricctl_path}")
    check(cmd[1] == "health", f"{name}: `fabricctl health`")
    flags = split_flags(cmd[2:], name)
    for f in sorted(flags):
        if ctl_flags is not None:
            check(f in ctl_flags, f"{name}: {f} is listed by `fabricctl health --help`")
    for f, v in must_have.items():
        check(f in flags and flags[f] == v,
              f"{name}: passes {f}{'=' + v if v is not None else ''}")
    target = flags.get("--target")
    check(target == f"unix://{socket}", f"{name}: --target={target} is the agent's socket {socket}")
    period, timeout = probe.get("periodSeconds"), probe.get("timeoutSeconds")
    if check(isinstance(period, int) and isinstance(timeout, int) and 0 < timeout < period,
             f"{name}: 0 < timeoutSeconds ({timeout}) < periodSeconds ({period})"):
        # fabricctl gives up (with a message) before the kubelet kills it (5 s by default).
        own = float(flags.get("--timeout") or 5)
        check(own < timeout, f"{name}: fabricctl --timeout ({own:g} s) < timeoutSeconds")


def quantity(q):
    """CPU or memory quantity as a float (cores or bytes); only the suffixes used here."""
    q = str(q)
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 1e3, "M": 1e6, "G": 1e9}
    for suffix, mult in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * mult
    return float(q)


def dockerfile_installs(text):
    """Paths the Dockerfile's last stage COPYs into the image ({path: source})."""
    text = re.sub(r"\\\n", " ", text)  # line continuations
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    stages = [i for i, ln in enumerate(lines) if ln.split()[0].upper() == "FROM"]
    installed = {}
    for ln in lines[stages[-1] if stages else 0:]:
        words = ln.split()
        if words[0].upper() not in ("COPY", "ADD"):
            continue
        rest = " ".join(words[1:])
        if rest.lstrip().startswith("["):
            operands = json.loads(rest)
        else:
            operands = [w for w in shlex.split(rest) if not w.startswith("--")]
        if len(operands) < 2:
            continue
        *srcs, dest = operands
        for src in srcs:
            into_dir = dest.endswith("/") or len(srcs) > 1
            path = os.path.join(dest, os.path.basename(src)) if into_dir else dest
            installed[os.path.normpath(path)] = src
    return installed


def dockerfile_installs_package(text):
    """Whether the Dockerfile's last stage installs the fabric-agent .deb an earlier stage built:
    it COPYs fabric-agent_*.deb --from= a stage that runs cpack (the fabric_debs target), and
    `apt-get install`s that file."""
    text = re.sub(r"\\\n", " ", text)
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    stages = [i for i, ln in enumerate(lines) if ln.split()[0].upper() == "FROM"]
    if len(stages) < 2:
        return False
    last, earlier = lines[stages[-1]:], " ".join(lines[:stages[-1]])
    deb = re.compile(r"(^|/)fabric-agent_\*\.deb$")
    copied = any(ln.split()[0].upper() == "COPY" and "--from=" in ln
                 and any(deb.search(w) for w in ln.split()[1:-1]) for ln in last)
    installed = any(ln.split()[0].upper() == "RUN" and "apt-get install" in ln
                    and any(deb.search(w) for w in ln.split()) for ln in last)
    built = "fabric_debs" in earlier or re.search(r"\bcpack\b", earlier) is not None
    return copied and installed and built


def deb_files(debs):
    """The paths the built fabric-agent package installs (DIR/fabric-agent_*.deb), or None."""
    found = sorted(glob.glob(os.path.join(debs, "fabric-agent_*.deb"))) if debs else []
    if len(found) != 1:
        return None
    out = subprocess.run(["dpkg-deb", "--fsys-tarfile", found[0]], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(out.stdout)) as tar:
        return {os.path.normpath("/" + m.name) for m in tar.getmembers() if not m.isdir()}


def shell_commands(script):
    """argv of each simple command of a plain script (lines, `;` and `&&`); None if unparsable."""
    cmds = []
    for line in script.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"\s*(?:;|&&)\s*", line):
            if not part:
                continue
            try:
                argv = shlex.split(part)
            except ValueError:
                return None
            if argv:
                cmds.append(argv)
    return cmds


def check_install_cni(pod, agent, volumes, installed):
    """The init container that puts fabric-cni into the host's CNI bin directory."""
    inits = pod.get("initContainers") or []
    if not check(len(inits) == 1 and inits[0].get("name") == "install-cni",
                 f"one init container, install-cni (got {[i.get('name') for i in inits]})"):
        return
    ic = inits[0]
    check(ic.get("image") == agent.get("image"),
          f"install-cni: the agent's image {agent.get('image')} (got {ic.get('image')})")

    sc = ic.get("securityContext") or {}
    check(sc.get("privileged") in (None, False), "install-cni: not privileged")
    check(sc.get("allowPrivilegeEscalation") is False,
          "install-cni: allowPrivilegeEscalation false")
    check(sc.get("readOnlyRootFilesystem") is True, "install-cni: readOnlyRootFilesystem true")
    caps = sc.get("capabilities") or {}
    check("ALL" in (caps.get("drop") or []), "install-cni: capabilities drop ALL")
    check(not caps.get("add"), f"install-cni: adds no capability (got {caps.get('add')})")
    res = ic.get("resources") or {}
    for kind in ("cpu", "memory"):
        req, lim = dig(res, "requests", kind), dig(res, "limits", kind)
        if check(req is not None and lim is not None,
                 f"install-cni: resources: {kind} request and limit"):
            check(quantity(req) <= quantity(lim),
                  f"install-cni: resources: {kind} request {req} <= limit {lim}")

    # The mounts: the host's /opt/cni/bin (fabric-cni) and the host's /run/fabric-env (fabric-env,
    # which the device plugin's Allocate mounts into pods), writable. Each binary is copied to a
    # hidden name beside its final one, then renamed over it (one rename(2)).
    mounts = ic.get("volumeMounts") or []
    for m in mounts:
        check(m.get("name") in volumes, f"install-cni: volumeMount {m.get('name')} names a volume")
    targets = {CNI_HOST_BIN: CNI_TYPE, POD_HELPER_HOST_DIR: POD_HELPER}
    dirs = {}
    for m in mounts:
        hp = dig(volumes.get(m.get("name")), "hostPath", "path")
        if not check(hp in targets, f"install-cni: mounts only the hostPaths {sorted(targets)} "
                                    f"(mounts {m.get('name')}: {hp})"):
            return
        check(not m.get("readOnly"), f"install-cni: {m.get('mountPath')} is writable")
        check(dig(volumes.get(m["name"]), "hostPath", "type") in ("Directory", "DirectoryOrCreate"),
              f"install-cni: hostPath {hp} is a Directory(OrCreate)")
        dirs[hp] = m.get("mountPath", "")
    if not check(set(dirs) == set(targets), f"install-cni: mounts {sorted(targets)} (got {sorted(dirs)})"):
        return
    cni_mount = [m for m in mounts if dig(volumes.get(m["name"]), "hostPath", "path") == CNI_HOST_BIN]
    check(cni_mount[0]["name"] not in {m.get("name") for m in agent.get("volumeMounts") or []},
          f"the agent container does not mount {CNI_HOST_BIN}")

    # The script: set -e, then per binary cp IMAGE_PATH TMP, [chmod MODE TMP], mv TMP FINAL.
    command = list(ic.get("command") or []) + list(ic.get("args") or [])
    if not check(len(command) == 3 and command[0] in ("/bin/sh", "sh")
                 and command[1] in ("-c", "-ec"),
                 f"install-cni: runs `/bin/sh -c SCRIPT` (got {command[:2]})"):
        return
    cmds = shell_commands(command[2])
    if not check(cmds, "install-cni: the script parses as plain commands"):
        return
    for argv in cmds:
        check(argv[0] in INSTALL_TOOLS,
              f"install-cni: {argv[0]} is one of {sorted(INSTALL_TOOLS)} (debian:12-slim)")
    check(command[1] == "-ec" or ["set", "-e"] in cmds,
          "install-cni: set -e (a failed copy must not be renamed into place)")
    cps = [[a for a in argv[1:] if not a.startswith("-")] for argv in cmds if argv[0] == "cp"]
    mvs = [[a for a in argv[1:] if not a.startswith("-")] for argv in cmds if argv[0] == "mv"]
    if not check(len(cps) == len(targets) and all(len(c) == 2 for c in cps),
                 f"install-cni: one `cp SRC TMP` per binary ({cps})"):
        return
    if not check(len(mvs) == len(targets) and all(len(m) == 2 for m in mvs),
                 f"install-cni: one `mv TMP FINAL` per binary ({mvs})"):
        return
    order = [argv[0] for argv in cmds]
    for host_dir, name in targets.items():
        final = os.path.join(dirs[host_dir], name)
        mv = [m for m in mvs if os.path.normpath(m[1]) == final]
        if not check(len(mv) == 1, f"install-cni: renames a copy to {final} (host {host_dir}/{name})"):
            continue
        tmp = os.path.normpath(mv[0][0])
        cp = [c for c in cps if os.path.normpath(c[1]) == tmp]
        if not check(len(cp) == 1, f"install-cni: copies to {tmp} before renaming it"):
            continue
        src = os.path.normpath(cp[0][0])
        check(os.path.dirname(tmp) == dirs[host_dir] and tmp != final,
              f"install-cni: copies to a temporary name {tmp} in {dirs[host_dir]}, not to {final}")
        if installed is None:
            print("SKIPPED PART: install-cni's sources not checked against the Dockerfile (no "
                  "--dockerfile, or no built package to read the image's paths from)")
        else:
            check(src in installed and os.path.basename(src) == name,
                  f"install-cni: copies {src}, where deploy/Dockerfile installs {name} "
                  f"(it installs {sorted(installed)})")
        check(order.index("cp") < order.index("mv"), "install-cni: cp before mv")


def check_daemonset(objects, images, args):
    dss = [x for (kind, _), x in objects.items() if kind == "DaemonSet"]
    if not check(len(dss) == 1, "one DaemonSet"):
        return
    ds = dss[0]
    spec = ds.get("spec") or {}
    pod = dig(spec, "template", "spec") or {}
    sel = dig(spec, "selector", "matchLabels") or {}
    tmpl_labels = dig(spec, "template", "metadata", "labels") or {}
    check(sel and all(tmpl_labels.get(k) == v for k, v in sel.items()),
          f"DaemonSet selector {sel} matches the pod template's labels")
    check(dig(spec, "updateStrategy", "type") == "RollingUpdate", "updateStrategy RollingUpdate")
    check(pod.get("hostNetwork") is True, "hostNetwork: true")
    check(pod.get("dnsPolicy") == "ClusterFirstWithHostNet", "dnsPolicy ClusterFirstWithHostNet")
    check(not pod.get("hostPID") and not pod.get("hostIPC"), "no hostPID, no hostIPC")
    check(pod.get("priorityClassName") == "system-node-critical",
          "priorityClassName system-node-critical")
    check(any(t.get("operator") == "Exists" and "key" not in t
              for t in pod.get("tolerations") or []),
          "tolerates every taint (operator Exists, no key)")
    sa = pod.get("serviceAccountName")
    check(("ServiceAccount", sa) in objects, f"ServiceAccount {sa} is defined")
    check(pod.get("automountServiceAccountToken") is False,
          "no service account token mounted (the agent does not use the API)")

    containers = pod.get("containers") or []
    if not check(len(containers) == 1, "one container"):
        return
    c = containers[0]
    for key in ("name", "image"):
        check(c.get(key), f"container has {key}")
    image = c.get("image", "")
    repo, _, tag = image.rpartition(":")
    check(repo and tag, f"image {image} has a tag")
    check(repo in images, f"kustomization.yaml images: names {repo}")

    # Security context: pod level for seccomp, container level for the rest.
    sc = c.get("securityContext") or {}
    check(sc.get("privileged") in (None, False), "not privileged")
    check(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation: false")
    check(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem: true")
    caps = sc.get("capabilities") or {}
    check("ALL" in (caps.get("drop") or []), "capabilities: drop ALL")
    added = set(caps.get("add") or [])
    check(added <= ALLOWED_CAPS,
          f"capabilities added {sorted(added)} are among {sorted(ALLOWED_CAPS)}")
    seccomp = dig(sc, "seccompProfile", "type") or dig(pod, "securityContext", "seccompProfile",
                                                        "type")
    check(seccomp == "RuntimeDefault", "seccompProfile RuntimeDefault")

    res = c.get("resources") or {}
    for kind in ("cpu", "memory"):
        req, lim = dig(res, "requests", kind), dig(res, "limits", kind)
        if check(req is not None and lim is not None, f"resources: {kind} request and limit"):
            check(quantity(req) <= quantity(lim), f"resources: {kind} request {req} <= limit {lim}")

    # Volumes and mounts.
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    mounts = c.get("volumeMounts") or []
    for m in mounts:
        check(m.get("name") in volumes, f"volumeMount {m.get('name')} names a volume")
        check("subPath" not in m, f"volumeMount {m.get('name')}: no subPath (updates propagate)")
    mounted = {m.get("name") for m in mounts}
    for ic in pod.get("initContainers") or []:
        mounted |= {m.get("name") for m in ic.get("volumeMounts") or []}
    for v in volumes:
        check(v in mounted, f"volume {v} is mounted")

    def mount_of(path):
        best = None
        for m in mounts:
            if under(path, m.get("mountPath", "")) and (
                    best is None or len(m["mountPath"]) > len(best["mountPath"])):
                best = m
        return best, volumes.get(best.get("name")) if best else None

    def host_mount(flag, path, host_path, read_only):
        m, v = mount_of(path)
        if not check(m is not None, f"{flag}={path} is on a volume mount"):
            return
        hp = dig(v, "hostPath", "path")
        seen = hp and os.path.normpath(os.path.join(hp, os.path.relpath(path, m["mountPath"])))
        check(seen == os.path.normpath(host_path),
              f"{flag}={path} is the host's {host_path} (hostPath {hp} at {m['mountPath']})")
        check(bool(m.get("readOnly")) == read_only,
              f"{flag}: mount {m['name']} is {'read-only' if read_only else 'writable'}")

    command = c.get("command") or []
    check(len(command) == 1, f"command {command} is the binary alone; flags go in args")
    agent_path = command[0] if command else ""
    flags = split_flags(list(command[1:]) + list(c.get("args") or []), "container args")

    if args.agent:
        known = help_flags([args.agent, "--help"])
        for f in sorted(flags):
            check(f in known, f"agent flag {f} is listed by fabric-agent --help")
    else:
        print("SKIPPED PART: agent flags not checked against `fabric-agent --help`: the "
              "fabric-agent target does not exist yet (agent/daemon); flags used: "
              + " ".join(sorted(flags)))

    for f, v in sorted(flags.items()):
        if v and v.startswith("/"):
            check(mount_of(v)[0] is not None, f"{f}={v} lies on a volume mount")
    for f, host in (("--sysfs", "/sys"), ("--procfs", "/proc")):
        if check(flags.get(f), f"{f} is set"):
            host_mount(f, flags[f], host, True)
    socket = flags.get("--socket")
    if check(socket, "--socket is set"):
        # The same path on the host: the CNI plugin and the systemd unit's clients look there.
        host_mount("--socket", socket, socket, False)
        if args.unit:
            with open(args.unit, encoding="utf-8") as fh:
                unit_socket = re.search(r"^ExecStart=.*--socket=(\S+)", fh.read(), re.M)
            check(unit_socket and unit_socket.group(1) == socket,
                  f"--socket {socket} is the systemd unit's too")
    nfd = flags.get("--nfd-features-dir")
    if check(nfd, "--nfd-features-dir is set"):
        host_mount("--nfd-features-dir", nfd, "/etc/kubernetes/node-feature-discovery/features.d",
                   False)
    cdi = flags.get("--cdi-dir")
    if check(cdi, "--cdi-dir is set (--sysfs is not /sys: the agent keeps no spec without it)"):
        host_mount("--cdi-dir", cdi, "/var/run/cdi", False)
    state = flags.get("--state-dir")
    if check(state, "--state-dir is set (--sysfs is not /sys: no health memory without it)"):
        host_mount("--state-dir", state, "/var/lib/fabric-agent", False)
    host_file = flags.get("--host-file-dir")
    if check(host_file, "--host-file-dir is set (--sysfs is not /sys: no published host without it)"):
        host_mount("--host-file-dir", host_file, "/run/fabric-env", False)
        # The pod record sweeper (beside the published host) judges records by their namespace
        # paths: the host's /run/netns, read-only, with mounts propagated from the host.
        ns_mounts = [m for m in mounts
                     if dig(volumes.get(m.get("name")), "hostPath", "path") in ("/run/netns",
                                                                              "/var/run/netns")]
        if check(len(ns_mounts) == 1, "the host's /run/netns is mounted (pod record sweeper)"):
            m = ns_mounts[0]
            check(m.get("mountPath") in ("/run/netns", "/var/run/netns"),
                  f"/run/netns at its host path (records name host paths; got {m.get('mountPath')})")
            check(m.get("readOnly") is True, "/run/netns is mounted read-only")
            check(m.get("mountPropagation") == "HostToContainer",
                  "/run/netns: mountPropagation HostToContainer (Bidirectional needs privileged)")
    config = flags.get("--config")
    if check(config, "--config is set"):
        m, v = mount_of(config)
        if check(m is not None and v is not None and "configMap" in v,
                 f"--config={config} is on a ConfigMap volume"):
            check(m.get("readOnly") is True, "--config: ConfigMap mount is read-only")
            check_config(objects, v, config, m["mountPath"], args.fabricctl, args.mkhost)

    # Probes.
    fabricctl_path = os.path.join(os.path.dirname(agent_path), "fabricctl")
    ctl_flags = help_flags([args.fabricctl, "health", "--help"]) if args.fabricctl else None
    check_probe("startupProbe", c.get("startupProbe"), socket, fabricctl_path, ctl_flags,
                {"--liveness": None})
    check_probe("livenessProbe", c.get("livenessProbe"), socket, fabricctl_path, ctl_flags,
                {"--liveness": None})
    check_probe("readinessProbe", c.get("readinessProbe"), socket, fabricctl_path, ctl_flags,
                {"--fail-on": "critical"})

    # The image the Dockerfile builds has both binaries where the manifest runs them.
    # The image installs the fabric-agent package (what the host service installs too): its
    # paths are the built .deb's (--debs), checked where one was built.
    installed = None
    if args.dockerfile and os.path.exists(args.dockerfile):
        with open(args.dockerfile, encoding="utf-8") as fh:
            text = fh.read()
        installed = dockerfile_installs(text)
        if dockerfile_installs_package(text):
            files = deb_files(args.debs)
            if files is None:
                print(f"SKIPPED PART: no fabric-agent_*.deb in '{args.debs}' (cmake --build BUILD "
                      "--target fabric_debs): the image's paths not checked")
                installed = None
            else:
                installed.update({f: f for f in files})
    if installed is not None:
        for path in (agent_path, fabricctl_path):
            check(path in installed, f"deploy/Dockerfile installs {path}")

    check_install_cni(pod, c, volumes, installed)

    # Where the agent takes fabric-cni's hand-off: --announce-socket, by default (auto)
    # announce.sock beside --socket; on the run hostPath like the socket.
    handoff = flags.get("--announce-socket", "auto")
    if handoff == "auto" and socket:
        handoff = os.path.join(os.path.dirname(socket), "announce.sock")
    if check(handoff, "the agent's hand-off socket is on (--announce-socket not empty)"):
        host_mount("--announce-socket", handoff, handoff, False)

    check_probe_responder(objects, ds, c, flags, volumes, mount_of)
    check_metrics(ds, c, flags)
    manifests_security.check(sys.modules[__name__], objects, ds, args, socket)
    return handoff


def check_metrics(ds, container, flags):
    """--metrics listens on a named containerPort that the Prometheus annotations name."""
    listen = flags.get("--metrics")
    if not check(listen, "--metrics is set"):
        return
    port = int(listen.rpartition(":")[2] or 0)
    named = [p.get("name") for p in container.get("ports") or [] if p.get("containerPort") == port]
    check(named == ["metrics"], f"--metrics port {port} is the containerPort named metrics")
    ann = dig(ds, "spec", "template", "metadata", "annotations") or {}
    check(ann.get("prometheus.io/scrape") == "true", "prometheus.io/scrape: \"true\"")
    check(ann.get("prometheus.io/port") == str(port), f"prometheus.io/port is {port}")
    check(ann.get("prometheus.io/path", "/metrics") == "/metrics", "prometheus.io/path /metrics")


def check_probe_responder(objects, ds, container, flags, volumes, mount_of):
    """--probe-listen's port is a named containerPort; every Service is headless, selects the
    DaemonSet's pods and targets that port; the ConfigMap's probes.peerDns is such a Service's
    cluster DNS name, with its port."""
    listen = flags.get("--probe-listen")
    if not check(listen, "--probe-listen is set (other nodes' schedules probe this one)"):
        return
    port = int(listen.rpartition(":")[2] or 0)
    cports = {p.get("name"): p for p in container.get("ports") or []}
    named = [n for n, p in cports.items() if p.get("containerPort") == port]
    check(len(named) == 1 and named[0], f"--probe-listen port {port} is a named containerPort")
    labels = dig(ds, "spec", "template", "metadata", "labels") or {}
    services = {name: x for (kind, name), x in objects.items() if kind == "Service"}
    for name, svc in services.items():
        spec = svc.get("spec") or {}
        check(spec.get("clusterIP") == "None", f"Service {name} is headless (clusterIP: None)")
        sel = spec.get("selector") or {}
        check(sel and all(labels.get(k) == v for k, v in sel.items()),
              f"Service {name} selects the DaemonSet's pods ({sel})")
        for sp in spec.get("ports") or []:
            target = sp.get("targetPort", sp.get("port"))
            check(target == port or target in named,
                  f"Service {name} port {sp.get('port')} targets the responder ({target})")
            check(sp.get("port") == port, f"Service {name} port {sp.get('port')} is {port}")
    config = flags.get("--config")
    m, v = mount_of(config) if config else (None, None)
    cm = objects.get(("ConfigMap", dig(v, "configMap", "name")))
    key = volume_key(v, "configMap", os.path.relpath(config, m["mountPath"])) if m else None
    text = dig(cm, "data", key) if cm and key else None
    try:
        probes = (json.loads(text) if text else {}).get("probes")
    except json.JSONDecodeError:
        probes = None  # check_config reports it
    if not probes or "peerDns" not in probes:
        print("SKIPPED PART: the ConfigMap schedules no probes by DNS")
        return
    ns = ds.get("metadata", {}).get("namespace")
    want = {f"{n}.{ns}.svc.cluster.local" for n in services} | {f"{n}.{ns}.svc" for n in services}
    check(probes["peerDns"] in want,
          f"ConfigMap probes.peerDns {probes['peerDns']} is a headless Service of the agents "
          f"({sorted(want)})")
    check(probes.get("port", 18515) == port,
          f"ConfigMap probes.port {probes.get('port', 18515)} is --probe-listen's {port}")


def cni_config_table(readme):
    """{key: default} of the configuration table in cni-hook/README.md."""
    with open(readme, encoding="utf-8") as fh:
        text = fh.read()
    m = re.search(r"^## Configuration\n(.*?)(?=^## )", text, re.M | re.S)
    table = {}
    for line in (m.group(1) if m else "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        key = re.fullmatch(r"`([A-Za-z][A-Za-z0-9.]*)`", cells[0]) if cells else None
        if key and len(cells) >= 2:
            table[key.group(1)] = cells[1].strip("`")
    return table


def flat_keys(obj, prefix=""):
    """Dotted keys of a JSON object's leaves ({"announce": {"count": 3}} -> announce.count)."""
    keys = []
    for k, v in obj.items():
        if isinstance(v, dict) and v:
            keys += flat_keys(v, f"{prefix}{k}.")
        else:
            keys.append(prefix + k)
    return keys


def run_cni_del(cni, version, name, entry, tmp):
    """fabric-cni DEL with this entry (files and the agent redirected into tmp): (rc, stdout)."""
    conf = dict(entry, cniVersion=version, name=name, stateDir=os.path.join(tmp, "state"),
                envDir=os.path.join(tmp, "env"), agentSocket=os.path.join(tmp, "none.sock"))
    env = dict(os.environ, CNI_COMMAND="DEL", CNI_CONTAINERID="manifests-test-0000",
               CNI_IFNAME="eth0", CNI_PATH=tmp)
    env.pop("CNI_NETNS", None)
    r = subprocess.run([cni], input=json.dumps(conf), env=env, capture_output=True, text=True,
                       timeout=30)
    return r.returncode, r.stdout.strip()


def check_conflists(examples, readme, cni, handoff):
    table = cni_config_table(readme)
    if not check(len(table) >= 10 and "envDir" in table and "announce.count" in table,
                 f"{readme}: configuration table read ({len(table)} keys)"):
        return
    default_socket = table.get("agentSocket")
    if handoff:
        check(default_socket == handoff,
              f"fabric-cni's default agentSocket {default_socket} is the agent's hand-off "
              f"socket {handoff}")
    supported = None
    if cni and not os.access(cni, os.X_OK):
        fail(f"{cni} is not built (cmake --build BUILD --target {CNI_TYPE})")
    elif cni:
        r = subprocess.run([cni], input='{"cniVersion":"1.0.0"}', capture_output=True, text=True,
                           env=dict(os.environ, CNI_COMMAND="VERSION"), timeout=30)
        try:
            supported = json.loads(r.stdout)["supportedVersions"]
            ok(f"fabric-cni VERSION: {supported}")
        except (ValueError, KeyError, TypeError):
            fail(f"fabric-cni VERSION: unexpected output {r.stdout!r}")
    else:
        print("SKIPPED PART: conflists not run through fabric-cni: no --cni (the fabric-cni "
              "target does not exist)")

    files = sorted(glob.glob(os.path.join(examples, "*.conflist")))
    if not check(files, f"{examples} has .conflist files"):
        return
    for path in files:
        f = os.path.relpath(path, os.path.dirname(os.path.dirname(examples)))
        try:
            with open(path, encoding="utf-8") as fh:
                conf = json.load(fh)
        except (OSError, json.JSONDecodeError) as e:
            fail(f"{f}: not JSON: {e}")
            continue
        if not check(isinstance(conf, dict) and isinstance(conf.get("plugins"), list)
                     and isinstance(conf.get("cniVersion"), str)
                     and isinstance(conf.get("name"), str),
                     f"{f}: a conflist (cniVersion, name, plugins)"):
            continue
        plugins = conf["plugins"]
        check(all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in plugins),
              f"{f}: every plugin has a type")
        types = [p.get("type") if isinstance(p, dict) else None for p in plugins]
        idx = [i for i, t in enumerate(types) if t == CNI_TYPE]
        if not check(len(idx) == 1 and idx[0] >= 1,
                     f"{f}: {CNI_TYPE} once, after the interface plugin (types {types})"):
            continue
        entry = plugins[idx[0]]
        for key in flat_keys(entry):
            if key not in CNI_STANDARD_KEYS:
                check(key in table,
                      f"{f}: {CNI_TYPE} key {key} is in cni-hook/README.md's configuration table")
        for key in ("agentSocket", "envDir", "stateDir"):
            if key in entry:
                check(isinstance(entry[key], str) and entry[key].startswith("/"),
                      f"{f}: {key} is an absolute path")
        if supported is None:
            continue
        check(conf["cniVersion"] in supported,
              f"{f}: cniVersion {conf['cniVersion']} is one fabric-cni supports")
        with tempfile.TemporaryDirectory() as tmp:
            rc, out = run_cni_del(cni, conf["cniVersion"], conf["name"], entry, tmp)
            check(rc == 0, f"{f}: fabric-cni DEL accepts the {CNI_TYPE} entry"
                           f"{'' if rc == 0 else f' (rc {rc}: {out})'}")
            # Control: the same run must refuse a value of the wrong type.
            bad = dict(entry, announce=dict(entry.get("announce") or {}, count="three"))
            rc, out = run_cni_del(cni, conf["cniVersion"], conf["name"], bad, tmp)
            code = None
            try:
                code = json.loads(out).get("code")
            except (ValueError, AttributeError):
                pass
            check(rc == 1 and code == 7,
                  f"control: {f} with announce.count a string is refused with code 7 "
                  f"(rc {rc}, {out})")


def check_pod_examples(d, objects):
    """deploy/kubernetes/examples/: each workload asks for a resource the ConfigMap's devicePlugin
    section defines and starts its command through the helper Allocate mounts. DRA examples
    (ResourceClaimTemplates, pods that name resourceClaims) get their NICs and environment from
    CDI instead: tests/dra/manifests_dra_test.py checks those."""
    # The device plugin mounts it where the CDI spec does (cdi_spec.h holds the path).
    with open(os.path.join(REPO, "agent", "publish", "cdi", "cdi_spec.h"),
              encoding="utf-8") as fh:
        helper = re.search(r'kPodHelperInContainer\[\] = "([^"]+)"', fh.read())
    if not check(helper, "cdi_spec.h names the helper's path in the container"):
        return
    helper = helper.group(1)
    cm = objects.get(("ConfigMap", "fabric-agent-config")) or {}
    try:
        config = json.loads(dig(cm, "data", "config.json") or "{}")
    except json.JSONDecodeError:
        config = {}
    resources = {r.get("name") for r in dig(config, "devicePlugin", "resources") or []}
    check(resources, "the ConfigMap defines devicePlugin resources")
    examples = os.path.join(d, "examples")
    files, docs = load_documents(examples)
    check(files, f"{examples} holds pod examples")
    for f, doc in docs:
        if doc.get("kind") == "ResourceClaimTemplate" or dig(doc, "spec", "resourceClaims"):
            print(f"note: {f}: {doc.get('kind')} {dig(doc, 'metadata', 'name')} is a DRA "
                  "example (dra.manifests checks it)")
            continue
        templates = []

        def walk(x):
            if isinstance(x, dict):
                if "containers" in x:
                    templates.append(x)
                for v in x.values():
                    walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)
        walk(doc)
        check(templates, f"{f}: has a pod template")
        for t in templates:
            for c in t.get("containers") or []:
                cmd = c.get("command") or []
                check(cmd[:2] == [helper, "exec"] and "--" in cmd,
                      f"{f}: {c.get('name')} starts with `{helper} exec --` (got {cmd[:3]})")
                limits = dig(c, "resources", "limits") or {}
                asked = resources & set(limits)
                check(asked, f"{f}: {c.get('name')} asks for a devicePlugin resource "
                             f"({sorted(resources)}; limits {sorted(limits)})")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--fabricctl", default="")
    p.add_argument("--mkhost", default="")
    p.add_argument("--agent", default="")
    p.add_argument("--unit", default="")
    p.add_argument("--dockerfile", default="")
    p.add_argument("--debs", default="")
    p.add_argument("--cni", default="")
    p.add_argument("--examples", default=os.path.join(REPO, "examples", "cni"))
    p.add_argument("--cni-readme", default=os.path.join(REPO, "cni-hook", "README.md"))
    # CMake passes an empty argument for a binary whose target does not exist.
    args = p.parse_args([a for a in sys.argv[1:] if a])

    files, docs = load_documents(args.dir)
    namespace, images = check_kustomization(files, docs)
    handoff = None
    if namespace:
        objects = check_objects(docs, namespace)
        handoff = check_daemonset(objects, images, args)
        check_pod_examples(args.dir, objects)
    check_conflists(args.examples, args.cni_readme, args.cni, handoff)

    if failures:
        print(f"manifests_test: {len(failures)} failure(s)")
        return 1
    print("manifests_test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Who may do what, over which channel: the access checks of manifests_test.py (issue 12).

  * the launcher-facing socket: --socket-group is a numeric group the pod is a member of (the
    agent has no CAP_CHOWN), not 0; no --control-group (control calls over the socket: root only);
  * every $(VAR) in the args is an env var of the container; --probe-allow comes from a required
    ConfigMap key that is not also mounted as a file; its value is a CIDR list that allows neither
    everything nor nothing, or a placeholder that the real agent refuses with exit 2;
  * --probe-secret-file lies on a read-only mount of a Secret volume that is not optional, whose
    items project the key to that file, owner-only; the Secret is not in the kustomization (no
    secret in the repository), and README.md's command creates it with that name and key;
  * components/tls renders: a kustomize Component whose JSON patch (applied here, and compared
    with `kubectl kustomize` where kubectl exists) adds --listen on a named port, the --tls-*
    flags (each in `fabric-agent --help`), their files on a read-only, non-optional Secret mount
    with the keys of a kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt); the real agent with
    those flags and certificates made by openssl serves mutual TLS (a client certificate from
    ca.crt is answered, none is refused; a key of another certificate is exit 2);
  * README.md's cert-manager example: a server Certificate into that Secret and a client
    Certificate whose commonName is one of --tls-control-names, from the same issuer (whose CA is
    the Secret's ca.crt, the agent's --tls-client-ca).
"""

import copy
import ipaddress
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time

import yaml

TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")
TLS_FLAGS = {"--tls-cert": "tls.crt", "--tls-key": "tls.key", "--tls-client-ca": "ca.crt"}
COMPONENT_API = "kustomize.config.k8s.io/v1alpha1"


def container_of(ds):
    containers = (((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers") or [{}]
    return containers[0]


def pod_of(ds):
    return ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}


def mount_of(t, container, volumes, path):
    """(mount, volume) of the deepest volume mount holding `path`."""
    best = None
    for m in container.get("volumeMounts") or []:
        mp = m.get("mountPath", "")
        if t.under(path, mp) and (best is None or len(mp) > len(best["mountPath"])):
            best = m
    return best, volumes.get(best.get("name")) if best else None


def check_secret_file(t, where, path, container, volumes, secret_key=None):
    """`path` is the file of a Secret key on a read-only mount of a non-optional, owner-only
    Secret volume; returns (secret name, key) or (None, None)."""
    m, v = mount_of(t, container, volumes, path)
    if not t.check(m is not None and v is not None and "secret" in v,
                   f"{where}={path} is on a Secret volume"):
        return None, None
    t.check(m.get("readOnly") is True, f"{where}: the Secret mount {m['name']} is read-only")
    t.check("subPath" not in m, f"{where}: no subPath (the kubelet's updates reach the file)")
    sec = v["secret"]
    t.check(sec.get("optional") is not True,
            f"{where}: Secret {sec.get('secretName')} is not optional (the agent exits 2 on a "
            f"missing file; the pod waits for the Secret instead)")
    mode = sec.get("defaultMode")
    t.check(isinstance(mode, int) and mode & 0o077 == 0,
            f"{where}: defaultMode {oct(mode) if isinstance(mode, int) else mode} is owner-only")
    rel = os.path.relpath(path, m["mountPath"])
    key = t.volume_key(v, "secret", rel)
    # items make the kubelet refuse to mount a Secret without the key, so the file exists.
    t.check(sec.get("items") is not None and key is not None,
            f"{where}: the volume's items project a key to {rel} (items {sec.get('items')})")
    if secret_key is not None:
        t.check(key == secret_key, f"{where}: the file is the Secret's {secret_key} (got {key})")
    return sec.get("secretName"), key


def check_socket_access(t, pod, flags):
    group = flags.get("--socket-group")
    if not t.check(group is not None and re.fullmatch(r"[1-9][0-9]*", group),
                   f"--socket-group={group} is a numeric group other than 0 (the image's "
                   f"/etc/group does not name the node's groups)"):
        return
    groups = (pod.get("securityContext") or {}).get("supplementalGroups") or []
    t.check(int(group) in groups,
            f"--socket-group {group} is in the pod's supplementalGroups {groups} (chown of the "
            f"socket to a group needs membership without CAP_CHOWN)")
    t.check("--control-group" not in flags,
            "no --control-group: control calls over the socket are for uid 0 only")
    t.check(flags.get("--announce-socket", "auto") == "auto",
            "fabric-cni's hand-off stays on (--announce-socket auto: announce.sock beside "
            "--socket, mode 0600, root)")


def expand(t, container, flags):
    """{VAR: (ConfigMap name, key)} of the args' $(VAR) references; each must be a defined env
    var (the kubelet leaves an undefined one as the literal text)."""
    env = {e.get("name"): e for e in container.get("env") or []}
    refs = {}
    for f, v in sorted(flags.items()):
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", v or ""):
            e = env.get(var)
            if not t.check(e is not None, f"{f}: $({var}) is an env var of the container"):
                continue
            ref = t.dig(e, "valueFrom", "configMapKeyRef")
            if ref is not None:
                t.check(ref.get("optional") is not True,
                        f"env {var}: the ConfigMap key is required (not optional)")
                refs[var] = (ref.get("name"), ref.get("key"))
    return refs


def cidrs(text):
    """The networks of a CIDR[,CIDR...] list, or None where one does not parse."""
    try:
        return [ipaddress.ip_network(c.strip(), strict=False) for c in text.split(",")]
    except ValueError:
        return None


def run_agent_with(agent, flag_value, tmp):
    """fabric-agent with only the probe responder's allow-list set: (rc, output)."""
    cmd = [agent, f"--socket={tmp}/agent.sock", "--probe-listen=127.0.0.1:0",
           f"--probe-allow={flag_value}", f"--sysfs={tmp}/none", f"--procfs={tmp}/none"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return None, "still running after 20 s"
    return r.returncode, " ".join((r.stdout + r.stderr).split())


def check_probe_allow(t, objects, container, volumes, flags, refs, agent):
    value = flags.get("--probe-allow")
    m = re.fullmatch(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", value or "")
    if not t.check(m and m.group(1) in refs,
                   f"--probe-allow={value} is an env var from a ConfigMap key"):
        return
    cm_name, key = refs[m.group(1)]
    cm = objects.get(("ConfigMap", cm_name))
    text = t.dig(cm, "data", key)
    if not t.check(isinstance(text, str), f"ConfigMap {cm_name} has the key {key}"):
        return
    for v in volumes.values():
        if t.dig(v, "configMap", "name") == cm_name:
            items = t.dig(v, "configMap", "items")
            t.check(items is not None and key not in {i.get("key") for i in items},
                    f"ConfigMap key {key} is not also a file of volume {v.get('name')} (it is "
                    f"read once at start; a file would look live)")
    nets = cidrs(text)
    if nets is not None:
        ok = nets and all(0 < n.prefixlen for n in nets)
        t.check(ok, f"ConfigMap {key} {text!r} allows networks, not the whole address space")
        return
    # A placeholder: it must stop the agent, so no cluster runs on a forgotten one.
    print(f"note: ConfigMap {key} is the placeholder {text!r}")
    if not agent:
        print("SKIPPED PART: the placeholder is not run through fabric-agent (no --agent)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        rc, out = run_agent_with(agent, text, tmp)
        t.check(rc == 2 and "--probe-allow" in out,
                f"fabric-agent refuses the placeholder {key}, exit 2 naming --probe-allow "
                f"(rc {rc}: {out[:200]})")
        # Control: the same run with a real list gets past the flag (it fails later, or not).
        rc, out = run_agent_with(agent, "192.0.2.0/24", tmp)
        t.check("--probe-allow" not in out,
                f"control: --probe-allow=192.0.2.0/24 is accepted (rc {rc}: {out[:200]})")


def readme_text(directory):
    with open(os.path.join(directory, "README.md"), encoding="utf-8") as fh:
        return fh.read()


def check_probe_secret(t, container, volumes, flags, readme, namespace):
    path = flags.get("--probe-secret-file")
    if not t.check(path, "--probe-secret-file is set (the responder's peers prove the cluster's "
                         "secret)"):
        return
    name, key = check_secret_file(t, "--probe-secret-file", path, container, volumes)
    if not name:
        return
    cmds = re.findall(r"kubectl -n (\S+) create secret generic (\S+) +--from-literal=([\w.-]+)=",
                      readme)
    t.check((namespace, name, key) in cmds,
            f"README.md creates Secret {name} (key {key}) in {namespace} "
            f"(its commands: {cmds})")


def apply_json_patch(doc, ops):
    """RFC 6902 `add` operations (all the component uses) on `doc`; raises ValueError."""
    for op in ops:
        if op.get("op") != "add":
            raise ValueError(f"op {op.get('op')} (only add is applied here)")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node = doc
        for p in parts[:-1]:
            node = node[int(p)] if isinstance(node, list) else node[p]
        last = parts[-1]
        if isinstance(node, list):
            node.insert(len(node) if last == "-" else int(last), copy.deepcopy(op["value"]))
        else:
            node[last] = copy.deepcopy(op["value"])
    return doc


def kubectl_render(directory, component):
    """The DaemonSet `kubectl kustomize` renders for the base plus the component, or None."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        # kustomize takes only relative paths.
        with open(os.path.join(tmp, "kustomization.yaml"), "w", encoding="utf-8") as fh:
            yaml.safe_dump({"resources": [os.path.relpath(directory, tmp)],
                            "components": [os.path.relpath(component, tmp)]}, fh)
        r = subprocess.run([kubectl, "kustomize", tmp], capture_output=True, text=True,
                           timeout=60)
    if r.returncode != 0:
        raise ValueError(r.stderr.strip()[:500])
    for d in yaml.safe_load_all(r.stdout):
        if d and d.get("kind") == "DaemonSet":
            return d
    raise ValueError("no DaemonSet in its output")


def render_tls(t, ds, component):
    """The DaemonSet with the component's patches applied, or None."""
    try:
        with open(os.path.join(component, "kustomization.yaml"), encoding="utf-8") as fh:
            k = yaml.load(fh, Loader=t.StrictLoader)
    except (OSError, yaml.YAMLError) as e:
        t.fail(f"components/tls/kustomization.yaml: {e}")
        return None
    t.check(k.get("apiVersion") == COMPONENT_API and k.get("kind") == "Component",
            f"components/tls: a {COMPONENT_API} Component")
    patches = k.get("patches") or []
    if not t.check(len(patches) >= 1, "components/tls: has patches"):
        return None
    rendered = copy.deepcopy(ds)
    name = t.dig(ds, "metadata", "name")
    for p in patches:
        target = p.get("target") or {}
        t.check(target.get("kind") == "DaemonSet" and target.get("name") == name
                and target.get("group") == "apps",
                f"components/tls: patch {p.get('path')} targets DaemonSet {name} ({target})")
        try:
            with open(os.path.join(component, p.get("path", "")), encoding="utf-8") as fh:
                ops = yaml.load(fh, Loader=t.StrictLoader)
            apply_json_patch(rendered, ops)
            t.ok(f"components/tls: {p.get('path')} applies ({len(ops)} operations)")
        except (OSError, yaml.YAMLError, ValueError, KeyError, IndexError, TypeError) as e:
            t.fail(f"components/tls: {p.get('path')} does not apply: {e}")
            return None
    return rendered


def check_tls_component(t, base_ds, args, directory):
    component = os.path.join(directory, "components", "tls")
    ds = render_tls(t, base_ds, component)
    if ds is None:
        return None
    c = container_of(ds)
    volumes = {v.get("name"): v for v in pod_of(ds).get("volumes") or []}
    for m in c.get("volumeMounts") or []:
        t.check(m.get("name") in volumes, f"tls: volumeMount {m.get('name')} names a volume")
    flags = t.split_flags(list(c.get("args") or []), "tls: container args")
    base_flags = t.split_flags(list(container_of(base_ds).get("args") or []), "base args")
    t.check(all(flags.get(f) == v for f, v in base_flags.items()),
            "tls: the base's flags are kept")
    if args.agent:
        known = t.help_flags([args.agent, "--help"])
        for f in sorted(set(flags) - set(base_flags)):
            t.check(f in known, f"tls: flag {f} is listed by fabric-agent --help")
    listen = flags.get("--listen")
    if t.check(listen, "tls: --listen is set"):
        port = int(listen.rpartition(":")[2] or 0)
        named = [p.get("name") for p in c.get("ports") or [] if p.get("containerPort") == port]
        t.check(len(named) == 1 and named[0], f"tls: --listen port {port} is a named "
                                              f"containerPort ({named})")
    secrets = set()
    for f, key in TLS_FLAGS.items():
        if t.check(flags.get(f), f"tls: {f} is set"):
            name, _ = check_secret_file(t, f"tls: {f}", flags[f], c, volumes, key)
            secrets.add(name)
    t.check(len(secrets) == 1 and None not in secrets,
            f"tls: the three files are one kubernetes.io/tls Secret ({sorted(map(str, secrets))})")
    names = [n for n in (flags.get("--tls-control-names") or "").split(",") if n]
    t.check(names, "tls: --tls-control-names narrows control calls to named client certificates")

    try:
        real = kubectl_render(directory, component)
    except (ValueError, subprocess.TimeoutExpired) as e:
        t.fail(f"tls: kubectl kustomize fails: {e}")
        real = None
    else:
        if real is None:
            print("SKIPPED PART: no kubectl here; the component's patch is applied by this test "
                  "only")
    if real is not None:
        rc = container_of(real)
        for key in ("args", "ports", "volumeMounts"):
            t.check(rc.get(key) == c.get(key), f"tls: kubectl kustomize renders the same "
                                               f"container {key}")
        t.check(pod_of(real).get("volumes") == pod_of(ds).get("volumes"),
                "tls: kubectl kustomize renders the same volumes")
    check_tls_agent(t, args, flags)
    return {"secret": next(iter(secrets)) if len(secrets) == 1 else None,
            "control_names": names}


def make_certificates(d):
    """A CA, a server certificate for localhost and a client certificate in `d`, with
    openssl; the agent's files get the Secret volume's mode (0400)."""
    def run(*cmd):
        subprocess.run(["openssl", *cmd], cwd=d, check=True, capture_output=True, timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=test-ca",
        "-days", "1")
    for name, ext in (("tls", "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                              "extendedKeyUsage=serverAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(d, f"{name}.ext"), "w", encoding="utf-8") as fh:
            fh.write(ext)
        run("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext")
    for f in TLS_KEYS:
        os.chmod(os.path.join(d, f), 0o400)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tls_answers(port, d, client):
    """Whether the agent on `port` completes TLS and speaks HTTP/2 to a client verifying it
    against ca.crt, with the client certificate or none."""
    ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
    ctx.set_alpn_protocols(["h2"])
    if client:
        ctx.load_cert_chain(os.path.join(d, "client.crt"), os.path.join(d, "client.key"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                # The server's SETTINGS frame; with TLS 1.3 a refused client certificate
                # arrives as an alert here, after the handshake.
                return len(s.recv(9)) > 0
    except (OSError, ssl.SSLError):
        return False


def check_tls_agent(t, args, flags):
    """The real agent with the component's TLS flags (files made now, where the Secret would
    put them) serves mutual TLS; the same flags with a key of another certificate are exit 2."""
    if not (args.agent and args.mkhost and shutil.which("openssl")):
        print("SKIPPED PART: the TLS flags are not run through fabric-agent (needs --agent, "
              "--mkhost and openssl)")
        return
    mount = os.path.dirname(flags.get("--tls-cert", ""))
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "tls")
        os.mkdir(d)
        make_certificates(d)
        host = os.path.join(tmp, "host")
        subprocess.run([args.mkhost, "roce-9port", host], check=True, capture_output=True,
                       timeout=60)
        port = free_port()
        tls_args = [f"{f}={v.replace(mount, d)}" for f, v in sorted(flags.items())
                    if f.startswith("--tls-")]
        argv = [args.agent, f"--sysfs={host}/sys", f"--procfs={host}/proc",
                f"--socket={tmp}/agent.sock", f"--listen=127.0.0.1:{port}", *tls_args]
        log = os.path.join(tmp, "agent.log")
        with open(log, "w", encoding="utf-8") as out:
            agent = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            with_cert = False
            while time.monotonic() < deadline and agent.poll() is None and not with_cert:
                with_cert = tls_answers(port, d, True)
                time.sleep(0.2 if not with_cert else 0)
            without = tls_answers(port, d, False) if with_cert else None
        finally:
            agent.terminate()
            agent.wait(timeout=10)
        with open(log, encoding="utf-8") as fh:
            text = " ".join(fh.read().split())[-300:]
        t.check(with_cert, "tls: the agent with the component's flags serves TLS to a client "
                           "certificate from ca.crt" + ("" if with_cert else f" (log: {text})"))
        t.check(without is False, "tls: ... and refuses a client without a certificate")
        # Control: the agent does read those files (a key of another certificate is exit 2).
        bad = [a.replace(os.path.join(d, "tls.key"), os.path.join(d, "client.key"))
               for a in argv]
        r = subprocess.run(bad, capture_output=True, text=True, timeout=30)
        t.check(r.returncode == 2, f"control: --tls-key of another certificate is exit 2 "
                                   f"(rc {r.returncode})")


def check_cert_manager_example(t, readme, namespace, tls):
    """README.md's "TLS" section: a server Certificate into the component's Secret and a client
    Certificate named in --tls-control-names, from one issuer."""
    m = re.search(r"^##+ TLS\b.*?(?=^##+ |\Z)", readme, re.M | re.S)
    if not t.check(m, "README.md has a TLS section"):
        return
    docs = []
    for block in re.findall(r"```yaml\n(.*?)```", m.group(0), re.S):
        try:
            docs += [d for d in yaml.load_all(block, Loader=t.StrictLoader) if d]
        except yaml.YAMLError as e:
            t.fail(f"README.md TLS example does not parse: {e}")
            return
    certs = [d for d in docs if d.get("kind") == "Certificate"
             and str(d.get("apiVersion", "")).startswith("cert-manager.io/")]
    for d in certs:
        t.check(t.dig(d, "metadata", "namespace") == namespace,
                f"README.md Certificate {t.dig(d, 'metadata', 'name')} is in {namespace}")
    server = [d for d in certs if t.dig(d, "spec", "secretName") == tls["secret"]]
    if not t.check(len(server) == 1, f"README.md: a Certificate writes Secret {tls['secret']}"):
        return
    server = server[0]["spec"]
    t.check("server auth" in (server.get("usages") or []), "README.md: server usages: server auth")
    clients = [d["spec"] for d in certs if t.dig(d, "spec", "commonName") in tls["control_names"]]
    if t.check(clients, f"README.md: a client Certificate named one of {tls['control_names']}"):
        t.check("client auth" in (clients[0].get("usages") or []),
                "README.md: client usages: client auth")
        t.check(clients[0].get("issuerRef") == server.get("issuerRef"),
                "README.md: client and server Certificates have one issuer (its CA is the "
                "Secret's ca.crt, the agent's --tls-client-ca)")


def check(t, objects, ds, args, socket):
    """Entry point from manifests_test.check_daemonset (t: that module, for check/fail/dig)."""
    c = container_of(ds)
    pod = pod_of(ds)
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    flags = t.split_flags(list(c.get("args") or []), "container args")
    namespace = t.dig(ds, "metadata", "namespace")
    readme = readme_text(args.dir)
    check_socket_access(t, pod, flags)
    refs = expand(t, c, flags)
    check_probe_allow(t, objects, c, volumes, flags, refs, args.agent)
    check_probe_secret(t, c, volumes, flags, readme, namespace)
    tls = check_tls_component(t, ds, args, args.dir)
    if tls and tls["secret"]:
        check_cert_manager_example(t, readme, namespace, tls)
    t.check("## Security" in readme, "README.md has a Security section")

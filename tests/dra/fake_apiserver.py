#!/usr/bin/env python3
"""A Kubernetes API server for the DRA tests: the resource.k8s.io/v1 calls the agent makes, with
the real field names and limits enforced (k8s_schema.py: every object written is validated against
the published OpenAPI schema, strictly, and the API's own rules), TLS with a bearer token (read from
a file on every request, so a test can rotate it) or a client certificate, resourceVersion
conflicts, and faults a test injects: 500s, 409 storms, slow answers, closed connections, a
body of gigabytes.

Not a fake of the agent's side: it knows nothing of our driver. Control (for the test, no auth):
  GET  /fake/state             every object, every request seen ({method, path, code})
  POST /fake/faults            {"faults": [{"method": "PUT", "path": "/apis/...", "mode":
                               "500" | "409" | "slow" | "close" | "huge", "count": N,
                               "seconds": S}]}  (method and path are prefixes; "" matches all)
  POST /fake/objects           {"objects": [...]}: store (claims, nodes) as the cluster has them
usage: fake_apiserver.py --cert C --key K --token-file F [--client-ca CA] [--node NAME]
                         [--rbac CLUSTERROLE.yaml]
prints "listening on 127.0.0.1:PORT" once serving.
"""
import argparse
import http.server
import json
import os
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse
import uuid

sys.dont_write_bytecode = True  # No __pycache__ in the source tree.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_schema  # noqa: E402

RESOURCE = "/apis/resource.k8s.io/v1/"
NODES = "/api/v1/nodes/"


class State:
    def __init__(self, nodes):
        self.lock = threading.RLock()
        self.version = 100
        self.slices = {}  # name -> object
        self.claims = {}  # (namespace, name) -> object
        self.nodes = {n: {"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": n, "uid": str(uuid.uuid4()),
                                       "resourceVersion": "1"},
                          "status": {"conditions": []}} for n in nodes}
        self.requests = []
        self.faults = []

    def bump(self, obj):
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)


def status(code, reason, message):
    return code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": message, "reason": reason, "code": code}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-apiserver"

    def log_message(self, fmt, *args):  # Quiet: the test prints what it needs.
        pass

    def setup(self):
        super().setup()
        # Headers and body go out as two writes: without this, Nagle and the client's delayed ACK
        # add 40 ms to every answer (a Go API server writes them at once).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # --- plumbing -------------------------------------------------------------------------
    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, code, obj):
        data = json.dumps(obj).encode()
        # Recorded before it is answered: a test that counts requests after its call returned
        # sees that call (recorded after the write, a count raced the answer).
        if not self.path.startswith("/fake/"):
            st = self.server.state
            with st.lock:
                st.requests.append({"method": self.command, "path": self.path, "code": code})
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        if self.server.client_ca and self.connection.getpeercert():
            return True
        with open(self.server.token_file, encoding="utf-8") as f:
            token = f.read().strip()
        return self.headers.get("Authorization") == "Bearer " + token

    def forbidden(self):
        """With --rbac: the request's verb on its resource must be one the ClusterRole grants
        (the DaemonSet's service account has nothing else), as the API server's authorizer asks."""
        rules = self.server.rbac_rules
        if rules is None:
            return None
        url = urllib.parse.urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        group = parts[1] if parts and parts[0] == "apis" else ""
        rest = parts[3:] if group else parts[2:]
        if len(rest) >= 2 and rest[0] == "namespaces":
            rest = rest[2:]
        resource = rest[0] if rest else ""
        if len(rest) >= 3:
            resource += "/" + rest[2]
        verb = {"GET": "get" if len(rest) >= 2 else "list", "POST": "create", "PUT": "update",
                "PATCH": "patch", "DELETE": "delete"}.get(self.command, "")
        for r in rules:
            if group in r.get("apiGroups", []) and resource in r.get("resources", []) and \
                    verb in r.get("verbs", []):
                return None
        return '%s %s.%s is forbidden to the service account' % (verb, resource, group)

    def fault(self):
        st = self.server.state
        with st.lock:
            for f in st.faults:
                if f.get("count", 1) <= 0:
                    continue
                if not self.command.startswith(f.get("method", "")):
                    continue
                if not self.path.startswith(f.get("path", "")):
                    continue
                f["count"] = f.get("count", 1) - 1
                st.requests.append({"method": self.command, "path": self.path,
                                    "fault": f["mode"]})
                return dict(f)
        return None

    def handle_one(self):
        if self.path.startswith("/fake/"):
            return self.control()
        f = self.fault()
        if f:
            mode = f["mode"]
            if mode == "close":
                self.body()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if mode == "slow":
                time.sleep(float(f.get("seconds", 5)))
            elif mode == "huge":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(4 << 30))
                self.end_headers()
                chunk = b" " * (1 << 20)
                try:
                    for _ in range(4 << 10):
                        self.wfile.write(chunk)
                except OSError:
                    pass
                self.close_connection = True
                return
            elif mode in ("500", "503"):
                self.body()
                return self.send(*status(int(mode), "InternalError", "injected " + mode))
            elif mode == "409":
                self.body()
                return self.send(*status(409, "Conflict", "injected conflict"))
        if not self.authorized():
            self.body()
            return self.send(*status(401, "Unauthorized", "Unauthorized"))
        denied = self.forbidden()
        if denied:
            self.body()
            return self.send(*status(403, "Forbidden", denied))
        code, obj = self.route()
        self.send(code, obj)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_one

    # --- the test's control ---------------------------------------------------------------
    def control(self):
        st = self.server.state
        if self.command == "GET" and self.path == "/fake/state":
            with st.lock:
                return self.send(200, {"slices": st.slices, "nodes": st.nodes,
                                       "claims": {"%s/%s" % k: v for k, v in st.claims.items()},
                                       "requests": st.requests})
        data = json.loads(self.body() or b"{}")
        with st.lock:
            if self.path == "/fake/faults":
                st.faults = data.get("faults", [])
            elif self.path == "/fake/objects":
                for obj in data.get("objects", []):
                    meta = obj.setdefault("metadata", {})
                    meta.setdefault("uid", str(uuid.uuid4()))
                    st.bump(obj)
                    if obj.get("kind") == "ResourceClaim":
                        st.claims[(meta["namespace"], meta["name"])] = obj
                    elif obj.get("kind") == "Node":
                        st.nodes[meta["name"]] = obj
            else:
                return self.send(404, {"message": "no such control"})
        return self.send(200, {})

    # --- the API --------------------------------------------------------------------------
    def route(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        path = url.path
        st = self.server.state
        if path.startswith(NODES):
            return self.node(path[len(NODES):])
        if path == RESOURCE + "resourceslices":
            if self.command == "GET":
                return self.list_slices(query)
            if self.command == "POST":
                return self.create_slice()
        if path.startswith(RESOURCE + "resourceslices/"):
            return self.one_slice(path[len(RESOURCE + "resourceslices/"):])
        if path.startswith(RESOURCE + "namespaces/"):
            parts = path[len(RESOURCE + "namespaces/"):].split("/")
            if len(parts) >= 3 and parts[1] == "resourceclaims":
                return self.claim(parts[0], parts[2], parts[3:] == ["status"])
        self.body()
        with st.lock:
            return status(404, "NotFound", "the server could not find the requested resource")

    def node(self, rest):
        st = self.server.state
        name, _, sub = rest.partition("/")
        data = self.body()
        with st.lock:
            node = st.nodes.get(name)
            if node is None:
                return status(404, "NotFound", 'nodes "%s" not found' % name)
            if self.command == "GET" and not sub:
                return 200, node
            if self.command == "PATCH" and sub == "status":
                patch = json.loads(data)
                conds = node.setdefault("status", {}).setdefault("conditions", [])
                for c in (patch.get("status") or {}).get("conditions") or []:
                    for i, old in enumerate(conds):
                        if old.get("type") == c.get("type"):
                            conds[i] = c
                            break
                    else:
                        conds.append(c)
                st.bump(node)
                return 200, node
        return status(405, "MethodNotAllowed", "not allowed")

    def list_slices(self, query):
        st = self.server.state
        selectors = {}
        for sel in ",".join(query.get("fieldSelector", [])).split(","):
            if "=" in sel:
                k, _, v = sel.partition("=")
                selectors[k] = v
        for k in selectors:
            if k not in ("spec.nodeName", "spec.driver", "spec.pool.name"):
                return status(400, "BadRequest", "field label not supported: " + k)
        with st.lock:
            items = []
            for obj in st.slices.values():
                spec = obj["spec"]
                vals = {"spec.nodeName": spec.get("nodeName"), "spec.driver": spec.get("driver"),
                        "spec.pool.name": spec.get("pool", {}).get("name")}
                if all(vals[k] == v for k, v in selectors.items()):
                    items.append(obj)
            return 200, {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                         "metadata": {"resourceVersion": str(st.version)}, "items": items}

    def parse_valid(self, data, kind):
        try:
            obj = json.loads(data)
        except ValueError as e:
            return None, status(400, "BadRequest", "not JSON: %s" % e)
        errors = k8s_schema.validate(kind, obj)
        if errors:
            return None, status(422, "Invalid", "%s is invalid: %s" % (kind, "; ".join(errors)))
        return obj, None

    @staticmethod
    def stamp(obj):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for d in obj["spec"].get("devices") or []:
            for t in d.get("taints") or []:
                t.setdefault("timeAdded", now)

    def create_slice(self):
        obj, err = self.parse_valid(self.body(), "ResourceSlice")
        if err:
            return err
        st = self.server.state
        with st.lock:
            name = obj["metadata"]["name"]
            if name in st.slices:
                return status(409, "AlreadyExists",
                              'resourceslices.resource.k8s.io "%s" already exists' % name)
            if obj["metadata"].get("resourceVersion"):
                return status(400, "BadRequest", "resourceVersion should not be set on create")
            obj["metadata"]["uid"] = str(uuid.uuid4())
            self.stamp(obj)
            st.bump(obj)
            st.slices[name] = obj
            return 201, obj

    def one_slice(self, name):
        st = self.server.state
        data = self.body()
        if self.command == "GET":
            with st.lock:
                if name not in st.slices:
                    return status(404, "NotFound", "not found")
                return 200, st.slices[name]
        if self.command == "DELETE":
            with st.lock:
                if st.slices.pop(name, None) is None:
                    return status(404, "NotFound",
                                  'resourceslices.resource.k8s.io "%s" not found' % name)
                return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        if self.command == "PUT":
            obj, err = self.parse_valid(data, "ResourceSlice")
            if err:
                return err
            with st.lock:
                old = st.slices.get(name)
                if old is None:
                    return status(404, "NotFound", "not found")
                if obj["metadata"]["name"] != name:
                    return status(400, "BadRequest", "name does not match the path")
                rv = obj["metadata"].get("resourceVersion")
                if rv != old["metadata"]["resourceVersion"]:
                    return status(409, "Conflict",
                                  "Operation cannot be fulfilled on resourceslices: the object "
                                  "has been modified; please apply your changes to the latest "
                                  "version and try again")
                obj["metadata"]["uid"] = old["metadata"]["uid"]
                self.stamp(obj)
                st.bump(obj)
                st.slices[name] = obj
                return 200, obj
        return status(405, "MethodNotAllowed", "not allowed")

    def claim(self, namespace, name, sub_status):
        st = self.server.state
        data = self.body()
        with st.lock:
            old = st.claims.get((namespace, name))
            if old is None:
                return status(404, "NotFound",
                              'resourceclaims.resource.k8s.io "%s" not found' % name)
            if self.command == "GET" and not sub_status:
                return 200, old
        if self.command == "PUT" and sub_status:
            obj, err = self.parse_valid(data, "ResourceClaim")
            if err:
                return err
            with st.lock:
                if obj["metadata"].get("resourceVersion") != old["metadata"]["resourceVersion"]:
                    return status(409, "Conflict", "the object has been modified")
                # As the API validates status.devices: each entry an allocated device, once
                # (a list keyed by driver, pool and device).
                results = ((old.get("status") or {}).get("allocation") or {}).get(
                    "devices", {}).get("results") or []
                allocated = {(r.get("driver"), r.get("pool"), r.get("device")) for r in results}
                seen = set()
                for d in (obj.get("status") or {}).get("devices") or []:
                    key = (d.get("driver"), d.get("pool"), d.get("device"))
                    if key not in allocated:
                        return status(422, "Invalid", "status.devices: %s is not allocated" %
                                      "/".join(str(k) for k in key))
                    if key in seen:
                        return status(422, "Invalid", "status.devices: duplicate %s" %
                                      "/".join(str(k) for k in key))
                    seen.add(key)
                if (obj.get("status") or {}).get("allocation") != (old.get("status") or {}).get(
                        "allocation"):
                    return status(422, "Invalid", "status.allocation is immutable")
                old["status"] = obj.get("status", {})
                st.bump(old)
                return 200, old
        return status(405, "MethodNotAllowed", "not allowed")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--client-ca")
    ap.add_argument("--node", action="append", default=[])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--rbac", help="a ClusterRole's YAML: requests it does not grant get 403")
    args = ap.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    if args.client_ca:
        ctx.load_verify_locations(args.client_ca)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.state = State(args.node)
    server.token_file = args.token_file
    server.client_ca = args.client_ca
    server.rbac_rules = None
    if args.rbac:
        import yaml  # python3-yaml; only with --rbac.
        with open(args.rbac, encoding="utf-8") as f:
            roles = [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "ClusterRole"]
        server.rbac_rules = roles[0]["rules"]
    print("listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

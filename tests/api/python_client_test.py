#!/usr/bin/python3
"""A scheduler written in another language: Debian's grpcio against the real fabric-agent.

Each test writes the roce-9port example host with fabric-mkhost, starts fabric-agent on it with
its socket in a temp dir and talks to it the way a Python scheduler would: the FabricAgent API,
status codes and their details, the standard health and reflection services, a watch stream
that sees a port go down, and SIGTERM.

Run with Debian's interpreter (python3-grpcio, python3-protobuf):

  /usr/bin/python3 python_client_test.py --agent BUILD/agent/daemon/fabric-agent \
      --mkhost BUILD/tests/hosts/fabric-mkhost --python-dir BUILD/python [unittest args]

The three paths may also come from FABRIC_AGENT, FABRIC_MKHOST and FABRIC_PYTHON_DIR. Exits 77
(ctest's SKIP_RETURN_CODE) when this interpreter has no grpcio or protobuf.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

SKIP = 77

try:
    import grpc
    from google.protobuf import descriptor_pb2
except ImportError as e:  # Not Debian's python3-grpcio / python3-protobuf: nothing to test.
    print(f"skipped: {sys.executable} cannot import grpc/protobuf ({e})", file=sys.stderr)
    sys.exit(SKIP)

# Filled in by main() before any test runs.
AGENT = ""
MKHOST = ""
pb = pb_grpc = fabric_health_pb2 = None
health_pb2 = health_pb2_grpc = reflection_pb2 = reflection_pb2_grpc = None

SERVICE = "fabric.v1.FabricAgent"
CALL_TIMEOUT = 10.0   # Seconds, for every unary call.
STREAM_TIMEOUT = 20.0  # Seconds, for every stream: a missing event fails instead of hanging.
START_TIMEOUT = 20.0   # Seconds for the agent to accept on its socket and report SERVING.


def import_generated(python_dir):
    """Imports the modules proto/CMakeLists.txt generated into python_dir."""
    global pb, pb_grpc, fabric_health_pb2, probe_pb2, doctor_pb2
    global health_pb2, health_pb2_grpc, reflection_pb2, reflection_pb2_grpc
    sys.path.insert(0, python_dir)
    from fabric.v1 import agent_pb2, agent_pb2_grpc, health_pb2 as fh, probe_pb2 as pp
    from fabric.v1 import doctor_pb2 as dp
    from grpc_std import health_pb2 as h, health_pb2_grpc as hg
    from grpc_std import reflection_pb2 as r, reflection_pb2_grpc as rg
    pb, pb_grpc, fabric_health_pb2, probe_pb2 = agent_pb2, agent_pb2_grpc, fh, pp
    doctor_pb2 = dp
    health_pb2, health_pb2_grpc, reflection_pb2, reflection_pb2_grpc = h, hg, r, rg


def temp_root():
    """/dev/shm when writable: thousands of small sysfs files are slow to write to /tmp here."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return None  # tempfile's default.


def connects(path):
    """Whether something accepts connections on the Unix socket `path` (a stale file does not)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)


class AgentTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="python_client_test.", dir=temp_root())
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.host = os.path.join(self.dir, "host")
        self.socket = os.path.join(self.dir, "run", "agent.sock")
        self.agent = None
        self.channel = None
        self.stderr_path = os.path.join(self.dir, "agent.stderr")
        r = subprocess.run([MKHOST, "roce-9port", self.host], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, f"fabric-mkhost: {r.stderr}")

    # The agent ---------------------------------------------------------------------------------

    def start_agent(self, *extra):
        """Starts fabric-agent on the example tree and waits until it serves."""
        args = [AGENT, "--socket=" + self.socket, "--sysfs=" + os.path.join(self.host, "sys"),
                "--procfs=" + os.path.join(self.host, "proc"), *extra]
        with open(self.stderr_path, "wb") as err:
            self.agent = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=err)
        self.addCleanup(self.stop_agent)
        # Connect only once the socket accepts: a channel that failed early backs off for seconds.
        deadline = time.monotonic() + START_TIMEOUT
        while not connects(self.socket):
            if self.agent.poll() is not None:
                self.fail(f"fabric-agent exited {self.agent.returncode}:\n{self.stderr()}")
            if time.monotonic() > deadline:
                self.fail(f"fabric-agent did not accept on {self.socket} within "
                          f"{START_TIMEOUT:.0f} s:\n{self.stderr()}")
            time.sleep(0.02)
        self.channel = grpc.insecure_channel("unix:" + self.socket,
                                             options=[("grpc.enable_http_proxy", 0)])
        self.addCleanup(self.channel.close)
        self.stub = pb_grpc.FabricAgentStub(self.channel)
        # It accepts before its last startup steps; it reports SERVING after them.
        health = health_pb2_grpc.HealthStub(self.channel)
        while True:
            try:
                resp = health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=0.5)
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    break
            except grpc.RpcError:
                pass
            if self.agent.poll() is not None:
                self.fail(f"fabric-agent exited {self.agent.returncode}:\n{self.stderr()}")
            if time.monotonic() > deadline:
                self.fail(f"fabric-agent not SERVING within {START_TIMEOUT:.0f} s:\n"
                          f"{self.stderr()}")
            time.sleep(0.02)

    def stop_agent(self):
        if self.agent is not None and self.agent.poll() is None:
            self.agent.kill()
            self.agent.wait(timeout=10)

    def stderr(self):
        try:
            with open(self.stderr_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError as e:
            return f"(no stderr: {e})"

    def sys_path(self, rel):
        return os.path.join(self.host, "sys", rel)

    def select_error(self, gpus):
        """The RpcError SelectNics fails with for `gpus`."""
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.SelectNics(pb.SelectNicsRequest(gpus=gpus), timeout=CALL_TIMEOUT)
        return cm.exception

    # The tests ---------------------------------------------------------------------------------

    def test_inventory_selection_placement_and_health(self):
        self.start_agent()
        inv = self.stub.GetInventory(pb.GetInventoryRequest(), timeout=CALL_TIMEOUT)
        self.assertEqual(len(inv.host.rdma_devices), 9)
        self.assertEqual(inv.generation, 1)
        self.assertGreater(inv.discovered_at.seconds, 0)

        sel = self.stub.SelectNics(pb.SelectNicsRequest(gpus=["0000:1a:00.0", "1e:00.0"]),
                                   timeout=CALL_TIMEOUT)
        self.assertEqual([a.rdma_device for a in sel.assignments], ["mlx5_1", "mlx5_2"], sel)
        self.assertEqual([a.gpu for a in sel.assignments], ["0000:1a:00.0", "0000:1e:00.0"])
        self.assertEqual([a.port for a in sel.assignments], [1, 1])
        self.assertEqual(sel.env["NCCL_IB_HCA"], "=mlx5_1:1,mlx5_2:1")

        placed = self.stub.Place(pb.PlaceRequest(gpu_count=2), timeout=CALL_TIMEOUT)
        self.assertTrue(placed.placements, placed)
        for p in placed.placements:
            self.assertEqual(len(p.gpus), 2, p)
            self.assertEqual(len(p.selection.assignments), 2, p)

        health = self.stub.GetHealth(pb.GetHealthRequest(), timeout=CALL_TIMEOUT)
        self.assertNotEqual(health.verdict, fabric_health_pb2.SEVERITY_UNSPECIFIED, health)
        self.assertIn(health.verdict, fabric_health_pb2.Severity.values(), health)

    def test_doctor_judges_a_jobs_variables(self):
        self.start_agent()
        sel = self.stub.SelectNics(pb.SelectNicsRequest(gpus=["0000:1a:00.0"]),
                                   timeout=CALL_TIMEOUT)
        env = dict(sel.env)
        report = self.stub.Doctor(doctor_pb2.DoctorRequest(env=env, gpus=["0000:1a:00.0"]),
                                  timeout=CALL_TIMEOUT)
        self.assertEqual(report.verdict, fabric_health_pb2.SEVERITY_OK, report)
        self.assertEqual(report.transport, doctor_pb2.NCCL_TRANSPORT_NET_IB_GDRDMA, report)
        self.assertEqual(list(report.devices), ["mlx5_1:1"])
        self.assertEqual(report.context, "agent")
        env["NCCL_NET"] = "Socket"
        report = self.stub.Doctor(doctor_pb2.DoctorRequest(env=env, gpus=["0000:1a:00.0"]),
                                  timeout=CALL_TIMEOUT)
        self.assertEqual(report.verdict, fabric_health_pb2.SEVERITY_CRITICAL, report)
        self.assertEqual(report.transport, doctor_pb2.NCCL_TRANSPORT_NET_SOCKET, report)
        self.assertIn("nccl_net", [c.check for c in report.checks])

    def test_invalid_requests_name_the_bad_value(self):
        self.start_agent()
        e = self.select_error(["not-a-pci-address"])
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT, e.details())
        self.assertIn("not-a-pci-address", e.details())

        e = self.select_error(["0000:77:00.0"])
        self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND, e.details())
        self.assertIn("0000:77:00.0", e.details())

        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.Place(pb.PlaceRequest(), timeout=CALL_TIMEOUT)  # gpu_count 0
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("gpu_count", cm.exception.details())

    def test_select_nics_by_uuid_index_and_visible_devices(self):
        # A host whose NVIDIA driver lists each GPU's UUID in procfs.
        self.host = os.path.join(self.dir, "dgx")
        r = subprocess.run([MKHOST, "dgx-h100-ib", self.host], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, f"fabric-mkhost: {r.stderr}")
        self.start_agent()
        inv = self.stub.GetInventory(pb.GetInventoryRequest(), timeout=CALL_TIMEOUT)
        gpus = [a for a in inv.host.accelerators if a.HasField("index")]
        self.assertEqual([a.index for a in gpus], list(range(8)))
        u0, u1 = gpus[0].uuid, gpus[1].uuid
        self.assertEqual(u0, "GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75")

        # A scheduler that knows the pod's GPU by UUID (any case) or by index.
        sel = self.stub.SelectNics(pb.SelectNicsRequest(gpus=[u0.upper(), "1"]),
                                   timeout=CALL_TIMEOUT)
        self.assertEqual([a.given for a in sel.assignments], [u0.upper(), "1"])
        self.assertEqual([a.gpu for a in sel.assignments], ["0000:19:00.0", "0000:41:00.0"])
        self.assertEqual([a.rdma_device for a in sel.assignments], ["mlx5_0", "mlx5_3"], sel)

        # The pod's own environment: CUDA's index counts within NVIDIA_VISIBLE_DEVICES.
        sel = self.stub.SelectNics(
            pb.SelectNicsRequest(visible={"nvidia_visible_devices": f"{u0},{u1}",
                                          "cuda_visible_devices": "1"}),
            timeout=CALL_TIMEOUT)
        self.assertEqual([(a.given, a.gpu) for a in sel.assignments], [(u1, "0000:41:00.0")])

        e = self.select_error(["GPU-00000000-b3dc-a50a-9daa-37e51b591d75"])
        self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND, e.details())
        e = self.select_error(["GPU-c15521b1"])
        self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT, e.details())
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.SelectNics(pb.SelectNicsRequest(
                gpus=[u0], visible={"nvidia_visible_devices": u0}), timeout=CALL_TIMEOUT)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_standard_health_service_reports_serving(self):
        self.start_agent()
        health = health_pb2_grpc.HealthStub(self.channel)
        resp = health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=CALL_TIMEOUT)
        self.assertEqual(resp.status, health_pb2.HealthCheckResponse.SERVING)
        with self.assertRaises(grpc.RpcError) as cm:
            health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"),
                         timeout=CALL_TIMEOUT)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_reflection_lists_the_services_and_describes_the_api(self):
        self.start_agent()
        stub = reflection_pb2_grpc.ServerReflectionStub(self.channel)
        requests = [
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE),
        ]
        responses = list(stub.ServerReflectionInfo(iter(requests), timeout=CALL_TIMEOUT))
        self.assertEqual(len(responses), 2, responses)
        listed, described = responses
        self.assertEqual(listed.WhichOneof("message_response"), "list_services_response", listed)
        names = {s.name for s in listed.list_services_response.service}
        self.assertLessEqual({SERVICE, "grpc.health.v1.Health",
                              "grpc.reflection.v1alpha.ServerReflection"}, names)

        self.assertEqual(described.WhichOneof("message_response"), "file_descriptor_response",
                         described)
        files = {}
        for raw in described.file_descriptor_response.file_descriptor_proto:
            fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
            files[fd.name] = fd
        self.assertIn("fabric/v1/agent.proto", files, sorted(files))
        agent = files["fabric/v1/agent.proto"]
        self.assertEqual(agent.package, "fabric.v1")
        services = {s.name: s for s in agent.service}
        self.assertIn("FabricAgent", services)
        methods = {m.name: m for m in services["FabricAgent"].method}
        self.assertLessEqual({"GetInventory", "SelectNics", "Place", "WatchInventory",
                              "GetHealth"}, set(methods))
        # The served API is the one this client was compiled against (Ping included when the
        # proto has it).
        local = pb.DESCRIPTOR.services_by_name["FabricAgent"]
        self.assertEqual(set(methods), {m.name for m in local.methods})
        self.assertEqual(methods["SelectNics"].input_type, ".fabric.v1.SelectNicsRequest")
        self.assertEqual(methods["SelectNics"].output_type, ".fabric.v1.Selection")
        self.assertTrue(methods["WatchInventory"].server_streaming)
        self.assertFalse(methods["WatchInventory"].client_streaming)
        self.assertFalse(methods["GetInventory"].server_streaming)

    def test_watch_sees_a_port_go_down_after_sighup(self):
        self.start_agent()
        call = self.stub.WatchInventory(pb.WatchInventoryRequest(), timeout=STREAM_TIMEOUT)
        self.addCleanup(call.cancel)
        first = next(call)
        self.assertEqual(first.inventory.generation, 1)
        self.assertEqual(len(first.inventory.host.rdma_devices), 9)
        self.assertFalse(first.changes)

        write_file(self.sys_path("class/infiniband/mlx5_3/ports/1/state"), "1: DOWN\n")
        # Sysfs trees in a temp dir send no netlink events: ask for a rescan.
        self.agent.send_signal(signal.SIGHUP)
        nxt = next(call)
        self.assertEqual(nxt.inventory.generation, 2)
        changes = [c for c in nxt.changes
                   if c.kind == pb.InventoryChange.KIND_PORT_STATE and c.subject == "mlx5_3:1"]
        self.assertEqual(len(changes), 1, str(nxt.changes)[:2000])
        self.assertEqual(changes[0].old_value, "ACTIVE")
        self.assertEqual(changes[0].new_value, "DOWN")
        self.assertEqual(changes[0].count, 1)  # the port's first flap since the agent started
        self.assertEqual([e.port for e in nxt.inventory.port_events], ["mlx5_3:1"])
        self.assertEqual(nxt.inventory.port_events[0].link_flaps, 1)
        call.cancel()

    def test_probe_on_demand_and_results(self):
        # The agent answers probes itself (--probe-listen); RunProbe against it over TCP, then
        # the result in ListProbeResults, from a client generated for another language.
        self.start_agent("--probe-listen=127.0.0.1:0")
        listed = self.stub.ListProbeResults(pb.ListProbeResultsRequest(), timeout=CALL_TIMEOUT)
        self.assertTrue(listed.responder.startswith("127.0.0.1:"), listed.responder)
        self.assertFalse(listed.schedule_enabled)
        self.assertEqual(len(listed.results), 0)
        # The agent's own tests and its responder share device locks ("tcp" over TCP); a test
        # against itself is one test, which its own hold admits: served, not "busy".
        r = self.stub.RunProbe(pb.RunProbeRequest(peer=listed.responder, test="write_lat",
                                                  transport="tcp", iterations=100),
                               timeout=60)
        self.assertTrue(r.ok, r)
        self.assertEqual(r.transport, "tcp")
        self.assertGreater(r.t_typical_us, 0)
        self.assertEqual(r.source, probe_pb2.ProbeResult.SOURCE_ON_DEMAND)
        listed = self.stub.ListProbeResults(pb.ListProbeResultsRequest(test="write_lat"),
                                            timeout=CALL_TIMEOUT)
        self.assertEqual([x.id for x in listed.results], [r.id])
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.RunProbe(pb.RunProbeRequest(peer="a b"), timeout=CALL_TIMEOUT)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_sigterm_exits_zero_within_a_second(self):
        self.start_agent()
        # A watch stream open at the time must not hold the exit up.
        call = self.stub.WatchInventory(pb.WatchInventoryRequest(), timeout=STREAM_TIMEOUT)
        self.addCleanup(call.cancel)
        next(call)
        start = time.monotonic()
        self.agent.send_signal(signal.SIGTERM)
        try:
            code = self.agent.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.fail(f"fabric-agent still running 5 s after SIGTERM:\n{self.stderr()}")
        took = time.monotonic() - start
        self.assertEqual(code, 0, self.stderr())
        self.assertLess(took, 1.0, f"took {took:.3f} s")
        self.assertFalse(os.path.exists(self.socket))
        # The stream ends (the server is gone) rather than waiting for its deadline.
        ended = time.monotonic()
        with self.assertRaises((grpc.RpcError, StopIteration)):
            next(call)
        self.assertLess(time.monotonic() - ended, STREAM_TIMEOUT / 2)


def main():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--agent", default=os.environ.get("FABRIC_AGENT"))
    parser.add_argument("--mkhost", default=os.environ.get("FABRIC_MKHOST"))
    parser.add_argument("--python-dir", default=os.environ.get("FABRIC_PYTHON_DIR"))
    opts, rest = parser.parse_known_args()
    missing = [n for n in ("agent", "mkhost", "python_dir") if not getattr(opts, n)]
    if missing:
        print("usage: python_client_test.py --agent PATH --mkhost PATH --python-dir DIR "
              "[unittest args] (or FABRIC_AGENT, FABRIC_MKHOST, FABRIC_PYTHON_DIR); missing: "
              + ", ".join(missing), file=sys.stderr)
        return 2
    global AGENT, MKHOST
    AGENT, MKHOST = opts.agent, opts.mkhost
    import_generated(opts.python_dir)
    result = unittest.main(argv=[sys.argv[0], *rest], exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""check-layers.py on small trees: an upward include fails, the same include downward passes."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parent / "check-layers.py"


def run(root):
    p = subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True,
                       text=True, check=False)
    return p.returncode, p.stdout


class CheckLayersTest(unittest.TestCase):
    def tree(self, files):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        root = pathlib.Path(d.name)
        (root / "cni-hook").mkdir()
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        return root

    def test_upward_include_fails_naming_file_line_and_floors(self):
        root = self.tree({
            "agent/hostfs/host_fs.h": "#pragma once\n",
            "agent/rdma/gid.cc": '#include "agent/hostfs/host_fs.h"\n',
            "agent/hostfs/host_fs.cc": '#include "agent/hostfs/host_fs.h"\n'
                                       '#include "agent/rdma/gid.h"\n',
        })
        code, out = run(root)
        self.assertEqual(code, 1)
        self.assertIn("agent/hostfs/host_fs.cc:2: includes agent/rdma/gid.h (agent/rdma/, floor 2)"
                      " from agent/hostfs/ (floor 1)", out)
        self.assertIn("1 upward includes in 3 product files", out)

    def test_daemon_roles_are_floors(self):
        root = self.tree({
            "agent/daemon/cycle/snapshot.h": '#include "agent/daemon/api/service.h"\n',
            "agent/daemon/api/service.h": '#include "agent/daemon/cycle/snapshot.h"\n'
                                          '#include "agent/daemon/transport/listener.h"\n',
            # The transport knows no call of the service.
            "agent/daemon/transport/listener.h": '#include "agent/daemon/api/watch.h"\n',
        })
        code, out = run(root)
        self.assertEqual(code, 1)
        self.assertIn("agent/daemon/cycle/snapshot.h:1: includes agent/daemon/api/service.h", out)
        self.assertIn("agent/daemon/transport/listener.h:1: includes agent/daemon/api/watch.h", out)
        self.assertNotIn("agent/daemon/api/service.h:", out)

    def test_tests_and_same_floor_are_not_flagged(self):
        root = self.tree({
            "agent/fabric/probes/schedule_fuzz.cc": '#include "agent/config/config.h"\n',
            "agent/fabric/neighbors/lldp.cc": '#include "agent/fabric/announce/ip.h"\n',
            "cni-hook/plugin.cc": '#include "agent/fabric/announce/ip.h"\n',
        })
        code, out = run(root)
        self.assertEqual(code, 0, out)
        self.assertIn("2 product files", out)

    def test_a_file_outside_every_floor_fails(self):
        root = self.tree({"agent/newfloor/x.cc": "\n"})
        code, out = run(root)
        self.assertEqual(code, 1)
        self.assertIn("agent/newfloor/x.cc: in no floor", out)

    def test_the_repository_passes(self):
        code, out = run(SCRIPT.parent.parent)
        self.assertEqual(code, 0, out)


    def test_include_loop_inside_a_folder_fails_naming_its_includes(self):
        root = self.tree({
            "agent/daemon/lifecycle/agent.h": "#pragma once\n",
            "agent/daemon/lifecycle/agent.cc": '#include "agent/daemon/lifecycle/agent.h"\n'
                                               '#include "agent/daemon/lifecycle/agent_state.h"\n',
            "agent/daemon/lifecycle/agent_state.h": "#pragma once\n"
                                                    '#include "agent/daemon/lifecycle/agent.h"\n',
        })
        code, out = run(root)
        self.assertEqual(code, 1, out)
        self.assertIn("include loop in agent/daemon/lifecycle/: agent, agent_state", out)
        self.assertIn("agent/daemon/lifecycle/agent.cc:2: includes "
                      "agent/daemon/lifecycle/agent_state.h", out)
        self.assertIn("agent/daemon/lifecycle/agent_state.h:2: includes "
                      "agent/daemon/lifecycle/agent.h", out)

    def test_loop_through_a_third_module_fails_and_one_way_passes(self):
        files = {
            "agent/policy/select/a.h": '#include "agent/policy/select/b.h"\n',
            "agent/policy/select/b.h": '#include "agent/policy/select/c.h"\n',
            "agent/policy/select/c.h": "#pragma once\n",
            "agent/policy/select/c.cc": '#include "agent/policy/select/c.h"\n',
            # A test may include anything of its folder.
            "agent/policy/select/c_test.cc": '#include "agent/policy/select/a.h"\n',
        }
        code, out = run(self.tree(files))
        self.assertEqual(code, 0, out)
        files["agent/policy/select/c.cc"] += '#include "agent/policy/select/a.h"\n'
        code, out = run(self.tree(files))
        self.assertEqual(code, 1, out)
        self.assertIn("include loop in agent/policy/select/: a, b, c", out)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""Tests of tools/check_layers.py on small trees built in a temporary
directory: each rule the checker enforces is broken once and must fail,
with the file, line and reason named.  Run by `make check-layers`."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'check_layers.py')

RULES = """\
protocol:
segments:       protocol
daemon:         protocol segments
daemon/replica: daemon protocol segments
daemon/cluster: daemon daemon/replica protocol
tests:          *
generated kp_msgs.h = protocol
forbid protocol segments: event2/ sqlite3.h zookeeper/
private segments/seg_int.h:
"""

FILES = {
    'protocol/kp.h': '#include <stdint.h>\n',
    'protocol/buf.c': '#include "protocol/kp.h"\n#include "kp_msgs.h"\n',
    'segments/seg.h': '#include "protocol/kp.h"\n',
    'segments/seg_int.h': '#include "segments/seg.h"\n',
    'segments/log.c': '#include "segments/seg_int.h"\n#include <pthread.h>\n',
    'daemon/broker.h': '#include "segments/seg.h"\n#include <event2/event.h>\n',
    'daemon/replica/replica.h': '#include "daemon/broker.h"\n',
    'daemon/replica/replica.c': '#include "daemon/replica/replica.h"\n',
    'daemon/cluster/cluster.h': '#include "daemon/replica/replica.h"\n',
    'daemon/cluster/cluster_zk.c': '#include "daemon/cluster/cluster.h"\n#include <zookeeper/zookeeper.h>\n',
    'tests/unit/test_seg.c': '#include "segments/seg_int.h"\n#include "daemon/cluster/cluster.h"\n',
}


class CheckLayers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        for path, text in FILES.items():
            self.write(path, text)
        self.rules = RULES

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, path, text, append=False):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'a' if append else 'w') as f:
            f.write(text)

    def run_check(self, *args):
        self.write('tools/layers.rules', self.rules)
        p = subprocess.run([sys.executable, SCRIPT, '--root', self.root,
                            '--rules', os.path.join(self.root, 'tools/layers.rules'), *args],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr

    def assert_fails(self, *needles):
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        for n in needles:
            self.assertIn(n, out)

    def test_a_tree_that_follows_its_rules_passes(self):
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)
        self.assertIn('includes follow', out)

    def test_an_include_upwards_fails_naming_file_line_and_units(self):
        self.write('daemon/replica/replica.c', '#include "daemon/cluster/cluster.h"\n', append=True)
        self.assert_fails('daemon/replica/replica.c:2', 'daemon/replica may not include daemon/cluster')

    def test_a_cycle_between_folders_fails(self):
        self.write('segments/log.c', '#include "daemon/broker.h"\n', append=True)
        self.assert_fails('include cycle between units: daemon -> segments -> daemon')

    def test_libevent_sqlite_or_zookeeper_in_segments_or_protocol_fails(self):
        self.write('segments/log.c', '#include <event2/buffer.h>\n', append=True)
        self.write('protocol/buf.c', '#include <sqlite3.h>\n', append=True)
        self.write('protocol/kp.h', '#  include <zookeeper/zookeeper.h>\n', append=True)
        self.assert_fails('segments/log.c:3: #include <event2/buffer.h>',
                          'protocol/buf.c:3: #include <sqlite3.h>',
                          'protocol/kp.h:2: #include <zookeeper/zookeeper.h>')

    def test_a_private_header_from_another_room_fails_but_tests_may(self):
        self.write('daemon/replica/replica.c', '#include "segments/seg_int.h"\n', append=True)
        rc, out = self.run_check()
        self.assertEqual(rc, 1, out)
        self.assertIn('daemon/replica/replica.c:2: #include "segments/seg_int.h": private to segments', out)
        self.assertNotIn('tests/unit/test_seg.c', out)

    def test_an_exception_lets_one_include_through_and_warns_when_stale(self):
        self.write('daemon/replica/replica.c', '#include "daemon/cluster/cluster.h"\n', append=True)
        self.rules += 'except daemon/replica/replica.c -> daemon/cluster/cluster.h\n'
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)
        self.rules += 'except daemon/replica/replica.c -> daemon/cluster/gone.h\n'
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)
        self.assertIn('stale exception daemon/replica/replica.c -> daemon/cluster/gone.h', out)
        rc, out = self.run_check('--strict')
        self.assertEqual(rc, 1, out)

    def test_an_exception_covers_that_file_only(self):
        self.write('daemon/replica/replica.c', '#include "daemon/cluster/cluster.h"\n', append=True)
        self.write('daemon/replica/other.c', '#include "daemon/cluster/cluster.h"\n')
        self.rules += 'except daemon/replica/replica.c -> daemon/cluster/cluster.h\n'
        self.assert_fails('daemon/replica/other.c:1')

    def test_a_file_in_no_unit_or_an_unknown_include_fails(self):
        self.write('newroom/x.c', 'int x;\n')
        self.write('daemon/broker.h', '#include "daemon/typo.h"\n', append=True)
        self.assert_fails('newroom/x.c: in no unit', 'daemon/broker.h:3: #include "daemon/typo.h" names no file')

    def test_rules_that_allow_a_cycle_fail(self):
        self.rules = self.rules.replace('protocol:\n', 'protocol: daemon\n')
        self.assert_fails('the rules themselves allow a cycle')

    def test_calls_report_a_call_upwards_that_no_include_shows(self):
        # replica.h declares what cluster defines: the include is allowed,
        # the call is not (the case of the old bk_isr_update_hw, before the ISR hook).
        self.write('daemon/replica/replica.c', 'int cl_hook(void);\nint rp(void) { return cl_hook(); }\n')
        self.write('daemon/cluster/cluster_zk.c', 'int rp(void);\nint cl_hook(void) { return 1; }\n'
                   'int cl(void) { return rp(); }\n')
        for src in ('daemon/replica/replica.c', 'daemon/cluster/cluster_zk.c'):
            obj = os.path.join(self.root, 'build/obj', src[:-2] + '.o')
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            subprocess.run(['cc', '-c', os.path.join(self.root, src), '-o', obj], check=True)
        rc, out = self.run_check('--calls', os.path.join(self.root, 'build'))
        self.assertEqual(rc, 0, out)
        self.assertIn('calls daemon/replica -> daemon/cluster: 1 reference(s)', out)
        self.assertIn('daemon/replica/replica.c -> cl_hook (daemon/cluster/cluster_zk.c)', out)
        self.assertNotIn('calls daemon/cluster -> daemon/replica', out)
        rc, out = self.run_check('--calls', os.path.join(self.root, 'build'), '--strict')
        self.assertEqual(rc, 1, out)

    def test_a_malformed_rule_is_exit_2(self):
        self.rules += 'except daemon/replica/replica.c daemon/cluster/cluster.h\n'
        rc, out = self.run_check()
        self.assertEqual(rc, 2, out)


if __name__ == '__main__':
    unittest.main(verbosity=1)

"""sluice-sql: -c for scripts (exit status, formats), statements from stdin,
the interactive shell driven through a pseudo-terminal (script(1)), and
--data-dir on a stopped broker."""
import json
import os
import subprocess
import time

import pytest

from conftest import free_port
from support import create_topic, ck_producer, produce_ok, topic_name


def shell_path():
    return os.path.join(os.path.dirname(os.environ.get("SLUICED") or
                                        os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "build", "sluiced")), "sluice-sql")


@pytest.fixture
def ab(start_broker):
    if not os.access(shell_path(), os.X_OK):
        pytest.fail("sluice-sql not built at %s" % shell_path())
    port = free_port()
    b = start_broker({"admin.listeners": "http://127.0.0.1:%d" % port})
    return b


def run(args, stdin=None, timeout=30):
    return subprocess.run([shell_path()] + args, input=stdin, capture_output=True,
                          timeout=timeout, text=True)


def test_c_mode_formats_and_exit_status(ab):
    t = topic_name("sh")
    create_topic(ab, t, 2)
    r = run(["-b", ab.admin, "--format", "json", "-c",
             "SELECT name, partitions FROM topics WHERE name = '%s'" % t])
    assert r.returncode == 0 and json.loads(r.stdout) == [{"name": t, "partitions": 2}]
    r = run(["-b", ab.admin, "--format", "csv", "-c", "SELECT partition FROM partitions "
             "WHERE topic = '%s' ORDER BY 1" % t])
    assert r.stdout.splitlines() == ["partition", "0", "1"]
    r = run(["-b", ab.admin, "--format", "line", "-c", "SELECT 7 AS x"])
    assert r.stdout.strip() == "x = 7"
    r = run(["-b", ab.admin, "-c", "SELECT * FROM no_such_table"])
    assert r.returncode == 1 and "no such table" in r.stderr
    r = run(["-b", ab.admin, "-c", "DROP VIEW topics"])
    assert r.returncode == 1 and "schema changes" in r.stderr
    r = run(["-b", "127.0.0.1:%d" % free_port(), "-c", "SELECT 1"])
    assert r.returncode == 1 and "cannot connect" in r.stderr


def test_statements_from_stdin_span_lines(ab):
    t = topic_name("stdin")
    script = ("INSERT INTO topics(name, partitions)\n  VALUES ('%s', 3);\n"
              ".mode csv\n.headers off\nSELECT count(*)\n FROM partitions WHERE topic = '%s';\n" % (t, t))
    r = run(["-b", ab.admin], stdin=script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3"


def test_interactive_shell_through_a_pty(ab, tmp_path):
    t = topic_name("pty")
    create_topic(ab, t, 1)
    sqlfile = tmp_path / "q.sql"
    sqlfile.write_text("SELECT 'from-file' AS src;\n")
    env = dict(os.environ, HOME=str(tmp_path), TERM="dumb")
    p = subprocess.Popen(["script", "-qfec", "%s -b %s" % (shell_path(), ab.admin), "/dev/null"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env=env)
    lines = [".help", ".tables", ".schema consumer_lag", ".mode line",
             "SELECT name", "  FROM topics WHERE name = '%s';" % t, ".timer on",
             ".read %s" % sqlfile, ".quit"]
    try:
        for line in lines:
            p.stdin.write((line + "\n").encode())
            p.stdin.flush()
            time.sleep(0.15)
        out, _ = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    text = out.decode(errors="replace")
    assert ".schema [TABLE]" in text                    # .help
    assert "consumer_lag" in text and "group_assignments" in text
    assert "CREATE TABLE consumer_lag (" in text and "lag" in text
    assert "name = %s" % t in text                       # multi-line statement, line mode
    assert "src = from-file" in text and "Run Time:" in text
    assert "...>" in text                               # continuation prompt
    assert (tmp_path / ".sluice_sql_history").exists()


def test_data_dir_reads_a_stopped_broker(ab):
    t = topic_name("dd")
    create_topic(ab, t, 1)
    produce_ok(ck_producer(ab), t, [{"value": b"v%d" % i} for i in range(12)])
    ab.stop()
    r = run(["--data-dir", ab.data_dir, "--format", "json", "-c",
             "SELECT log_end_offset, size_bytes, segments FROM partitions WHERE topic = '%s'" % t])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"log_end_offset": 12, "size_bytes": ab.log_bytes(t, 0),
                                     "segments": 1}]
    r = run(["--data-dir", ab.data_dir, "--format", "csv", "--headers", "off", "-c",
             "SELECT value FROM messages WHERE topic = '%s' AND offset >= 10" % t])
    assert r.stdout.split() == ["v10", "v11"]
    r = run(["--data-dir", ab.data_dir, "-c", "DELETE FROM topics WHERE name = '%s'" % t])
    assert r.returncode == 1 and "read-only" in r.stderr

"""Read-only guarantee: a full browsing and search session through the engine and through the
CLI changes not one byte, mtime or directory entry of any store (sha1 of the content, size and
mtime of every file, listing and mtime of every directory), including crashed stores with an
`abort` file present, whose recovery a read-only open only reasons about."""
from __future__ import annotations

import json
import random
import subprocess

import pytest

from conftest import FIXTURES, unpack
from relsupport import FIGURES, PY, ROOT, browse, child_env, tree_digest

from engine import MessageStore

CLI_SESSION = r"""
import contextlib, io, json, sys
from engine.cli.app import main
codes = []
for argv in json.loads(sys.stdin.read()):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    codes.append([argv[0], code, err.getvalue()[-300:]])
print(json.dumps(codes))
"""


def cli_session(root, commands: list[list[str]]) -> list:
    """Many CLI invocations (engine.cli.app.main, as the rmqstore script runs it) in one process."""
    p = subprocess.run([PY, "-c", CLI_SESSION], input=json.dumps([[c[0], str(root), *c[1:]] for c in commands]),
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=child_env())
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def commands_for(root) -> list[list[str]]:
    with MessageStore.open(root) as s:
        msgs = list(s.iter_messages())[:50]
        queues = sorted(s.queues)[:3]
    cmds = [["info"], ["info", "--json"], ["dump"], ["dump", "--json"], ["check"], ["check", "--json"],
            ["recover", "--dry-run"], ["recover", "--dry-run", "--json"]]
    for t, q in queues:
        cmds += [["get", t, str(q), "0", "--count", "100"], ["get", t, str(q), "0", "--broker", "--json"],
                 ["cq", t, str(q), "--json"], ["time", t, str(q), "0"], ["time", t, str(q), "2030-01-01T00:00:00Z",
                                                                      "--boundary", "upper"]]
    for m in msgs[:: max(1, len(msgs) // 5)]:
        cmds += [["msgid", m.msgId], ["msgid", m.uniqKey or "X"], ["uniq", m.topic, m.uniqKey or "X"]]
        for k in m.key_list[:1]:
            cmds += [["query-key", m.topic, k], ["query-key", m.topic, k, "--raw", "--json"]]
    return cmds


@pytest.mark.parametrize("name", FIXTURES)
def test_browsing_changes_nothing(request, tmp_path, fixture_copy, name):
    root = fixture_copy(name)
    abort = (root / "abort").exists()
    before = tree_digest(root)
    with MessageStore.open(root) as s:
        n = browse(s, random.Random(1), deep=True)
    assert tree_digest(root) == before, "the engine's read-only session changed the store"
    codes = cli_session(root, commands_for(root))
    bad = [c for c in codes if c[1] not in (0, 1) or "internal error" in c[2]]
    assert not bad, bad[:5]
    assert tree_digest(root) == before, "a read-only CLI session changed the store"
    assert not (root / "lock").exists() or (unpack(name) / "lock").exists()
    FIGURES.add(request, "read-only/fixtures", runs=1, faultsInjected=int(abort), messagesChecked=n,
                cliCommands=len(codes))


def test_browsing_a_store_we_wrote_and_crashed_changes_nothing(request, tmp_path):
    """Our own store, left by a writer killed mid-flight (abort present, torn tail)."""
    import signal
    from relsupport import HERE, small_cfg
    root = tmp_path / "s"
    MessageStore.create(root, small_cfg()).close()
    p = subprocess.Popen([PY, str(HERE / "writer_proc.py"), str(root), "--seed", "9", "--max", "600"],
                         stdout=subprocess.PIPE, env=child_env())
    for line in p.stdout:
        if line.startswith(b"IDLE"):
            break
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdout.close()
    assert (root / "abort").exists()
    before = tree_digest(root)
    with MessageStore.open(root) as s:
        n = browse(s, random.Random(2), deep=True)
    codes = cli_session(root, commands_for(root))
    assert all(c[1] in (0, 1) for c in codes), codes
    assert tree_digest(root) == before
    FIGURES.add(request, "read-only/own-crashed", runs=1, faultsInjected=1, messagesChecked=n, cliCommands=len(codes))

"""The roles' summary: node scripts quote what they use, parsing ignores stray lines, verdicts say
"same path, same content" or exactly what is missing."""

import re

from provision.checks.roles import jupyter_lines, nfs_verdict, node_script, parse_node, read_marker


def test_node_script_reads_marker_by_mount_else_nfs_cat_and_sizes_clones():
    marker = ".provision-nfs-check.0123456789abcdef"
    script = node_script(["/data/imagenet"], "172.18.0.2", "tok", [("alice", "anaconda3")], marker)
    assert f"nfs://172.18.0.2/data/imagenet/{marker}?version=4" in script
    assert read_marker(f"/data/imagenet/{marker}") in script
    assert "getent passwd alice" in script and "du -sm" in script


CLONES = [("alice", "anaconda3"), ("bob", "anaconda3")]


def test_parse_reads_the_frames_of_the_run_and_ignores_what_is_outside():
    text = (
        "junk\n@@ab@@ nfs 0\nmount tok\n@@ab@@ du 0\n1135\n@@ab@@ du 1\nabsent\n"
        "@@other@@ nfs 0\nmount forged\n@nfs /data/imagenet mount forged\n"  # another nonce, the old unframed form
    )
    nfs, du = parse_node(text, "ab", ["/data/imagenet"], CLONES)
    assert nfs == {"/data/imagenet": ("mount", "tok")}
    assert du == {("alice", "anaconda3"): "1135", ("bob", "anaconda3"): "absent"}


def test_parse_refuses_a_frame_its_script_cannot_print():
    import pytest

    from provision.errors import ParseError

    for forged, why in (
        ("@@ab@@ nfs 1\nmount tok\n", "unexpected frame 'nfs' \\[1\\]"),  # an export it was not given
        ("@@ab@@ made 0\n", "unexpected frame 'made'"),  # the server's label, on a node
        ("@@ab@@ nfs 0\nmount tok\n@@ab@@ nfs 0\nmount other\n", "reported twice"),
        ("@@ab@@ nfs 0\nguessed tok\n", "read by 'guessed'"),
    ):
        with pytest.raises(ParseError, match=why):
            parse_node(forged, "ab", ["/data/imagenet"], CLONES)


def test_the_server_says_which_markers_it_made_in_frames():
    from provision.checks.roles import made_markers

    marker = ".provision-nfs-check.0123456789abcdef"
    said = "@@ab@@ made 1\n@@ab@@ made 7\n@made 0\n@@zz@@ made 0\n"  # 7: no such export; the rest not of this run
    assert made_markers(said, ["/a", "/b"], marker, "ab") == [f"/b/{marker}"]


def test_verdicts():
    assert nfs_verdict("s2", "/d", "mount", "tok", "tok", []).text == "/d: same path, same content (NFS mount)"
    line = nfs_verdict("s2", "/d", "nfs-cat", "tok", "tok", ["no privilege to mount (CAP_SYS_ADMIN)"])
    assert (
        line.ok
        and "not mounted (no privilege to mount (CAP_SYS_ADMIN)); read over NFS from this node with nfs-cat: same content"
        in line.text
    )
    bad = nfs_verdict("s2", "/d", "nfs-cat", "nfs-cat: Permission denied", "tok", [])
    assert not bad.ok and "Permission denied" in bad.text
    assert not nfs_verdict("s2", "/d", "mount", "old", "tok", []).ok
    assert not nfs_verdict("s2", "/d", "none", "", "tok", []).ok


def test_jupyter_tunnel_or_url():
    users = [{"name": "alice", "jupyter_port": 8888}, {"name": "bob"}]
    [line] = jupyter_lines("s1", "s1", users, "localhost")
    # issue 33 finding 4: her machine's port 8888 forwarded to her socket on the node (OpenSSH's
    # -L port:remote_socket), never to a TCP port of the node that another user could hold
    assert "ssh -N -L 8888:/var/lib/provision-jupyter/alice/jupyter.sock alice@s1" in line.text
    assert "https://localhost:8888/" in line.text and "localhost:8888 " not in line.text
    [line] = jupyter_lines("s1", "s1", users, "all")
    assert "https://s1:8888/" in line.text
    # Issue 26: the exact tunnel to the node's address and port, and her systemd unit.
    conda = [{"prefix": "/opt/anaconda3"}]
    [line] = jupyter_lines("s1", "10.0.0.73", [{"name": "alice", "jupyter_port": 8888}], "localhost", conda, 2222)
    assert line.text == (
        "alice: ssh -N -L 8888:/var/lib/provision-jupyter/alice/jupyter.sock -p 2222 alice@10.0.0.73  "
        "then open https://localhost:8888/; "
        "her server: systemd unit provision-jupyter-alice (start it: sudo systemctl start provision-jupyter-alice)"
    )
    [line] = jupyter_lines("s1", "s1", [{"name": "bob", "jupyter_port": 8889, "jupyter_service": True}], "localhost", conda)
    assert "ssh -N -L 8889:/var/lib/provision-jupyter/bob/jupyter.sock bob@s1 " in line.text
    assert line.text.endswith("(enabled: runs at boot)")


def test_failed_nfs_server_is_said_not_hidden():
    from types import SimpleNamespace

    from provision.checks.roles import role_summary
    from provision.engine.hostrun import HostRun, TaskResult
    from provision.inventory.model import Host

    # Issue 34: a Jupyter task failed on the NFS server; the line said "the NFS server failed or was
    # unreachable" as a FAILED nfs check. It names why, as not checked; a stopped client has its line too.
    r1 = HostRun(Host("r1"), None, failed=True)
    r1.results.append(TaskResult("r1", "Jupyter for each user", "jupyter_server_config.py of each user", "", "failed"))
    runs = {"r1": r1, "r2": HostRun(Host("r2"), None, unreachable="timeout: no SSH answer within 2s")}
    variables = {n: {"nfs_server": "r1", "nfs_exports": [{"path": "/data/x"}]} for n in runs}
    server, client = role_summary(runs, variables, forks=2)
    assert (server.role, server.host, server.ok, server.checked) == ("nfs", "r1", False, False)
    assert server.text == (
        "not checked: the NFS server failed at task 'jupyter_server_config.py of each user', "
        "so no node's dataset paths were verified"
    )
    assert (client.host, client.ok, client.checked) == ("r2", False, False)
    assert client.text == "not checked: its dataset paths (NFS): r2 unreachable (timeout: no SSH answer within 2s)"
    assert role_summary(runs, variables, forks=2, roles=frozenset({"jupyter"})) == []
    runs["r1"] = SimpleNamespace(failed=True, unreachable=None)  # a run without its reason still gets the line
    assert "no node's dataset paths" in role_summary(runs, variables, forks=2)[0].text


def _server_run(session, kind="kernel"):
    from types import SimpleNamespace

    return SimpleNamespace(
        failed=False, unreachable=None, registered={"nfs_kind": {"server": kind}}, identity=dict, session=session
    )


def test_text_from_nodes_is_printable():
    from provision.checks.roles import role_summary
    from provision.transport.options import CommandResult

    nfs, _du = parse_node("@@ab@@ nfs 0\nnfs-cat \x1b]0;owned\x07\x1b[2Jdenied\n", "ab", ["/data/x"], [])
    assert "\x1b" not in nfs["/data/x"][1] and "denied" in nfs["/data/x"][1]

    class Session:
        def run(self, command, stdin):
            return CommandResult("sh: \x1b[2J\x1b]0;owned\x07cannot create\n", "", 1)

    variables = {"s1": {"nfs_server": "s1", "nfs_server_address": "10.0.0.1", "nfs_exports": [{"path": "/data/x"}]}}
    lines = role_summary({"s1": _server_run(Session())}, variables, forks=1)
    [bad] = [line for line in lines if not line.ok]
    assert "could not write the marker" in bad.text and "cannot create" in bad.text
    assert "\x1b" not in bad.text and "\x07" not in bad.text


def _sh(script: str, tmp_path):
    """Run a node script here, with a PATH of only the tools it needs (so never nfs-cat: no waiting)."""
    import shutil
    import subprocess

    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    for tool in ("sh", "awk", "head", "getent", "cut", "du", "chmod", "rm", "touch", "mktemp", "ln", "cat"):
        if shutil.which(tool) and not (tools / tool).exists():
            (tools / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(tools)}
    return subprocess.run([str(tools / "sh"), "-s"], input=script, capture_output=True, text=True, timeout=60, env=env)


def test_node_script_quotes_what_it_puts_in_commands(tmp_path):
    import pytest

    from provision.errors import ArgumentError

    owned = tmp_path / "owned"
    script = node_script([], None, None, [("nosuchuser-provision", f"a$(touch {owned})")])
    _sh(script, tmp_path)
    assert not owned.exists()
    with pytest.raises(ArgumentError, match="may only hold"):
        node_script([f"/data$(touch {owned})"], "10.0.0.1", "tok", [], ".provision-nfs-check.0123456789abcdef")


def test_node_script_runs_and_is_parsed(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    clones = [("nosuchuser-provision", "anaconda3")]
    script = node_script([str(export)], "127.0.0.1", "tok", clones, ".provision-nfs-check.0123456789abcdef", "ab12")
    nfs, du = parse_node(_sh(script, tmp_path).stdout, "ab12", [str(export)], clones)
    assert set(nfs) == {str(export)} and nfs[str(export)][0] == "none"
    assert du == {("nosuchuser-provision", "anaconda3"): "absent"}


class _LocalSession:
    """Runs the become script here (the password line dropped) and keeps what it ran."""

    def __init__(self, tmp_path):
        self.tmp_path, self.scripts = tmp_path, []

    def run(self, command, stdin):
        from provision.transport.options import CommandResult

        script = stdin.decode().split("\n", 1)[1]
        self.scripts.append(script)
        done = _sh(script, self.tmp_path)
        return CommandResult(done.stdout, done.stderr, done.returncode)


def _summary_with_local_server(tmp_path, export):
    from provision.checks.roles import role_summary
    from provision.transport.options import CommandResult

    class Client:
        scripts: list = []

        def run(self, command, stdin):
            self.scripts.append(stdin.decode())
            return CommandResult("", "", 0)

    server, client = _LocalSession(tmp_path), Client()
    runs = {"s1": _server_run(server), "s2": _server_run(client)}
    variables = {n: {"nfs_server": "s1", "nfs_server_address": "10.0.0.1", "nfs_exports": [{"path": str(export)}]} for n in runs}
    return role_summary(runs, variables, forks=1), server, client


def test_marker_has_a_unique_name_and_a_users_file_is_never_touched(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / ".provision-nfs-check").write_text("mine")
    _lines, server, client = _summary_with_local_server(tmp_path, export)
    assert (export / ".provision-nfs-check").read_text() == "mine"
    assert sorted(p.name for p in export.iterdir()) == [".provision-nfs-check"]  # ours was removed afterwards
    [name] = {m for m in re.findall(r"\.provision-nfs-check\.[0-9a-f]{16}", server.scripts[0])}
    assert "set -C" in server.scripts[0] and name in client.scripts[0] and name in server.scripts[-1]


def test_marker_that_exists_is_refused_and_kept(tmp_path, monkeypatch):
    from provision.checks import roles

    monkeypatch.setattr(roles.secrets, "token_hex", lambda n: "ab" * n)
    export = tmp_path / "export"
    export.mkdir()
    taken = export / (".provision-nfs-check." + "ab" * 8)
    taken.write_text("mine")
    lines, server, _client = _summary_with_local_server(tmp_path, export)
    assert taken.read_text() == "mine"
    assert any(not line.ok and "could not write the marker" in line.text for line in lines), lines
    assert all("rm " not in script for script in server.scripts)


def test_marker_is_created_0644_and_never_chmodded_after(tmp_path):
    import subprocess

    from provision.checks.roles import write_markers

    export = tmp_path / "export"
    export.mkdir()
    script = write_markers([str(export)], ".provision-nfs-check.0123456789abcdef", "tok", "ab12")
    # a chmod after creating it would follow a link a user swapped in at that name
    assert "chmod" not in script
    done = subprocess.run(["sh", "-c", "umask 077; " + script], capture_output=True, text=True)
    assert done.returncode == 0 and "@@ab12@@ made 0" in done.stdout, done
    marker = export / ".provision-nfs-check.0123456789abcdef"
    assert marker.read_text() == "tok" and marker.stat().st_mode & 0o777 == 0o644


def test_the_marker_is_read_as_root_never_through_a_link_a_user_planted(tmp_path):
    """Issue 24: a user who can write the export swaps the marker for a link to a file only root
    reads; root's read on each client must not follow it (nor hang on a FIFO). Run here with the
    real dd on a local folder: a kernel NFS mount cannot be made in these containers (no
    privileges, no nfs module), so the mount itself is not exercised."""
    import os
    import subprocess

    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    secret.chmod(0o600)
    export = tmp_path / "export"
    export.mkdir()

    def read(name):
        command = read_marker(str(export / name))
        return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30).stdout

    (export / "real").write_text("tok")
    assert read("real") == "tok"
    (export / "link").symlink_to(secret)
    said = read("link")
    assert "secret-hash" not in said and "symbolic links" in said, said
    os.mkfifo(export / "fifo")
    assert read("fifo") == ""  # not blocked waiting for a writer

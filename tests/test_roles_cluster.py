"""The NFS, Anaconda and Jupyter roles on real containers (tests/cluster/roles-compose.yml):
--check --diff on a fresh cluster shows every file and changes nothing (no password, no hash);
the first run converges; the second changes nothing; NFS served by the real nfs-ganesha and read
from every node with the real nfs-cat (the containers cannot mount); Anaconda from the TEST
STAND-IN installer, conda found by login shells and by non-interactive SSH, per-user clones made
as the user; the real Jupyter Server 2 started with the generated config, reached over HTTPS
from another container, the password accepted and a wrong one refused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest
from roles_support import ROLES_NODES, container_address, direct_inventory, start_roles_cluster, stop_roles_cluster

from conftest import run_cli
from provision.operations.jupyter import existing_hash, hash_matches

pytestmark = pytest.mark.cluster

STANDIN = os.path.join(os.path.dirname(__file__), "standins", "anaconda", "Anaconda-TEST-STAND-IN-Linux.sh")
PASSWORD = "s3cret-Jupyter-pass"
NODES = ROLES_NODES


@pytest.fixture(scope="module")
def roles_cluster(tmp_path_factory):
    project = f"provroles{os.getpid()}"
    material = tmp_path_factory.mktemp("roles-material")
    try:
        cluster = start_roles_cluster(project, material)
        cluster.docker_exec("r1", "sh", "-c", "mkdir -p /data/imagenet && echo train-0001 >/data/imagenet/train.txt")
        yield cluster
    finally:
        stop_roles_cluster(project, material)


def inventory(cluster, folder, extra: str = "", published: bool = False) -> tuple:
    """Inventory + known_hosts + secrets/ and installers/ beside it, as a site would keep them.
    The nodes are reached at their container addresses, port 22, as a real cluster's (the NFS
    export list is made of the addresses the controller reached); ``published``: at
    127.0.0.1:PORT instead, Docker's published ports (a NAT: no node has that address)."""
    (folder / "secrets").mkdir(exist_ok=True)
    (folder / "secrets" / "alice.jupyter").write_text(PASSWORD + "\n")
    (folder / "secrets" / "alice.jupyter").chmod(0o600)
    (folder / "secrets" / "bob.jupyter").write_text("bob-pass\n")
    (folder / "installers").mkdir(exist_ok=True)
    shutil.copy(STANDIN, folder / "installers" / "Anaconda3-TEST-STAND-IN.sh")
    with open(STANDIN, "rb") as handle:
        data = handle.read()
    sha, md5 = hashlib.sha256(data).hexdigest(), hashlib.md5(data).hexdigest()
    hosts, known_lines = direct_inventory(cluster, NODES)
    if published:
        hosts, known_lines = cluster.inventory_yaml(NODES), "".join(cluster.known_hosts_line(n) for n in NODES)
    text = (
        hosts
        + f"""vars:
  cluster_users:
    - {{name: alice, uid: 2001, conda_clone: true, jupyter_port: 8888, jupyter_password_file: secrets/alice.jupyter}}
    - {{name: bob, uid: 2002, jupyter_port: 8889}}
  nfs_server: r1
  nfs_exports:
    - {{path: /data/imagenet}}
  anaconda:
    - {{installer: installers/Anaconda3-TEST-STAND-IN.sh, sha256: "{sha}", prefix: /opt/anaconda3}}
    - {{installer: installers/Anaconda3-TEST-STAND-IN.sh, md5: "{md5}", prefix: /opt/anaconda2}}
{extra}"""
    )
    path = folder / "hosts.yml"
    path.write_text(text)
    known = folder / "known_hosts"
    known.write_text(known_lines)
    return path, known


BOB_PASSWORD = "bob-asked-at-the-prompt"


def setup(files, *extra, json_output=True):
    """setup-cluster on the roles nodes; bob's Jupyter password is asked at the prompt (stdin)."""
    path, known = files
    done = run_cli(
        "setup-cluster",
        "-i",
        str(path),
        "--known-hosts",
        str(known),
        *(["--json"] if json_output else []),
        "--ask-jupyter-pass",
        *extra,
        input=BOB_PASSWORD + "\n",
    )
    assert PASSWORD not in done.stdout + done.stderr and BOB_PASSWORD not in done.stdout + done.stderr
    return done


def problems(done) -> list:
    """Failed tasks and summary lines that are not ok, for assertion messages."""
    try:
        data = json.loads(done.stdout)
    except ValueError:
        return [done.stdout[-2000:], done.stderr[-2000:]]
    return (
        [(r["host"], r["task"], r["message"]) for r in data["results"] if r["status"] == "failed"]
        + [(s["host"], s["text"]) for s in data.get("summary", []) if not s["ok"]]
        + [r for r in data["recap"] if r["failed"] or r["unreachable"]]
        + [p for p in data.get("verify", []) if not p["ok"]]
        + [done.stderr[-1000:]]
    )


def recap(done) -> dict:
    return {r["host"]: r for r in json.loads(done.stdout)["recap"]}


def state(cluster, node) -> str:
    script = (
        "ls -la /opt /home /etc/ganesha /etc/profile.d 2>&1; head -3 /etc/bash.bashrc; cat /etc/fstab; "
        "ls -la /home/alice/.jupyter 2>&1; ls /data 2>&1; find / -xdev -name '*.provision-tmp.*' 2>/dev/null"
    )
    return cluster.docker_exec(node, "sh", "-c", script + "; true")


def test_roles_check_converge_idempotent_and_work(roles_cluster, tmp_path):
    cluster = roles_cluster
    files = inventory(cluster, tmp_path)
    before = {n: state(cluster, n) for n in NODES}
    checked = setup(files, "--check", "--diff")
    assert checked.returncode == 0, problems(checked)
    assert {n: state(cluster, n) for n in NODES} == before  # --check changed nothing
    diffs = "".join(d for r in json.loads(checked.stdout)["results"] for d in r["diff"])
    for path in (
        "/etc/ganesha/provision-ganesha.conf",
        "/etc/fstab",
        "/etc/profile.d/provision-conda.sh",
        "/etc/bash.bashrc",
        "/opt/anaconda3/.condarc",
        "jupyter_server_config.py",
    ):
        assert path in diffs, path
    # Issue 26: the config shown with the hash's line masked (it was "(content hidden: secret)" whole).
    assert "jupyter_server_config.py\n@@ " in diffs and "(content hidden: secret)" not in diffs
    assert '\n+c.ServerApp.sock = "/var/lib/provision-jupyter/alice/jupyter.sock"\n' in diffs
    assert "\n+c.PasswordIdentityProvider.hashed_password = (hidden, fingerprint " in diffs
    assert PASSWORD not in checked.stdout + checked.stderr and "argon2:" not in checked.stdout + checked.stderr

    first = setup(files)
    assert first.returncode == 0, json.dumps(problems(first))
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in recap(first).values()), recap(first)
    assert PASSWORD not in first.stdout + first.stderr
    summary = [f"{s['role']} {s['host']}: {s['text']}" for s in json.loads(first.stdout)["summary"]]
    print("\n".join(summary))
    assert any("r1: NFS server: nfs-ganesha" in s for s in summary)
    for node in ("r2", "r3"):
        assert any(
            s.startswith(f"nfs {node}: /data/imagenet: not mounted (")
            and "no privilege to mount (CAP_SYS_ADMIN)" in s
            and "read over NFS from this node with nfs-cat: same content" in s
            for s in summary
        ), summary
    for node in NODES:
        assert any(s.startswith(f"anaconda {node}: alice: ~/.conda/envs/anaconda3 ") and s.endswith(" MB") for s in summary)
        assert any(s.startswith(f"anaconda {node}: alice: ~/.conda/envs/anaconda2 ") for s in summary)

    second = setup(files)
    assert second.returncode == 0, problems(second)
    # changed=0, in one round trip per host (every fact the roles need read at once)
    assert {h: (r["changed"], r["round_trips"]) for h, r in recap(second).items()} == {n: (0, 1) for n in NODES}, [
        r for r in json.loads(second.stdout)["results"] if r["status"] == "changed"
    ]

    # NFS: exports only to the cluster's addresses, root squashed, read-only; the fstab line on clients.
    conf = cluster.docker_exec("r1", "cat", "/etc/ganesha/provision-ganesha.conf")
    assert "*" not in conf.split("EXPORT", 1)[1] and "Squash = Root_Squash;" in conf and "Access_Type = RO;" in conf
    fstab = cluster.docker_exec("r2", "cat", "/etc/fstab")
    assert fstab.count(" /data/imagenet nfs ro,_netdev,nofail,vers=4 0 0") == 1
    assert (
        cluster.docker_exec(
            "r2", "sh", "-c", "nfs-cat nfs://$(getent hosts r1 | cut -d' ' -f1)/data/imagenet/train.txt?version=4", user="mpi"
        )
        == "train-0001\n"
    )

    # Anaconda: root-owned, nobody else writes; the system .condarc replaced the installer's.
    node = "r2"
    assert cluster.docker_exec(node, "stat", "-c", "%U %a", "/opt/anaconda3") == "root 755\n"
    assert cluster.docker_exec(node, "find", "/opt/anaconda3", "/opt/anaconda2", "-perm", "/022", "!", "-type", "l") == ""
    assert "envs_dirs" in cluster.docker_exec(node, "cat", "/opt/anaconda3/.condarc")
    assert cluster.docker_exec(node, "stat", "-c", "%U", "/home/alice/.conda/envs/anaconda3") == "alice\n"
    login = cluster.docker_exec(node, "runuser", "-l", "alice", "-c", "command -v conda")
    assert login.strip() == "/opt/anaconda3/bin/conda"
    # non-interactive SSH, as mpirun starts its daemons: alice on r1 runs a command on r2
    over_ssh = cluster.docker_exec("r1", "runuser", "-u", "alice", "--", "ssh", "-o", "BatchMode=yes", "r2", "command -v conda")
    assert over_ssh.strip() == "/opt/anaconda3/bin/conda"
    refused = subprocess.run(
        ["docker", "exec", "-u", "alice", cluster.container(node), "/opt/anaconda3/bin/conda", "install", "x"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1 and "Missing write permissions in: /opt/anaconda3" in refused.stderr

    # Issue 26, Jupyter that runs: jupyter-server (the TEST STAND-IN conda's) in alice's clone, made
    # as alice, and in the prefix for bob (no clone); a systemd unit per user on her socket, which
    # systemd's own verifier accepts (the containers run no systemd: verified on the controller).
    assert cluster.docker_exec(node, "stat", "-c", "%U", "/home/alice/.conda/envs/anaconda3/bin/jupyter-server") == "alice\n"
    assert cluster.docker_exec(node, "/opt/anaconda3/bin/jupyter-server", "--version") == "0.0.0-test-stand-in\n"
    for user, env in (("alice", "$$HOME/.conda/envs/anaconda3"), ("bob", "/opt/anaconda3")):
        unit = cluster.docker_exec(node, "cat", f"/etc/systemd/system/provision-jupyter-{user}.service")
        assert f"User={user}\n" in unit and "(her socket, provision)" in unit
        assert f'ExecStart=/bin/sh -c \'exec "{env}/bin/jupyter-server" --config=' in unit
        if shutil.which("systemd-analyze"):
            (tmp_path / f"provision-jupyter-{user}.service").write_text(unit)
            verified = subprocess.run(
                ["systemd-analyze", "verify", str(tmp_path / f"provision-jupyter-{user}.service")], capture_output=True, text=True
            )
            assert verified.returncode == 0 and not verified.stderr.strip(), verified.stderr
        else:
            print("systemd-analyze is not installed here: the Jupyter units were not verified")
    # The summary's tunnel: her machine's port 8888 to her socket on the node (issue 33 finding 4).
    address = container_address(cluster, "r1")
    line = next(s for s in summary if s.startswith("jupyter r1: alice: "))
    tunnel = f"ssh -N -L 8888:/var/lib/provision-jupyter/alice/jupyter.sock alice@{address}"
    assert line == (
        f"jupyter r1: alice: {tunnel}  then open https://localhost:8888/; her server: systemd unit "
        "provision-jupyter-alice (start it: sudo systemctl start provision-jupyter-alice)"
    ), summary
    jupyter_over_her_socket(cluster, tunnel)


JUPYTER_SOCKET = "/var/lib/provision-jupyter/alice/jupyter.sock"
LOGIN_SCRIPT = """
c=$(mktemp); url=https://localhost:8888
for i in $(seq 1 "$TRIES"); do curl -sk -o /dev/null "$url/login" && break; sleep 0.5; done
curl -sk -c "$c" -b "$c" -o /dev/null "$url/login"
x=$(awk '$6 == "_xsrf" {print $7}' "$c")
curl -sk -c "$c" -b "$c" -o /dev/null -w '%{http_code} %{redirect_url}\\n' --data-urlencode "password@-" \\
  --data-urlencode "_xsrf=$x" "$url/login?next=%2Fapi%2Fstatus"
curl -sk -b "$c" -o /dev/null -w 'api %{http_code}\\n' "$url/api/status"
"""
# bob, on alice's node, as each way to stand in for her server: every one refused by the folder
BOB_ATTACKS = """
import os, socket
path = "/var/lib/provision-jupyter/alice/jupyter.sock"
for what, act in (
    ("connect", lambda: socket.socket(socket.AF_UNIX).connect(path)),
    ("list", lambda: os.listdir(os.path.dirname(path))),
    ("bind", lambda: socket.socket(socket.AF_UNIX).bind(path)),
    ("replace", lambda: os.rename("/tmp/bob.sock", path)),
    ("own folder", lambda: os.mkdir("/var/lib/provision-jupyter/alice2")),
):
    try:
        act()
        print(what, "done")
    except OSError as error:
        print(what, type(error).__name__)
"""


def _tunnel_login(cluster, tunnel: str, password: str, user: str = "alice", tries: int = 120) -> list[str]:
    """From r2, as ``user``: the summary's tunnel (in the background), then the login with
    ``password`` (its first page tried ``tries`` times, half a second apart, while it starts)."""
    script = f"{tunnel.replace('ssh ', 'ssh -o BatchMode=yes -o ExitOnForwardFailure=yes ', 1)} & t=$!; sleep 1; "
    script += f"TRIES={tries}\n" + LOGIN_SCRIPT + "kill $t"
    done = subprocess.run(
        ["docker", "exec", "-i", "-u", user, "-w", f"/home/{user}", cluster.container("r2"), "sh", "-c", script],
        input=password,
        capture_output=True,
        text=True,
        timeout=180,
    )
    return done.stdout.split("\n")


def jupyter_over_her_socket(cluster, tunnel: str) -> None:
    """The real Jupyter Server 2 with alice's generated config listens on her socket only; the
    summary's tunnel from r2 reaches it over HTTPS (her password logs in, a wrong one does not);
    bob, on r1, cannot reach, replace or stand in for it, also while it is down."""
    assert cluster.docker_exec("r1", "stat", "-c", "%U %a", "/home/alice/.jupyter/jupyter_server_config.py") == "alice 600\n"
    folders = cluster.docker_exec("r1", "stat", "-c", "%n %U %a", "/var/lib/provision-jupyter", JUPYTER_SOCKET.rsplit("/", 1)[0])
    assert folders == "/var/lib/provision-jupyter root 755\n/var/lib/provision-jupyter/alice alice 700\n"
    bob = cluster.docker_exec("r3", "cat", "/home/bob/.jupyter/jupyter_server_config.py").encode()
    assert hash_matches(existing_hash(bob), BOB_PASSWORD)  # the prompted password, hashed on the controller
    subprocess.run(
        ["docker", "exec", "-d", "-u", "alice", "-w", "/home/alice", "-e", "HOME=/home/alice", cluster.container("r1"),
         "sh", "-c", "/opt/jupyter/bin/jupyter server >/tmp/jupyter-alice.log 2>&1"],
        check=True,
    )  # fmt: skip
    for _ in range(600):  # a loaded 2-core machine may take a minute to start it
        if cluster.docker_exec("r1", "sh", "-c", f"test -S {JUPYTER_SOCKET} && echo yes; true") == "yes\n":
            break
        time.sleep(0.2)
    log = lambda: cluster.docker_exec("r1", "tail", "-20", "/tmp/jupyter-alice.log")  # noqa: E731
    assert cluster.docker_exec("r1", "stat", "-c", "%U %a %F", JUPYTER_SOCKET) == "alice 600 socket\n", log()
    assert ":22B8 " not in cluster.docker_exec("r1", "cat", "/proc/net/tcp", "/proc/net/tcp6")  # no TCP port 8888
    good = _tunnel_login(cluster, tunnel, PASSWORD)
    assert good[0].startswith("302 ") and good[1] == "api 200", (good, log())
    bad = _tunnel_login(cluster, tunnel, "wrong-password")
    assert not bad[0].startswith("302 ") and bad[1] == "api 403", bad
    # bob's own tunnel to her socket: sshd connects to it as bob, who cannot enter her folder
    theirs = _tunnel_login(cluster, tunnel.replace(" alice@", " bob@"), PASSWORD, user="bob", tries=6)
    assert not theirs[0].startswith("302 ") and theirs[1] == "api 000", theirs

    his_socket = "import socket; socket.socket(socket.AF_UNIX).bind('/tmp/bob.sock')"
    cluster.docker_exec("r1", "python3", "-c", his_socket, user="bob")
    refused = "".join(f"{what} PermissionError\n" for what in ("connect", "list", "bind", "replace", "own folder"))
    assert cluster.docker_exec("r1", "python3", "-c", BOB_ATTACKS, user="bob") == refused
    # Her server down (the unit is not enabled by default): bob serves a look-alike page on the old
    # TCP port 8888 of the node. Her tunnel still leads only to her (absent) socket: no page, no request to bob.
    cluster.docker_exec("r1", "pkill", "-u", "alice", "-f", "jupyter")
    for _ in range(100):
        if "jupyter" not in cluster.docker_exec("r1", "sh", "-c", "ps -u alice -o args=; true"):
            break
        time.sleep(0.2)
    assert cluster.docker_exec("r1", "python3", "-c", BOB_ATTACKS, user="bob") == refused
    subprocess.run(
        ["docker", "exec", "-d", "-u", "bob", "-w", "/tmp", cluster.container("r1"),
         "sh", "-c", "echo 'Jupyter look-alike login' >index.html; python3 -m http.server 8888 >/tmp/bob-http.log 2>&1"],
        check=True,
    )  # fmt: skip
    for _ in range(100):
        if ":22B8 " in cluster.docker_exec("r1", "cat", "/proc/net/tcp"):
            break
        time.sleep(0.2)
    down = _tunnel_login(cluster, tunnel, PASSWORD, tries=6)
    assert not down[0].startswith("302 ") and down[1] != "api 200", down
    assert "GET" not in cluster.docker_exec("r1", "cat", "/tmp/bob-http.log")  # her tunnel never reached bob's server
    cluster.docker_exec("r1", "pkill", "-u", "bob", "-f", "http.server")


def failures(done) -> dict:
    """host -> messages of its failed tasks."""
    out: dict = {}
    for result in json.loads(done.stdout)["results"]:
        if result["status"] == "failed":
            out.setdefault(result["host"], []).append(result["message"])
    return out


def test_roles_bad_input_on_hosts_fails_that_host_only(roles_cluster, tmp_path):
    cluster = roles_cluster
    files = inventory(cluster, tmp_path)
    assert setup(files, "--tags", "users", "--no-verify").returncode == 0  # the users exist (also when run alone)

    # A dataset path missing on the server is refused (unless nfs_create_missing), naming the variable.
    (tmp_path / "missing.yml").write_text("nfs_exports: [{path: /data/missing}]\n")
    done = setup(files, "--tags", "nfs", "-e", f"@{tmp_path / 'missing.yml'}")
    assert done.returncode == 1
    assert list(failures(done)) == ["r1"], problems(done)
    assert "dataset path /data/missing does not exist on the NFS server" in failures(done)["r1"][0]
    assert "nfs_create_missing: true" in failures(done)["r1"][0]

    # A mount point that is already a mount of something else (r3's tmpfs) is refused, never mounted over.
    (tmp_path / "busy.yml").write_text("nfs_exports: [{path: /data/busy}]\nnfs_create_missing: true\n")
    before = cluster.docker_exec("r3", "cat", "/etc/fstab")
    done = setup(files, "--tags", "nfs", "-e", f"@{tmp_path / 'busy.yml'}")
    assert done.returncode == 1
    assert list(failures(done)) == ["r3"], problems(done)
    assert "/data/busy is already a mount of tmpfs (tmpfs); refusing to mount" in failures(done)["r3"][0]
    assert cluster.docker_exec("r3", "cat", "/etc/fstab") == before
    assert "tmpfs" in cluster.docker_exec("r3", "sh", "-c", "grep ' /data/busy ' /proc/mounts")
    assert " /data/busy " in cluster.docker_exec("r2", "cat", "/etc/fstab")  # the other client went on

    # With jupyter_listen: all (her own certificate given), a Jupyter port taken by another user's
    # process on r2 is an error naming it, on r2 only.
    subprocess.run(["docker", "exec", "-d", cluster.container("r2"), "python3", "-m", "http.server", "8889"], check=True)
    for _ in range(50):
        if ":22B9 " in cluster.docker_exec("r2", "cat", "/proc/net/tcp"):
            break
        time.sleep(0.2)
    certificates = "jupyter_certfile: /etc/ssl/certs/{0}.pem, jupyter_keyfile: /etc/ssl/private/{0}.key"
    (tmp_path / "all.yml").write_text(
        "jupyter_listen: all\ncluster_users:\n"
        "  - {name: alice, uid: 2001, jupyter_port: 8888, jupyter_password_file: secrets/alice.jupyter, "
        f"{certificates.format('alice')}}}\n"
        f"  - {{name: bob, uid: 2002, jupyter_port: 8889, {certificates.format('bob')}}}\n"
    )
    done = setup(files, "--tags", "jupyter", "-e", f"@{tmp_path / 'all.yml'}")
    assert done.returncode == 1
    assert failures(done) == {"r2": ["port 8889 of bob is already in use (by uid 0)"]}
    assert all(recap(done)[n]["failed"] == 0 for n in ("r1", "r3"))

    # Too little free disk space for a new prefix: a clear error on every node, nothing installed.
    sha = hashlib.sha256(open(STANDIN, "rb").read()).hexdigest()  # noqa: SIM115
    (tmp_path / "big.yml").write_text(
        "anaconda: [{installer: installers/Anaconda3-TEST-STAND-IN.sh, "
        f"sha256: '{sha}', prefix: /opt/big, min_free_mb: 100000000}}]\n"
    )
    done = setup(files, "--tags", "anaconda", "-e", f"@{tmp_path / 'big.yml'}", "--no-verify")
    assert done.returncode == 1
    assert set(failures(done)) == set(NODES), problems(done)
    assert all(
        "not enough free disk space for /opt/big" in m[0] and "100000000 MiB needed" in m[0] for m in failures(done).values()
    )
    assert cluster.docker_exec("r2", "sh", "-c", "ls -d /opt/big 2>&1; true").startswith("ls: cannot access")

    # A cluster_users entry that cannot be created (its uid belongs to another user here) fails each node.
    (tmp_path / "carol.yml").write_text("cluster_users: [{name: carol, uid: 1000}]\n")
    done = setup(files, "--tags", "users", "-e", f"@{tmp_path / 'carol.yml'}", "--no-verify")
    assert done.returncode == 1
    assert set(failures(done)) == set(NODES) and all("1000" in m[0] for m in failures(done).values()), failures(done)


def test_nfs_export_serves_only_the_listed_clients(roles_cluster, tmp_path):
    cluster = roles_cluster
    files = inventory(cluster, tmp_path)
    r2 = cluster.docker_exec("r2", "hostname", "-I").split()[0]
    (tmp_path / "only-r2.yml").write_text(f"nfs_clients: ['{r2}']\n")
    done = setup(files, "--tags", "nfs", "-e", f"@{tmp_path / 'only-r2.yml'}", "--no-verify")
    # --no-verify: no summary; read the marker-free dataset file directly with the real nfs-cat
    assert done.returncode == 0, problems(done)
    conf = cluster.docker_exec("r1", "cat", "/etc/ganesha/provision-ganesha.conf")
    assert f"Clients = {r2};" in conf
    url = "nfs://$(getent hosts r1 | cut -d' ' -f1)/data/imagenet/train.txt?version=4"
    # ganesha was restarted with the new list: its grace period lasts a few seconds
    retry = f"for i in 1 2 3 4 5 6 7 8; do nfs-cat {url} && exit 0; sleep 2; done; exit 1"
    assert cluster.docker_exec("r2", "sh", "-c", retry, user="mpi") == "train-0001\n"
    refused = subprocess.run(
        ["docker", "exec", "-u", "mpi", cluster.container("r3"), "sh", "-c", f"timeout 30 nfs-cat {url}"],
        capture_output=True,
        text=True,
    )
    # ganesha hides an export from a client not in its list: the server answers NFS4ERR_NOENT
    assert refused.returncode != 0 and "train-0001" not in refused.stdout, refused
    assert "failed with NFS4ERR" in refused.stdout + refused.stderr, refused
    # back to every node's address; --tags nfs alone verifies NFS only (no SSH pairs, no other role)
    back = setup(files, "--tags", "nfs")
    assert back.returncode == 0, json.dumps(problems(back))[:3000]
    data = json.loads(back.stdout)
    assert data["verify"] == [] and {s["role"] for s in data["summary"]} == {"nfs"}
    assert sum("same content" in s["text"] for s in data["summary"]) == 2


def test_nfs_limit_to_the_server_keeps_every_clients_export(roles_cluster, tmp_path):
    """Issue 15: the export list comes from the inventory. --limit r1 (the server) with nothing
    known of r2, r3 refuses, naming them; once they were seen, it keeps their addresses."""
    cluster = roles_cluster
    files = inventory(cluster, tmp_path)
    conf = "/etc/ganesha/provision-ganesha.conf"
    unknown = setup(files, "--tags", "nfs", "--limit", "r1", "--no-verify")
    assert unknown.returncode == 1
    assert "no address known of r2, r3" in recap(unknown)["r1"]["message"], recap(unknown)["r1"]
    full = setup(files, "--tags", "nfs", "--no-verify")
    assert full.returncode == 0, problems(full)
    exported = cluster.docker_exec("r1", "cat", conf)
    addresses = [cluster.docker_exec(n, "hostname", "-I").split()[0] for n in NODES]
    assert all(a in exported for a in addresses)
    limited = setup(files, "--tags", "nfs", "--limit", "r1", "--no-verify")
    assert limited.returncode == 0, problems(limited)
    assert sorted(recap(limited)) == ["r1"] and recap(limited)["r1"]["changed"] == 0  # no rewrite, no restart
    assert cluster.docker_exec("r1", "cat", conf) == exported
    url = "nfs://$(getent hosts r1 | cut -d' ' -f1)/data/imagenet/train.txt?version=4"
    retry = f"for i in 1 2 3 4 5 6 7 8; do nfs-cat {url} && exit 0; sleep 2; done; exit 1"
    assert cluster.docker_exec("r3", "sh", "-c", retry, user="mpi") == "train-0001\n"


def test_switching_conda_path_removes_what_the_other_form_wrote(roles_cluster, tmp_path):
    """Issue 26's leftover: profile -> module removes /etc/profile.d/provision-conda.sh (else conda
    stays on every login shell's PATH and the switch did not take), module -> profile removes each
    prefix's modulefile; --check reports the removal and changes nothing; the second run changes
    nothing in one round trip; an admin's own file under provision's name is left alone."""
    cluster = roles_cluster
    # Issue 34: the modulefiles go where the node's module command looks; these Debian nodes have
    # none, so environment-modules is installed and its folder taken (not /etc/modulefiles).
    profile_d = "/etc/profile.d/provision-conda.sh"
    modulefiles = ("/etc/environment-modules/modules/anaconda3", "/etc/environment-modules/modules/anaconda2")

    def present(node, *paths) -> list[str]:
        return cluster.docker_exec(node, "sh", "-c", 'for p; do [ -e "$p" ] && echo "$p"; done; true', "sh", *paths).split()

    def login_conda(node) -> str:  # a login shell's conda (alice's), "" when none is on PATH
        return cluster.docker_exec(node, "runuser", "-l", "alice", "-c", "command -v conda; true").strip()

    profile = inventory(cluster, tmp_path)
    assert setup(profile, "--tags", "users,ssh", "--no-verify").returncode == 0  # alice and her SSH (also when run alone)
    first = setup(profile, "--tags", "anaconda", "--no-verify")  # the default form (also when this test runs alone)
    assert first.returncode == 0, problems(first)
    assert all(present(n, profile_d) == [profile_d] and login_conda(n) == "/opt/anaconda3/bin/conda" for n in NODES)
    module_dir = tmp_path / "module"
    module_dir.mkdir()
    module = inventory(cluster, module_dir, "  conda_path: module\n")
    checked = setup(module, "--tags", "anaconda", "--check", "--no-verify")
    assert checked.returncode == 0, problems(checked)
    removal = [r for r in json.loads(checked.stdout)["results"] if r["task"].startswith("no profile.d file")]
    assert {r["host"]: (r["status"], r["changes"]) for r in removal} == dict.fromkeys(NODES, ("changed", [f"remove {profile_d}"]))
    assert all(present(n, profile_d) == [profile_d] for n in NODES)  # --check removed nothing

    switched = setup(module, "--tags", "anaconda", "--no-verify")
    assert switched.returncode == 0, problems(switched)
    for node in NODES:
        assert present(node, profile_d) == [] and login_conda(node) == "", node  # the switch took
        assert present(node, *modulefiles) == list(modulefiles), node
    assert "Anaconda in /opt/anaconda3" in cluster.docker_exec("r1", "cat", modulefiles[0])
    over_ssh = cluster.docker_exec("r1", "runuser", "-u", "alice", "--", "ssh", "-o", "BatchMode=yes", "r2", "command -v conda")
    assert over_ssh.strip() == "/opt/anaconda3/bin/conda"  # mpirun's non-interactive shells keep it (the bashrc block)
    again = setup(module, "--tags", "anaconda", "--no-verify")
    assert again.returncode == 0, problems(again)
    assert {n: (r["changed"], r["round_trips"]) for n, r in recap(again).items()} == dict.fromkeys(NODES, (0, 1))

    # r3's admin has since put a module of her own in provision's anaconda2 place: no longer provision's
    own = "#%Module1.0\n## the site module of anaconda2, kept by its admin\nprepend-path PATH /opt/anaconda2/bin\n"
    cluster.docker_exec("r3", "sh", "-c", f"printf '%s' '{own}' >{modulefiles[1]}")
    back = setup(profile, "--tags", "anaconda", "--no-verify")
    assert back.returncode == 0, problems(back)
    for node in NODES:
        kept = [modulefiles[1]] if node == "r3" else []
        assert present(node, *modulefiles) == kept and present(node, profile_d) == [profile_d], node
        assert login_conda(node) == "/opt/anaconda3/bin/conda", node
    assert cluster.docker_exec("r3", "cat", modulefiles[1]) == own  # left alone
    again = setup(profile, "--tags", "anaconda", "--no-verify")
    assert {n: (r["changed"], r["round_trips"]) for n, r in recap(again).items()} == dict.fromkeys(NODES, (0, 1))
    cluster.docker_exec("r3", "rm", "-f", modulefiles[1])


OUTSIDE = "203.0.113.9"  # TEST-NET-3 (RFC 5737): outside the cluster


def test_nfs_exports_only_to_the_addresses_the_controller_reached(roles_cluster, tmp_path):
    """Cluster-wide files come from the inventory and what the controller verified, never from
    what a node says about itself: r3 (root on it) adds an outside address to its interface and
    reports it (``hostname -I``); the export lists the address the controller reached each node
    at over SSH (host key verified), never that one. Reached through Docker's published ports
    (127.0.0.1, a NAT), the run warns once, naming each host and nfs_clients."""
    cluster = roles_cluster
    cluster.docker_exec("r3", "ip", "address", "add", f"{OUTSIDE}/32", "dev", "eth0")
    try:
        assert OUTSIDE in cluster.docker_exec("r3", "hostname", "-I").split()  # r3 reports it
        files = inventory(cluster, tmp_path)
        done = setup(files, "--tags", "nfs", "--no-verify")
        assert done.returncode == 0, problems(done)
        conf = cluster.docker_exec("r1", "cat", "/etc/ganesha/provision-ganesha.conf")
        clients = [line.split("=", 1)[1].strip(" ;").split(", ") for line in conf.splitlines() if "Clients =" in line]
        reached = sorted(container_address(cluster, n) for n in NODES)
        assert clients and all(sorted(c) == reached for c in clients), conf
        assert OUTSIDE not in conf
        assert "NFS exports:" not in done.stderr, done.stderr  # each node reports where it was reached
        url = "nfs://$(getent hosts r1 | cut -d' ' -f1)/data/imagenet/train.txt?version=4"
        retry = f"for i in 1 2 3 4 5 6 7 8; do nfs-cat {url} && exit 0; sleep 2; done; exit 1"
        assert cluster.docker_exec("r3", "sh", "-c", retry, user="mpi") == "train-0001\n"

        nat = tmp_path / "published"
        nat.mkdir()
        server = f"  nfs_server_address: {container_address(cluster, 'r1')}\n"  # what the clients mount from stays
        checked = setup(inventory(cluster, nat, server, published=True), "--tags", "nfs", "--check")
        assert checked.returncode == 0, problems(checked)
        warning = " ".join(checked.stderr.split())
        assert (
            "provision: warning: NFS exports: the controller reached r1 at 127.0.0.1, r2 at 127.0.0.1, r3 at 127.0.0.1, "
            "an address those hosts do not report"
        ) in warning, checked.stderr
        assert warning.count("NFS exports:") == 1 and "set nfs_clients in the inventory" in warning
    finally:
        cluster.docker_exec("r3", "ip", "address", "del", f"{OUTSIDE}/32", "dev", "eth0")

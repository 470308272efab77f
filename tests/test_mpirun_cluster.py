"""Proof on real OpenMPI 4 and 5: rank files from probed facts, run by mpirun across containers.

OpenMPI 4.1 runs on the bookworm nodes node1/node2, OpenMPI 5.0 on the trixie nodes m51-m53.
mpirun runs on the first node as user mpi and starts ranks on the others over SSH (host keys
checked against the cluster's known_hosts). --report-bindings says where each rank was bound, each
rank prints the CPUs it may run on, and hwloc on the node says which CPUs the planned package and
core are.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time

import pytest

from cluster_support import ALL_NODES, wait_for_ssh
from conftest import run_cli
from mpi_nodes import start_mpi_nodes, stop_mpi_nodes
from plan_support import seed_rankfile_body
from provision.plans.rankcheck import parse_rankfile

pytestmark = pytest.mark.cluster

HOSTS = {4: ("node1", "node2"), 5: ("m51", "m52", "m53")}
# OpenMPI 4: [node1:00123] MCW rank 0 bound to socket 0[core 1[hwt 0]]: [./B]
BINDING_4 = re.compile(r"\[(\w+):\d+\] MCW rank (\d+) bound to ((?:socket \d+\[core \d+\[hwt [\d-]+\]\],? ?)+)")
CORE_4 = re.compile(r"socket (\d+)\[core (\d+)")
# OpenMPI 5: [m51:00057] Rank 0 bound to package[0][core:0]   (or core:0-1)
BINDING_5 = re.compile(r"\[(\w+):\d+\] Rank (\d+) bound to package\[(\d+)\]\[core:(\d+)(?:-(\d+))?\]")
# What each rank prints (the MPI program is `sh -c ...`): rank, host, Cpus_allowed_list.
# Each rank lives a moment: PRRTE 3.0 (OpenMPI 5.0.x) can miss the exit of a rank that ends within
# milliseconds of its start and then never returns (openpmix/prrte#1839; see launch/mpirun.py).
RANK_PROGRAM = [
    "sh",
    "-c",
    'echo "cpus $OMPI_COMM_WORLD_RANK $(hostname) $(grep Cpus_allowed_list /proc/self/status | cut -f2)"; sleep 1',
]
LIVES_A_MOMENT = ["sh", "-c", "hostname; sleep 1"]
RANK_CPUS = re.compile(r"^cpus (\d+) (\w+) ([\d,-]+)$", re.MULTILINE)
MPI_PROCESSES = "mpirun|orted|prted|prterun|sleep"


def cpus(text: str) -> set[int]:
    """``0-2,5`` -> {0, 1, 2, 5}."""
    result = set()
    for part in text.strip().split(","):
        first, _, last = part.partition("-")
        result.update(range(int(first), int(last or first) + 1))
    return result


def bindings(version: int, output: str) -> dict[int, tuple[str, list[tuple[int, int]]]]:
    """{rank: (host, [(package, core), ...])} from mpirun's --report-bindings lines (test's own parser)."""
    found = {}
    if version == 4:
        for host, rank, where in BINDING_4.findall(output):
            found[int(rank)] = (host, sorted({(int(s), int(c)) for s, c in CORE_4.findall(where)}))
    else:
        for host, rank, package, first, last in BINDING_5.findall(output):
            found[int(rank)] = (host, [(int(package), c) for c in range(int(first), int(last or first) + 1)])
    return found


@pytest.fixture(scope="module")
def mpi_cluster(cluster, tmp_path_factory):
    """Inventory, known_hosts and facts of the five MPI nodes (probed once, as user mpi)."""
    base = tmp_path_factory.mktemp("mpi")
    inventory = base / "hosts.yml"
    inventory.write_text(cluster.inventory_yaml(ALL_NODES))
    known_hosts = base / "known_hosts"
    known_hosts.write_text("".join(cluster.known_hosts_line(n) for n in ALL_NODES))
    facts_dir = base / "facts"
    started = time.monotonic()
    probed = run_cli(
        "probe", *HOSTS[4], *HOSTS[5], "-i", str(inventory), "--facts-dir", str(facts_dir), "--known-hosts", str(known_hosts)
    )
    assert probed.returncode == 0, probed.stderr
    print(f"probe of 5 MPI nodes: {time.monotonic() - started:.1f}s")
    return cluster, ["-i", str(inventory), "--facts-dir", str(facts_dir), "--known-hosts", str(known_hosts)], facts_dir


def mpi_processes(cluster, node: str) -> list[str]:
    """The MPI user's mpirun/daemon/rank processes on ``node`` (``pid name``)."""
    done = subprocess.run(
        ["docker", "exec", cluster.container(node), "pgrep", "-u", "mpi", "-l", "-x", MPI_PROCESSES],
        capture_output=True,
        text=True,
    )
    return done.stdout.split("\n")[:-1]


@pytest.mark.parametrize("version", [4, 5])
def test_rank_file_from_facts_binds_every_rank_where_planned(mpi_cluster, tmp_path, version):
    cluster, common, _ = mpi_cluster
    hosts = HOSTS[version]
    learners = min(int(cluster.docker_exec(hosts[0], "nproc")), 2)
    dims = f"{learners}x{len(hosts)}x1"
    rankfile = tmp_path / f"{dims}.rf"
    started = time.monotonic()
    done = run_cli(
        "launch",
        dims,
        "--hosts",
        ",".join(hosts),
        *common,
        "--allow-no-gpu",
        "--rankfile",
        str(rankfile),
        "--report-bindings",
        "--run",
        "--",
        *RANK_PROGRAM,
    )
    print(f"OpenMPI {version}: launch --run of {dims}: {time.monotonic() - started:.1f}s")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"all {learners * len(hosts)} ranks bound as planned" in done.stderr  # provision's own check
    command = re.search(r"^\[\w+\] \$ (mpirun .*)$", done.stderr, re.MULTILINE).group(1)
    # -x only for variables set where mpirun starts: no mpirun warning about an unset LD_LIBRARY_PATH
    ld_path = run_cli("run", hosts[0], *common[:2], *common[4:], "--", "printenv", "LD_LIBRARY_PATH")
    if ld_path.returncode == 1:  # unset on the first host
        assert "-x LD_LIBRARY_PATH" not in command and f"LD_LIBRARY_PATH is not set on {hosts[0]}" in done.stderr
        assert output.count("LD_LIBRARY_PATH") == 1, output
    else:
        assert "-x LD_LIBRARY_PATH" in command
    hostfile = tmp_path / f"{dims}.hosts"
    if version == 5:  # the allocation: a hostfile beside the rank file, one line per planned host
        assert re.search(
            rf"--map-by rankfile:file=\.provision/{dims}\.\w+/{dims}\.rf --hostfile \.provision/{dims}\.\w+/{dims}\.hosts ",
            command,
        )
        assert [line for line in hostfile.read_text().splitlines() if not line.startswith("#")] == [
            f"{h} slots={learners}" for h in hosts
        ]
    else:
        assert re.search(rf"-rf \.provision/{dims}\.\w+/{dims}\.rf ", command) and "--hostfile" not in command
        assert not hostfile.exists()

    if version == 5:  # the same rank file without the allocation: what `launch` printed before it wrote the hostfile
        subprocess.run(["docker", "cp", str(rankfile), f"{cluster.container(hosts[0])}:/tmp/{dims}.rf"], check=True)
        old = subprocess.run(
            [
                "docker",
                "exec",
                "-u",
                "mpi",
                cluster.container(hosts[0]),
                "mpirun",
                "-n",
                str(learners * len(hosts)),
                "--map-by",
                f"rankfile:file=/tmp/{dims}.rf",
                "hostname",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        said = " ".join((old.stdout + old.stderr).split())
        assert (
            old.returncode != 0
            and "The rankfile that was used claimed that a host was either not allocated or oversubscribed its slots" in said
        ), said
        assert f"Host: {hosts[1]}" in said

    planned = {line.rank: line for line in parse_rankfile(rankfile.read_text())}
    bound = bindings(version, output)
    assert sorted(bound) == sorted(planned), output
    ran = {int(rank): (host, cpus(allowed)) for rank, host, allowed in RANK_CPUS.findall(done.stdout)}
    assert sorted(ran) == sorted(planned), done.stdout
    for rank, line in planned.items():
        host, cores_bound = bound[rank]
        assert host == line.host, (rank, output)
        assert cores_bound == [(line.socket, core) for core in line.cores], (rank, output)
        # hwloc on that node: the PUs of the planned package and cores (logical indexes, as the rank file means them)
        cores = f"{line.cores[0]}-{line.cores[-1]}" if len(line.cores) > 1 else str(line.cores[0])
        pus = cluster.docker_exec(
            line.host, "hwloc-calc", "--physical-output", "--intersect", "pu", f"package:{line.socket}.core:{cores}"
        )
        assert ran[rank] == (line.host, cpus(pus)), (rank, pus, done.stdout)


def test_a_hostile_ranks_escape_sequences_reach_the_terminal_escaped(mpi_cluster, tmp_path):
    """Issue 33 finding 6, on real OpenMPI 5: each rank prints a window title, a screen clear and
    provision's own verdict line; launch --run shows every control character escaped (the pty's
    output, ranks' stdout and stderr together), and the real binding check still reads the reports."""
    cluster, common, _ = mpi_cluster
    hosts = HOSTS[5][:2]
    hostile = r'printf "\033]0;owned\007\033[2J\033[Hprovision: all 9 ranks bound as planned\r\n"; printf "\033[31mred\n" >&2'
    done = run_cli(
        "launch", f"1x{len(hosts)}x1", "--hosts", ",".join(hosts), *common, "--allow-no-gpu",
        "--rankfile", str(tmp_path / "h.rf"), "--report-bindings", "--run", "--", "sh", "-c", hostile,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout and "\r" not in done.stdout
    shown = "\\x1b]0;owned\\x07\\x1b[2J\\x1b[Hprovision: all 9 ranks bound as planned\\x0d\n"
    assert done.stdout.count(shown) == len(hosts) and done.stdout.count("\\x1b[31mred\n") == len(hosts), done.stdout
    assert f"provision: all {len(hosts)} ranks bound as planned" in done.stderr  # provision's own line, on stderr


SEED_FAILURE = {
    4: ["ORTE_ERROR_LOG: Not found"],  # the seed's failure, verbatim
    5: ["While parsing the rankfile, prterun encountered a line that specified a non-existent CPU", "Slots: 0:0-4"],
}


@pytest.mark.parametrize("version", [4, 5])
def test_rank_gen_10_core_assumption_fails_and_check_names_the_lines(mpi_cluster, tmp_path, version):
    cluster, _, facts_dir = mpi_cluster
    first, second = HOSTS[version][:2]
    # The seed's rank_gen 4x2x1 file (2 x 10-core sockets assumed), for these two hosts.
    body = "\n".join(seed_rankfile_body("4x2x1")).replace("sys-89074", first).replace("sys-89075", second) + "\n"
    rankfile = tmp_path / "4x2.rf"
    rankfile.write_text(body)
    (tmp_path / "4x2.hosts").write_text(f"{first} slots=4\n{second} slots=4\n")
    for name in ("4x2.rf", "4x2.hosts"):
        subprocess.run(["docker", "cp", str(tmp_path / name), f"{cluster.container(first)}:/tmp/{name}"], check=True)
    options = (
        ["-rf", "/tmp/4x2.rf"] if version == 4 else ["--map-by", "rankfile:file=/tmp/4x2.rf", "--hostfile", "/tmp/4x2.hosts"]
    )
    mpirun = subprocess.run(
        ["docker", "exec", "-u", "mpi", cluster.container(first), "mpirun", "-n", "8", *options, "hostname"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = " ".join((mpirun.stdout + mpirun.stderr).split())  # the messages are wrapped at 72 columns
    assert mpirun.returncode != 0, output
    for message in SEED_FAILURE[version]:
        assert message in output, output
    assert f"{first}\n" not in mpirun.stdout  # nothing ran

    checked = run_cli("rankfile", "--check", str(rankfile), "--facts-dir", str(facts_dir))
    assert checked.returncode == 1
    cores = int(cluster.docker_exec(first, "nproc"))
    expected_bad = [line.line for line in parse_rankfile(body) if line.socket >= 1 or max(line.cores) >= cores]
    reported = [int(m) for m in re.findall(r"4x2\.rf:(\d+):", checked.stdout)]
    assert reported == expected_bad and len(reported) == 8
    assert f"has cores 0-{cores - 1}" in checked.stdout and "has 1 socket(s)" in checked.stdout


def test_mixed_versions_are_refused_naming_each_hosts_version(mpi_cluster, tmp_path):
    _, common, _ = mpi_cluster
    done = run_cli(
        "launch",
        "1x4x1",
        "--hosts",
        "node1,m51,node2,m52",
        *common,
        "--allow-no-gpu",
        "--rankfile",
        str(tmp_path / "x.rf"),
        "--",
        "true",
    )
    assert done.returncode == 2 and done.stdout == ""
    versions = re.search(
        r"OpenMPI versions differ across hosts \((4\.1\.\d+) on node1, node2; (5\.0\.\d+) on m51, m52\)", done.stderr
    )
    assert versions, done.stderr
    print(f"mixed: {done.stderr.strip()}")


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


@pytest.mark.parametrize("version", [4, 5])
def test_ctrl_c_stops_the_remote_job_and_each_run_has_its_own_files(mpi_cluster, tmp_path, version):
    cluster, common, _ = mpi_cluster
    hosts = HOSTS[version][:2]
    dims = "1x2x1"
    args = ["launch", dims, "--hosts", ",".join(hosts), *common, "--allow-no-gpu", "--rankfile", str(tmp_path / "a.rf"), "--run"]
    job = subprocess.Popen(["provision", *args, "--", "sleep", "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(
            lambda: all(any(p.endswith(" sleep") for p in mpi_processes(cluster, h)) for h in hosts), 60, "both ranks to sleep"
        )
        run_dirs = cluster.docker_exec(hosts[0], "sh", "-c", "ls -d /home/mpi/.provision/*/", user="mpi").split()
        assert len(run_dirs) == 1

        # A second job with the same dims while the first runs: its own directory, the first's untouched.
        second = run_cli(*args[:-3], "--rankfile", str(tmp_path / "b.rf"), "--run", "--", *LIVES_A_MOMENT)
        assert second.returncode == 0, second.stderr
        assert sorted(re.findall(r"^(\w+)$", second.stdout, re.MULTILINE)) == sorted(hosts)
        second_dir = re.search(rf"(\.provision/{dims}\.\w+)/", second.stderr).group(1)
        assert f"/home/mpi/{second_dir}/" not in run_dirs
        assert cluster.docker_exec(hosts[0], "sh", "-c", "ls -d /home/mpi/.provision/*/", user="mpi").split() == run_dirs

        started = time.monotonic()
        job.send_signal(signal.SIGINT)  # what Ctrl-C does to the foreground process
        out, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert job.returncode != 0, (out, err)
    assert "interrupt sent to mpirun" in err
    wait_for(lambda: not any(mpi_processes(cluster, h) for h in hosts), 30, "mpirun and its ranks to end")
    print(f"OpenMPI {version}: Ctrl-C to no process left: {time.monotonic() - started:.1f}s")
    assert cluster.docker_exec(hosts[0], "sh", "-c", "ls -A /home/mpi/.provision", user="mpi") == ""  # run directories removed


@pytest.mark.parametrize("version", [4, 5])
def test_lost_connection_hangs_up_the_remote_job(mpi_cluster, tmp_path, version):
    """provision killed outright (no Ctrl-C handling at all): sshd hangs up mpirun's terminal."""
    cluster, common, _ = mpi_cluster
    hosts = HOSTS[version][:2]
    job = subprocess.Popen(
        [
            "provision",
            "launch",
            "1x2x1",
            "--hosts",
            ",".join(hosts),
            *common,
            "--allow-no-gpu",
            "--rankfile",
            str(tmp_path / "a.rf"),
            "--run",
            "--",
            "sleep",
            "600",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: all(any(p.endswith(" sleep") for p in mpi_processes(cluster, h)) for h in hosts), 60, "both ranks to sleep"
        )
    finally:
        job.kill()
        job.wait()
    wait_for(lambda: not any(mpi_processes(cluster, h) for h in hosts), 30, "mpirun and its ranks to end after the hangup")
    cluster.docker_exec(hosts[0], "sh", "-c", "rm -rf /home/mpi/.provision/*", user="mpi")  # the client could not clean up


@contextlib.contextmanager
def root_login(cluster, node: str):
    """Let the test key log in as root on ``node`` (the image says PermitRootLogin no), then undo it."""
    conf = "/etc/ssh/sshd_config.d/00-root-test.conf"  # sshd takes the first value it reads
    cluster.docker_exec(
        node,
        "sh",
        "-c",
        "install -d -m 700 /root/.ssh && install -m 600 /cluster/authorized_keys /root/.ssh/"
        f" && echo 'PermitRootLogin prohibit-password' > {conf} && pkill -HUP -o -x sshd",
    )
    time.sleep(0.5)
    wait_for_ssh({node: cluster.ports[node]})
    try:
        yield
    finally:
        cluster.docker_exec(node, "sh", "-c", f"rm -f {conf} /root/.ssh/authorized_keys && pkill -HUP -o -x sshd")
        time.sleep(0.5)
        wait_for_ssh({node: cluster.ports[node]})


ROOT_REFUSAL = {4: "mpirun has detected an attempt to run as root", 5: "prterun has detected an attempt to run as root"}


@pytest.mark.parametrize("version", [4, 5])
def test_root_is_said_clearly_and_allow_run_as_root_passes_openmpis_switch(mpi_cluster, tmp_path, version):
    cluster, common, facts_dir = mpi_cluster
    node = HOSTS[version][-1]
    # OpenMPI's own refusal and switch, for real on this version.
    refused = subprocess.run(
        ["docker", "exec", cluster.container(node), "mpirun", "-n", "1", "hostname"], capture_output=True, text=True
    )
    assert refused.returncode != 0 and ROOT_REFUSAL[version] in refused.stdout + refused.stderr
    allowed = subprocess.run(
        ["docker", "exec", cluster.container(node), "mpirun", "--allow-run-as-root", "-n", "1", "hostname"],
        capture_output=True,
        text=True,
    )
    assert allowed.returncode == 0 and allowed.stdout == f"{node}\n"

    inventory = tmp_path / "root.yml"
    inventory.write_text(cluster.inventory_yaml((node,)).replace("user: mpi", "user: root"))
    args = [
        "launch",
        "1x1x1",
        "--hosts",
        node,
        "-i",
        str(inventory),
        *common[2:],
        "--allow-no-gpu",
        "--rankfile",
        str(tmp_path / "r.rf"),
    ]
    with root_login(cluster, node):
        printed = run_cli(*args, "--", "hostname")
        assert printed.returncode == 0 and "--allow-run-as-root" not in printed.stdout  # never added silently
        assert (
            f"{node}: mpirun would run as root (login user root)" in printed.stderr
            and "pass --allow-run-as-root" in printed.stderr
        )
        run = run_cli(*args, "--run", "--", "hostname")
        assert run.returncode == 2 and run.stdout == "" and "$ mpirun" not in run.stderr  # refused before mpirun started
        assert f"error: {node}: mpirun would run as root (login user root)" in run.stderr
        run = run_cli(*args, "--allow-run-as-root", "--run", "--", *LIVES_A_MOMENT)
        assert run.returncode == 0, run.stdout + run.stderr
        # (as root in a container OpenMPI 4 also warns "failed to bind memory"; the rank runs)
        assert run.stdout.endswith(f"\n{node}\n") or run.stdout == f"{node}\n", run.stdout
        assert re.search(r"^\[\w+\] \$ mpirun -n 1 .* --allow-run-as-root ", run.stderr, re.MULTILINE)


# What each rank prints under the per-rank wrapper: the variables it got.
NIC_PROGRAM = [
    "sh",
    "-c",
    'echo "nic $OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_LOCAL_RANK $(hostname) cuda=$CUDA_VISIBLE_DEVICES '
    'ucx=$UCX_NET_DEVICES hca=$NCCL_IB_HCA ifname=$NCCL_SOCKET_IFNAME"',
]
NIC_LINE = re.compile(r"^nic (\d+) (\d+) (\w+) cuda=(\S*) ucx=(\S*) hca=(\S*) ifname=(\S*)$", re.MULTILINE)


@pytest.mark.parametrize("version", [4, 5])
def test_per_rank_wrapper_gives_each_rank_its_planned_gpu_and_nic(mpi_cluster, tmp_path, version):
    """The containers have no GPU and no RDMA device: their probed facts get the RDMA devices of a
    real sysfs capture (hwloc's mlx4_0 dump, two copies named as a two-HCA board) and two GPU
    entries standing in for GPUs. Everything else (hosts, cores, interfaces, OpenMPI) is probed."""
    import dataclasses

    from conftest import read_fixture
    from provision.facts.model import Gpu
    from provision.facts.nics import parse_sysfs_rdma
    from provision.probe.store import load_host, save_host

    cluster, common, facts_dir = mpi_cluster
    hosts = HOSTS[version]
    learners = min(int(cluster.docker_exec(hosts[0], "nproc")), 2)
    (real,) = parse_sysfs_rdma(read_fixture("captures", "hwloc-32em64t-mlx4", "sysfs-rdma.txt"))
    nic_facts = tmp_path / "facts"
    for host in hosts:
        facts = load_host(facts_dir, host)
        stand_in = "stand-in GPU (none in the container)"
        gpus = tuple(Gpu(i, stand_in, f"0000:0{i + 1}:00.0", None, None, None, None) for i in range(2))
        rdma = (real, dataclasses.replace(real, name="mlx4_1", pci_address="0000:83:00.0"))
        save_host(nic_facts, dataclasses.replace(facts, gpus=gpus, rdma=rdma), {})
    dims = f"{learners}x{len(hosts)}x1"
    done = run_cli(
        "launch", dims, "--hosts", ",".join(hosts), *common[:2], "--facts-dir", str(nic_facts), *common[4:],
        "--rankfile", str(tmp_path / f"{dims}.rf"), "--report-bindings", "--run", "--", *NIC_PROGRAM,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"all {learners * len(hosts)} ranks bound as planned" in done.stderr
    wrapper = (tmp_path / f"{dims}.nic.sh").read_text()
    assert "OMPI_COMM_WORLD_LOCAL_RANK" in wrapper
    got = {int(m[0]): m[1:] for m in NIC_LINE.findall(done.stdout)}
    assert sorted(got) == list(range(learners * len(hosts))), done.stdout
    planned = {line.rank: line for line in parse_rankfile((tmp_path / f"{dims}.rf").read_text())}
    for rank, (local, host, cuda, ucx, hca, ifname) in got.items():
        learner = int(local)
        # the host's GPUs in local-rank order, the same for every rank (device LOCAL_RANK its own);
        # ties (both HCAs at unknown distance to a stand-in GPU) spread for UCX: learner 0 -> mlx4_0,
        # 1 -> mlx4_1; NCCL_IB_HCA one value for every rank of every host: the host's rails (NVIDIA/nccl#1478)
        assert cuda.split(",")[learner] == str(learner), (rank, done.stdout)
        assert (host, cuda, ucx, hca, ifname) == (
            planned[rank].host,
            "0,1",
            f"mlx4_{learner}:1",
            "=mlx4_0:1,mlx4_1:1",
            "=eth0",
        ), (rank, done.stdout)


@contextlib.contextmanager
def key_moved_away(cluster, node: str):
    """The MPI user's private key on ``node`` renamed for the block (test set-up), then put back."""
    cluster.docker_exec(node, "mv", "/home/mpi/.ssh/id_ed25519", "/home/mpi/.ssh/id_ed25519.away")
    try:
        yield
    finally:
        cluster.docker_exec(node, "mv", "/home/mpi/.ssh/id_ed25519.away", "/home/mpi/.ssh/id_ed25519")


def test_nodes_that_cannot_ssh_each_other_get_no_tree_spawn_and_an_unreachable_host_is_named(mpi_cluster, tmp_path):
    cluster, common, _ = mpi_cluster
    hosts = HOSTS[5]
    # --no-doctor: doctor's pairwise check refuses nodes that cannot SSH each other outright; this
    # is launch's own fallback for when that check is skipped
    args = ["launch", "1x3x1", "--hosts", ",".join(hosts), *common, "--allow-no-gpu", "--report-bindings", "--no-doctor"]
    # sleep 1, not true: PRRTE 3.0 can miss a rank's exit within milliseconds of its start and
    # never return (its bug, not the tree's; provision.launch.mpirun._no_tree_spawn)
    args += ["--rankfile", str(tmp_path / "1x3x1.rf"), "--run", "--", "sleep", "1"]
    with key_moved_away(cluster, hosts[1]):  # m52 cannot reach m53: a daemon tree through m52 would fail
        done = run_cli(*args)
    said = " ".join(done.stderr.split())
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{hosts[1]} cannot SSH to {hosts[2]}" in said and "no tree spawn" in said
    assert "--prtemca plm_ssh_no_tree_spawn 1" in said and "all 3 ranks bound as planned" in said
    with key_moved_away(cluster, hosts[0]):  # the first host itself reaches nobody: said, not a hang
        started = time.monotonic()
        done = run_cli(*args)
    said = " ".join(done.stderr.split())
    assert done.returncode == 1 and time.monotonic() - started < 60, said
    assert f"cannot SSH without a prompt to {hosts[1]}, {hosts[2]}" in said or f"{hosts[2]}, {hosts[1]}" in said
    inventory = common[common.index("-i") + 1]
    assert f"(provision setup-cluster -i {inventory})" in said, said  # the hint pastes: this inventory


def test_openmpi5_daemons_skip_the_tree_when_nodes_cannot_ssh_each_other(cluster, tmp_path):
    """Six OpenMPI 5 nodes of which only the first holds the MPI key, PRRTE's routing tree radix
    set to 2 on the first (test set-up): at 6 hosts the tree is as deep as the default radix 64
    makes it at 128 hosts, so a daemon must SSH to others to start them."""
    prefix = f"nt{os.getpid()}n"
    try:
        names, _ = start_mpi_nodes(prefix, 6, "provision-node5:test", tmp_path, mesh=False)
        first = names[0]
        radix = "echo 'rml_base_radix = 2' >> /etc/openmpi/prte-mca-params.conf"
        subprocess.run(["docker", "exec", first, "sh", "-c", radix], check=True)
        hostfile = "".join(f"{name} slots=1\n" for name in names)
        put = ["docker", "exec", "-i", "-u", "mpi", first, "sh", "-c", "cat > /tmp/all.hosts"]
        subprocess.run(put, input=hostfile, text=True, check=True)
        # mpirun alone, tree on: a daemon that cannot SSH on fails the job (said, exit 255)
        plain = subprocess.run(
            ["docker", "exec", "-u", "mpi", first, "timeout", "120", "mpirun", "-n", "6", "--hostfile", "/tmp/all.hosts"]
            + ["--map-by", "node", "sleep", "1"],
            capture_output=True,
            text=True,
        )
        assert plain.returncode not in (0, 124), plain.stdout + plain.stderr
        assert "lost communication with a remote daemon" in " ".join(plain.stderr.split()), plain.stderr
        common = ["-i", str(tmp_path / "hosts.yml"), "--facts-dir", str(tmp_path / "facts")]
        common += ["--known-hosts", str(tmp_path / "known_hosts")]
        assert run_cli("probe", *names, *common).returncode == 0
        started = time.monotonic()
        done = run_cli(
            *["launch", "1x6x1", "--hosts", ",".join(names), *common, "--allow-no-gpu", "--report-bindings", "--no-doctor"],
            *["--rankfile", str(tmp_path / "1x6x1.rf"), "--run", "--", "sleep", "1"],
        )
        said = " ".join(done.stderr.split())
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"{names[1]} cannot SSH to {names[2]}" in said and "no tree spawn" in said
        assert "--prtemca plm_ssh_no_tree_spawn 1" in said and "all 6 ranks bound as planned" in said
        print(f"launch of 6 OpenMPI 5 nodes without tree spawn: {time.monotonic() - started:.1f}s")
    finally:
        stop_mpi_nodes(prefix, 6)

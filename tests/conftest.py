"""Shared fixtures. The `cluster` fixture starts the real sshd containers via pytest-docker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_support import ALL_NODES, CLUSTER_DIR, COMPOSE_FILE, Cluster, ensure_docker, prepare_material, wait_for_ssh  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def read_fixture(*parts: str) -> str:
    """Text of ``tests/fixtures/<parts>``."""
    return FIXTURES.joinpath(*parts).read_text()


def capture_dir(host: str) -> dict[str, str]:
    """All captures of ``tests/fixtures/captures/<host>`` as {name: text}."""
    return {p.stem: p.read_text() for p in (FIXTURES / "captures" / host).glob("*.txt")}


@pytest.fixture(scope="session")
def docker_compose_command() -> str:
    """Debian's docker-compose (v1); the v2 plugin is not in Debian bookworm."""
    return "docker-compose"


@pytest.fixture(scope="session")
def docker_compose_file() -> str:
    """The cluster's compose file."""
    return str(COMPOSE_FILE)


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    """A fixed-per-run project name so container names are predictable."""
    return f"provtest{os.getpid()}"


@pytest.fixture(scope="session")
def cluster_material() -> dict[str, str]:
    """Docker ready, image built, keys made; returns the node host keys."""
    ensure_docker()
    os.environ["CLUSTER_DIR"] = str(CLUSTER_DIR)
    return prepare_material()


@pytest.fixture(scope="session")
def docker_setup(cluster_material):
    """Start the containers (after the material they mount exists)."""
    return ["up -d"]


@pytest.fixture(scope="session")
def cluster(docker_services, docker_compose_project_name, cluster_material) -> Cluster:
    """The running cluster, with `down1` stopped (an unreachable host)."""
    ports = {node: docker_services.port_for(node, 22) for node in ALL_NODES}
    wait_for_ssh(ports)
    result = Cluster(ports, cluster_material, docker_compose_project_name)
    subprocess.run(["docker", "stop", "-t", "1", result.container("down1")], check=True, capture_output=True)
    result.stopped.add("down1")
    return result


@pytest.fixture
def cluster_files(cluster, tmp_path):
    """An inventory and a known_hosts that holds the true keys of every node but node3."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(cluster.inventory_yaml(ALL_NODES))
    known_hosts = tmp_path / "known_hosts"
    # node3 gets someone else's key: from the client's side, its key "changed".
    lines = [cluster.known_hosts_line(n) for n in ALL_NODES if n != "node3"]
    lines.append(cluster.known_hosts_line("node3", cluster.host_keys["node1"]))
    known_hosts.write_text("".join(lines))
    return inventory, known_hosts


@pytest.fixture(scope="session")
def slurm_cluster():
    """The real Slurm cluster of tests/slurm_support.py (ctl + sn1-sn3), shared by the Slurm modules."""
    from slurm_support import start_slurm_cluster, stop_slurm_cluster

    started = start_slurm_cluster(run_cli)
    yield started
    stop_slurm_cluster(started)


# How run_cli starts the CLI: in this process for the unit tier (set per test by _cli_in_process),
# the installed `provision` command as a real process elsewhere (the cluster tier, session fixtures).
_IN_PROCESS = False


@pytest.fixture(autouse=True)
def _cli_in_process(request):
    """Unit-tier tests run the CLI in process (Typer's CliRunner: no interpreter start per call);
    cluster-tier tests, and any run with PROVISION_TEST_SUBPROCESS=1, start the installed command."""
    global _IN_PROCESS
    _IN_PROCESS = request.node.get_closest_marker("cluster") is None and not os.environ.get("PROVISION_TEST_SUBPROCESS")
    yield
    _IN_PROCESS = False


def run_cli(*args: str, cwd: Path | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    """Run `provision ARGS`: in this process in the unit tier, else the installed command for real.
    Either way: exit status, stdout and stderr apart, as a :class:`subprocess.CompletedProcess`."""
    if _IN_PROCESS:
        return run_in_process(*args, cwd=cwd, input=input)
    return subprocess.run(["provision", *args], capture_output=True, text=True, cwd=cwd, input=input, timeout=300)


def run_in_process(
    *args: str, cwd: Path | None = None, input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`provision ARGS` in this process, isolated as Typer's CliRunner isolates a command (stdin
    from ``input``, stdout and stderr captured apart, ``env`` over os.environ), from ``cwd``;
    getpass reads the input too, as it does from a pipe. An exception that escapes is a traceback
    and exit 1, as in a real process."""
    import getpass
    import traceback

    from typer.testing import CliRunner

    from provision.cli import main, output

    def piped_getpass(prompt: str = "Password: ", stream=None) -> str:
        sys.stderr.write(prompt)
        return sys.stdin.readline().rstrip("\n")

    here = os.getcwd()
    runner = CliRunner()
    code = 0
    with runner.isolation(input=input, env={"COLUMNS": "80", **(env or {})}) as (stdout, stderr, _):
        output.stderr.cache_clear()  # a console made for these streams, as a new process makes one
        saved_getpass, getpass.getpass = getpass.getpass, piped_getpass
        try:
            if cwd is not None:
                os.chdir(cwd)
            main(list(args))
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except Exception:  # noqa: BLE001 - what a real process would print before exit 1
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            os.chdir(here)
            getpass.getpass = saved_getpass
            sys.stdout.flush()
            sys.stderr.flush()
        out, err = stdout.getvalue().decode(), stderr.getvalue().decode()
    return subprocess.CompletedProcess(["provision", *args], code, out, err)

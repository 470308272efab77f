"""NCCL's own rules for the launch environment, kept as data (fixtures/nccl_rules.json, each case
citing the file and lines at a commit, or the thread, commenter and date, it comes from, or saying
that it is our choice), run against the planner and the real sh wrapper; the file's form is
enforced here too. Then the user's -x lint, and a node's bad or hostile facts."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from rails_support import card_swapped, host as rail_host, with_ports
from test_plan_nics import eight_gpu, nic, run_wrapper

from conftest import FIXTURES, read_fixture
from plan_support import minsky
from provision.errors import PlanError, UnsafeValueError
from provision.facts.model import NetInterface, OpenMPI
from provision.facts.nics import parse_sysfs_rdma
from provision.launch.export_lint import _entries, _matches, export_warnings
from provision.launch.mpirun import openmpi_version
from provision.launch.wrapper import planned_cpus, wrapper_script
from provision.plans.dims import parse_dims
from provision.plans.nics import master_address, plan_nics
from provision.plans.rankfile import plan_rankfile

RULES = json.loads((FIXTURES / "nccl_rules.json").read_text())
CASES = [(f"{c['variable']}={c['value']}", c) for c in RULES["match"]] + [(c["id"], c) for c in RULES["plan"]]
FILE_CITE = {"repo", "commit", "path", "lines", "says"}
THREAD_CITE = {"thread", "by", "date", "says"}
REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
QUOTATION_MARKS = re.compile('["\u201c\u201d\u2018\u00ab\u00bb]')


def _lines(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    return int(first), int(last or first)


def citation_problems(case: dict) -> list[str]:
    """What keeps a case from being checkable: a source is a file at a commit with its lines, or a
    thread with its commenter and date; a quote sits inside the citation of the place it was copied
    from; our own words (says, our_choice, note, error) are never in quotation marks."""
    problems = [f"old form: {key} without its place" for key in ("source", "quote") if key in case]
    cites, ours = case.get("cites", []), case.get("our_choice", "")
    if not cites and not ours.strip():
        problems.append("neither a source nor our choice")
    for cite in cites:
        keys = set(cite) - {"quote"}
        if keys == FILE_CITE:
            first, last = _lines(cite["lines"]) if re.fullmatch(r"[1-9][0-9]*(-[1-9][0-9]*)?", cite["lines"]) else (1, 0)
            if not (REPO.fullmatch(cite["repo"]) and re.fullmatch(r"[0-9a-f]{40}", cite["commit"])):
                problems.append(f"not a repository at a commit: {cite['repo']}@{cite['commit']}")
            if not re.fullmatch(r"[\w.-]+(/[\w.-]+)*", cite["path"]) or first > last:
                problems.append(f"not a path and lines: {cite['path']}:{cite['lines']}")
        elif keys == THREAD_CITE:
            repo, _, number = cite["thread"].partition("#")
            if not (REPO.fullmatch(repo) and re.fullmatch(r"[1-9][0-9]*", number)):
                problems.append(f"not an issue or PR: {cite['thread']}")
            if not re.fullmatch(r"[A-Za-z0-9](-?[A-Za-z0-9])*", cite["by"]):  # a GitHub login
                problems.append(f"not a commenter: {cite['by']}")
            try:
                datetime.date.fromisoformat(cite["date"])
            except ValueError:
                problems.append(f"not a date: {cite['date']}")
        else:
            problems.append(f"neither a file at a commit nor a thread: {sorted(cite)}")
            continue
        if not cite["says"].strip() or QUOTATION_MARKS.search(cite["says"]):
            problems.append(f"says is empty or quotes: {cite['says']}")
        if "quote" in cite and not cite["quote"].strip():
            problems.append("an empty quote")
    problems += [
        f"{key} quotes: {case[key]}" for key in ("our_choice", "note", "error") if QUOTATION_MARKS.search(case.get(key, ""))
    ]
    return problems


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[i for i, _ in CASES])
def test_every_rule_cites_a_precise_source_or_says_it_is_our_choice(case):
    assert citation_problems(case) == []


def test_the_form_refuses_a_rule_without_its_place_or_with_our_sentence_quoted():
    nccl = {"repo": "NVIDIA/nccl", "commit": "5067397c2676d5aed50042fc39e5c8ee96eb0027", "path": "src/init.cc", "lines": "131"}
    assert citation_problems({"source": "NVIDIA/nccl#2428", "quote": "hangs"}) == [
        "old form: source without its place",
        "old form: quote without its place",
        "neither a source nor our choice",
    ]
    assert citation_problems({"cites": [{**nccl, "says": "x", "lines": "12-3"}]}) == ["not a path and lines: src/init.cc:12-3"]
    assert citation_problems({"cites": [{**nccl, "says": "x", "commit": "5067397c"}]}) == [
        "not a repository at a commit: NVIDIA/nccl@5067397c"
    ]
    thread = {"thread": "NVIDIA/nccl#1591", "by": "kiskra-nvidia", "date": "2025-02-03", "says": "x"}
    assert citation_problems({"cites": [{k: v for k, v in thread.items() if k != "by"}]}) == [
        "neither a file at a commit nor a thread: ['date', 'says', 'thread']"
    ]
    ours = 'NCCL chooses "each GPU\'s nearest NIC itself"'
    assert citation_problems({"cites": [{**thread, "says": ours}]}) == [f"says is empty or quotes: {ours}"]
    assert citation_problems({"our_choice": ours}) == [f"our_choice quotes: {ours}"]
    assert citation_problems({"cites": [{**thread, "date": "2025-02-30"}]}) == ["not a date: 2025-02-30"]
    assert citation_problems({"cites": [thread], "our_choice": "why"}) == []


def _checkout(repo: str) -> Path | None:
    """A local clone of ``repo`` under $PROVISION_CITED_REPOS (``owner+name/repo`` or ``owner/name``)."""
    root = os.environ.get("PROVISION_CITED_REPOS")
    if not root:
        return None
    owner, name = repo.split("/")
    return next((p for p in (Path(root, f"{owner}+{name}", "repo"), Path(root, owner, name)) if p.exists()), None)


QUOTED = [
    (f"{i}: {c['path']}:{c['lines']}", c) for i, case in CASES for c in case.get("cites", []) if "path" in c and "quote" in c
]


@pytest.mark.parametrize("cite", [c for _, c in QUOTED], ids=[i for i, _ in QUOTED])
def test_each_quote_from_a_file_is_at_its_lines(cite):
    """Run where the cited repositories are cloned (PROVISION_CITED_REPOS=DIR): each quote is in
    the file at that commit, within the lines it names (whitespace runs compared as one space)."""
    clone = _checkout(cite["repo"])
    if clone is None:
        pytest.skip(f"no clone of {cite['repo']} under $PROVISION_CITED_REPOS")
    text = subprocess.run(
        ["git", "-C", str(clone), "show", f"{cite['commit']}:{cite['path']}"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    first, last = _lines(cite["lines"])
    span = " ".join(" ".join(text[first - 1 : last]).split())
    assert " ".join(cite["quote"].split()) in span, (cite["path"], cite["lines"])


@pytest.mark.parametrize("case", RULES["match"], ids=[f"{c['variable']}={c['value']}" for c in RULES["match"]])
def test_values_are_read_as_nccl_reads_them(case):
    """The lint's parser, given NCCL's documented examples, uses what NCCL uses."""
    exclude, exact, entries = _entries(case["value"])
    used = []
    for candidate in case["names"]:
        name, _, port = candidate.partition(":")
        hit = any(_matches([name], entry, exact) and (p is None or not port or int(port) == p) for entry, p in entries)
        if hit != exclude:
            used.append(candidate)
    assert used == case["used"], case["cites"]


def _hosts(case):
    made = []
    for spec in case["hosts"]:
        if spec.get("roce"):
            rdma = parse_sysfs_rdma(read_fixture("handwritten", "roce-2port", "sysfs-rdma.txt"))
            facts = dataclasses.replace(minsky(spec["name"]), rdma=rdma, interfaces=nic(spec["name"]))
        else:
            facts = rail_host(spec)
        made.append(facts)
    return made


def _seen(case) -> dict[str, dict[str, str]]:
    """{host/local-rank: the variables that rank gets}, from the real wrapper run by sh."""
    plan = plan_rankfile(parse_dims(case["dims"]), _hosts(case), allow_no_gpu=case.get("allow_no_gpu", False))
    nics = plan_nics(plan, case.get("iface"), common_rails=case.get("common_rails", False))
    script = wrapper_script(plan, nics, own_gpu_only=case.get("own_gpu_only", False))
    seen = {}
    for rank in nics.ranks:
        launched = {
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank.local_rank), "OMPI_COMM_WORLD_RANK": str(rank.rank),
            "OMPI_COMM_WORLD_SIZE": str(plan.dims.learners),
        }  # fmt: skip
        seen[f"{rank.host}/{rank.local_rank}"] = run_wrapper(script, launched)
    return seen, nics


def _picked(env: dict[str, str], own_gpu_only: bool) -> int:
    """The GPU a program picks: item LOCAL_RANK of CUDA_VISIBLE_DEVICES (``cuda:LOCAL_RANK``), or
    item 0 (``cuda:0``) when the rank sees its own GPU alone."""
    return int(env["CUDA_VISIBLE_DEVICES"].split(",")[0 if own_gpu_only else int(env["LOCAL_RANK"])])


@pytest.mark.parametrize("case", RULES["plan"], ids=[c["id"] for c in RULES["plan"]])
def test_the_launch_environment_follows_nccls_rules(case):
    if "error" in case:
        with pytest.raises(PlanError) as error:
            _seen(case)
        assert case["error"] in str(error.value), case["id"]
        return
    seen, nics = _seen(case)
    for name in case.get("same_on_every_rank_of_a_host", []):
        for host in {key.split("/")[0] for key in seen}:
            assert len({env.get(name) for key, env in seen.items() if key.startswith(f"{host}/")}) == 1, (name, case["id"])
    for host, variables in case.get("host", {}).items():
        for key, env in seen.items():
            if key.startswith(f"{host}/"):
                assert {name: env.get(name) for name in variables} == variables, (key, case["id"])
    for key, variables in case.get("rank", {}).items():
        assert {name: seen[key].get(name) for name in variables} == variables, (key, case["id"])
    for host, picks in case.get("picks", {}).items():
        ranks = sorted((key for key in seen if key.startswith(f"{host}/")), key=lambda key: int(key.split("/")[1]))
        assert [_picked(seen[key], case.get("own_gpu_only", False)) for key in ranks] == picks, (host, case["id"])
    for name in case.get("absent", []):
        assert all(name not in env for env in seen.values()), (name, case["id"])
    if "note" in case:
        assert any(note.startswith(case["note"]) for note in nics.notes), nics.notes
    if case.get("no_notes"):
        assert nics.notes == (), nics.notes


def test_a_host_with_no_active_port_is_named_and_common_rails_disables_ib_for_every_host():
    hosts = [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24", down=tuple(range(10)))]
    plan = plan_rankfile(parse_dims("8x2x1"), hosts)
    with pytest.raises(PlanError, match=r"b: no usable RDMA port \(NCCL would use sockets there and RDMA on the others\)"):
        plan_nics(plan)
    nics = plan_nics(plan, common_rails=True)
    said = [n for n in nics.notes if "NCCL_IB_DISABLE=1" in n]
    assert said == ["no rail is common to every host: NCCL_IB_DISABLE=1 for this job (every host on sockets)"]
    env = run_wrapper(wrapper_script(plan, nics), {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_RANK": "1"})
    assert env["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in env


def test_rails_are_compared_by_place_a_card_swap_and_a_down_port_on_other_hosts():
    """Four hosts: a and c alike, b after a card swap (mlx5_1..8) with its GPU 4 rail DOWN, d with a
    slower port: the refusal, the notes and --common-rails by place, never by name."""
    b = card_swapped(eight_gpu("b", "10.0.0.2/24", down=(4,)))
    d = with_ports(eight_gpu("d", "10.0.0.4/24"), [6], rate="100 Gb/sec (4X EDR)")
    plan = plan_rankfile(parse_dims("8x4x1"), [eight_gpu("a"), b, eight_gpu("c", "10.0.0.3/24"), d])
    nics = plan_nics(plan)
    assert [n for n in nics.notes if not n.endswith("is DOWN: not used")] == [
        "b: no rail where a has mlx5_4:1 (mlx5_5:1 is DOWN): NCCL runs, and crosses rails there (which needs rails that "
        "meet at the top of the fabric; NCCL_IGNORE_NET_MISMATCH=0 makes NCCL refuse another rail count); "
        "--common-rails uses only the rails in places every host has",
        "d: mlx5_6:1 at 100 Gb/sec (4X EDR) where a's mlx5_6:1 is at 200 Gb/sec (4X HDR): "
        "NCCL runs every ring at its slowest rail's rate",
    ]
    assert nics.hosts["b"].hca() == "=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_6:1,mlx5_7:1,mlx5_8:1"
    common = plan_nics(plan, common_rails=True)
    assert {h: r.hca() for h, r in common.hosts.items() if h != "b"} == dict.fromkeys(
        "acd", "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"
    )
    assert common.hosts["b"].hca() == nics.hosts["b"].hca()
    assert [n.split(" (")[0] for n in common.notes if "--common-rails" in n] == [
        f"{h}: --common-rails left out mlx5_4:1" for h in "acd"
    ]
    # each rank's own port (UCX) is its nearest among its host's rails: b's GPU 4 rank shares GPU 5's
    assert [r.hca() for r in common.of_host("b")][4:6] == ["mlx5_6:1", "mlx5_6:1"]
    roce = with_ports(eight_gpu("e", "10.0.0.5/24"), range(10), link_layer="Ethernet")
    mixed = plan_rankfile(parse_dims("8x5x1"), [eight_gpu("a"), b, eight_gpu("c", "10.0.0.3/24"), d, roce])
    with pytest.raises(PlanError) as error:
        plan_nics(mixed)
    assert str(error.value).startswith("the hosts' rails cannot connect: a, c have mlx5_0:1, mlx5_1:1,")
    assert "e: mlx5_0:1 is Ethernet (RoCE) where a's mlx5_0:1 is InfiniBand; mlx5_1:1 is Ethernet (RoCE)" in str(error.value)
    assert plan_nics(mixed, common_rails=True).ib_disable  # no place has one link layer on every host


def test_different_gpu_counts_are_said_naming_the_host_and_variable():
    a = eight_gpu("a")
    b = eight_gpu("b", "10.0.0.2/24")
    b = dataclasses.replace(b, gpus=(*b.gpus, dataclasses.replace(b.gpus[7], index=8, bus_id="0000:30:00.0")))
    nics = plan_nics(plan_rankfile(parse_dims("8x2x1"), [a, b]))
    assert any(n.startswith("hosts have different GPU counts (b has 9; the others 8): CUDA_VISIBLE_DEVICES") for n in nics.notes)


def test_user_exports_are_linted_one_line_each_naming_host_and_value():
    a = dataclasses.replace(eight_gpu("a", down=(5,)), interfaces=(*nic("a"), NetInterface("ib1", True, ("10.1.0.1/24",))))
    plan = plan_rankfile(parse_dims("8x2x1"), [a, eight_gpu("b", "10.0.0.2/24", down=(5,))])
    nics = plan_nics(plan)
    warnings = export_warnings(
        plan,
        nics,
        ["NCCL_SOCKET_IFNAME=ib", "NCCL_IB_HCA=mlx5_1,=mlx5_5:1", "NCCL_IB_HCA=$LOCAL_HCA", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG"],
    )
    assert (
        "-x NCCL_SOCKET_IFNAME=ib: ib is a prefix: it matches ib0, ib1 (NCCL_SOCKET_IFNAME==ib0 for exactly one) on a" in warnings
    )
    assert any(w.startswith("-x NCCL_IB_HCA=mlx5_1,=mlx5_5:1: =mlx5_5 is absent on a, b") for w in warnings)
    assert any(w.startswith("-x NCCL_IB_HCA=$LOCAL_HCA: mpirun passes it as it is") for w in warnings)
    assert any(w.startswith("-x NCCL_IB_HCA=mlx5_1,=mlx5_5:1: replaces the plan's NCCL_IB_HCA on a, b") for w in warnings)
    assert any(w.startswith("-x CUDA_VISIBLE_DEVICES: the wrapper sets CUDA_VISIBLE_DEVICES itself on a, b") for w in warnings)
    assert not any("NCCL_DEBUG" in w for w in warnings)
    down = export_warnings(plan, nics, ["NCCL_IB_HCA==mlx5_5:1,mlx5_10"])
    assert "-x NCCL_IB_HCA==mlx5_5:1,mlx5_10: mlx5_5:1 is DOWN on a, b" in down
    assert "-x NCCL_IB_HCA==mlx5_5:1,mlx5_10: mlx5_10 is absent on a, b" in down
    # the user's value is the one every rank gets: the wrapper leaves it alone
    script = wrapper_script(plan, nics, skip=frozenset({"NCCL_IB_HCA"}))
    assert "NCCL_IB_HCA" not in run_wrapper(script, {"OMPI_COMM_WORLD_LOCAL_RANK": "0"})


def test_a_node_claiming_another_hosts_name_fails_alone_and_never_takes_its_entries():
    """issue 24 finding 3: node01 reporting hostname=node02 got node02's wrapper entries."""
    node01 = dataclasses.replace(eight_gpu("node01"), hostname="node02")
    node02 = eight_gpu("node02", "10.0.0.2/24")
    with pytest.raises(PlanError) as error:
        plan_nics(plan_rankfile(parse_dims("8x2x1"), [node01, node02]))
    assert str(error.value).startswith("node01: reports hostname 'node02', a name of node02 in this job")
    # hosts whose settings differ are keyed by inventory name, told by mpirun's rank: not by hostname
    b = dataclasses.replace(eight_gpu("node02", "10.0.0.2/24"), hostname="something-else")
    b = dataclasses.replace(b, gpus=tuple(dataclasses.replace(g, socket=1 - g.socket) for g in b.gpus))  # other cores
    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("node01"), b])
    script = wrapper_script(plan, plan_nics(plan))
    assert "something-else" not in script and "node02/0)" in script
    rank = next(s.rank for s in plan.slots() if s.host == "node02" and s.learner == 1)
    env = run_wrapper(script, {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_RANK": str(rank)})
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7" and "PROVISION_TEST_TASKSET" not in env  # mpirun binds
    torchrun = run_wrapper(script, {"LOCAL_RANK": "1", "PROVISION_HOST": "node01"})
    slot = next(s for s in plan.slots() if s.host == "node01" and s.learner == 1)
    assert torchrun["PROVISION_TEST_TASKSET"] == planned_cpus(plan)[slot.rank] and slot.socket == 0


def test_bad_node_data_fails_that_node_with_one_line_never_a_traceback():
    """issue 24 finding 9: `inet 172.17.0.5/99` and an OpenMPI version `4` raised out of launch."""
    a = eight_gpu("a")
    odd = dataclasses.replace(eight_gpu("b"), interfaces=(NetInterface("ib0", True, ("172.17.0.5/99",)),))
    with pytest.raises(PlanError, match=r"^b: ip-addr lists '172.17.0.5/99', not an IPv4 address with a prefix length$"):
        master_address([a, odd], "ib0")
    four = dataclasses.replace(eight_gpu("b"), openmpi=OpenMPI("4", ("openmpi-bin",), None, "test"))
    with pytest.raises(PlanError, match=r"^b: OpenMPI version '4' is not MAJOR.MINOR\[.PATCH\]$"):
        openmpi_version([a, four])


def test_every_form_gives_each_host_the_same_nccl_values_and_the_users_value_reaches_each():
    from provision.launch.forms import launch_form
    from provision.launch.mpirun import mpirun_argv

    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24")])
    nics = plan_nics(plan)
    per_host = ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
    scripts = {"mpirun": wrapper_script(plan, nics)}
    for fmt in ("horovod", "deepspeed", "torchrun"):
        form = launch_form(fmt, plan, nics, "8x2x1.rf", "RF", ["t.py"], export=["NCCL_DEBUG=INFO"])
        scripts[fmt] = next(f.text for f in form.files if f.path.endswith(".nic.sh"))
        assert "NCCL_DEBUG=INFO" in form.command, fmt  # horovod's --mpi-args, deepspeed's -x, torchrun's prefix
    seen = {}
    for script in scripts.values():
        for rank in nics.ranks:
            launched = {"OMPI_COMM_WORLD_LOCAL_RANK": str(rank.local_rank), "OMPI_COMM_WORLD_RANK": str(rank.rank)}
            env = run_wrapper(script, launched)
            seen.setdefault(rank.host, set()).add(tuple(env.get(name) for name in per_host))
    assert all(len(values) == 1 for values in seen.values()), seen
    argv = mpirun_argv(plan, "x.rf", ["t"], export=["NCCL_DEBUG=INFO"])
    assert argv[argv.index("NCCL_DEBUG=INFO") - 1] == "-x"
    with pytest.raises(UnsafeValueError, match="not NAME or NAME=VALUE"):
        mpirun_argv(plan, "x.rf", ["t"], export=["NCCL_DEBUG=IN\nFO"])


def test_cli_bad_node_data_is_one_line_naming_the_node_and_exit_2(tmp_path):
    from conftest import run_cli
    from provision.probe.store import save_host

    save_host(tmp_path / "facts", eight_gpu("a"), {})
    save_host(tmp_path / "facts", dataclasses.replace(eight_gpu("b", "10.0.0.2/24"), openmpi=OpenMPI("4", (), None, "test")), {})
    done = run_cli("launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(tmp_path / "facts"), "--", "t", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "b: OpenMPI version '4' is not MAJOR.MINOR[.PATCH]" in " ".join(done.stderr.split())
    torch = run_cli(
        "launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(tmp_path / "facts"), "--format", "torchrun", "--", "t",
        cwd=tmp_path,
    )  # fmt: skip
    assert torch.returncode == 0, torch.stderr  # torchrun runs no mpirun: OpenMPI's version is not asked
    save_host(tmp_path / "facts", dataclasses.replace(eight_gpu("b"), interfaces=nic("b", address="10.0.0.5/99")), {})
    bad = run_cli(
        "launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(tmp_path / "facts"), "--format", "torchrun", "--", "t",
        cwd=tmp_path,
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert "b: ip-addr lists '10.0.0.5/99', not an IPv4 address with a prefix length" in " ".join(bad.stderr.split())

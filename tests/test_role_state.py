"""Fact kinds of the roles: commands quote their argument. What the parsers accept and refuse (node
output is hostile) is in their data cases, tests/facts/{mount,nfsd,nfsmount,listening,df,pidfile}/."""

from provision.operations.base import StateKey
from provision.operations.state import state_command


def test_commands_quote_paths():
    assert "'/data/a b'" in state_command(StateKey("mount", "/data/a b"))
    assert "'/opt/x;rm'" in state_command(StateKey("df", "/opt/x;rm"))
    assert "H_616c696365" in state_command(StateKey("pidfile", "~alice/x.pid"))

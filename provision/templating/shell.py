"""Values kept out of shell code: the pure part of :func:`provision.templating.render_command`.
A small POSIX sh lexer places each value of a command as a shell variable reference, refusing a
value inside quotes, ``$(( ))``, a here-document or after a backslash; and the command is shown
with its values (for display only, never to run)."""

from __future__ import annotations

import re
import shlex

from provision.errors import TemplateError

VALUES_END = ": provision values end"  # the line after the assignments of a command's values
VARIABLE = "_pv{}"


def command_text(command: str) -> str:
    """The command as written, without the assignments of its values (the text that runs)."""
    head, marker, body = command.partition("\n" + VALUES_END + "\n")
    return body if marker else command


_REFERENCE = re.compile(r'"\$\{_pv(\d+)\}"')


def command_display(command: str) -> str:
    """The command for DISPLAY only (live output, recap, --diff): each value shown in place of its
    variable, as the one shell word it is passed as. Never run it: values are only ever passed as
    variables (:func:`render_command`). Callers mask secrets and control characters."""
    head, marker, body = command.partition("\n" + VALUES_END + "\n")
    if not marker:
        return command
    values = {}
    for word in shlex.split(head):  # the assignments render_command wrote, one shell word each
        name, _, value = word.partition("=")
        values[name] = value
    return _REFERENCE.sub(lambda m: shlex.quote(values.get(VARIABLE.format(m.group(1)), m.group(0))), body)


_COMMAND = ("top", "cmd", "tick", "param")  # contexts where the shell reads words and quotes
_OPENERS = {
    "top": ("$((", "$(", "${", "`", '"', "'"),
    "dq": ("$((", "$(", "${", "`"),
}
_CONTEXT = {"$((": "arith", "$(": "cmd", "${": "param", "`": "tick", '"': "dq", "'": "sq"}
_CLOSERS = {"dq": '"', "sq": "'", "tick": "`", "cmd": ")", "arith": ")", "param": "}"}


def place_values(text: str, values: list[str]) -> str:
    """Replace each value marker by its variable reference, checking the shell quoting context it
    sits in (a small POSIX sh lexer: quotes, ``$(...)``, backquotes, comments, here-documents)."""
    out: list[str] = []
    stack = ["top"]
    i, heredoc = 0, False
    while i < len(text):
        ch, where = text[i], stack[-1]
        if ch == "\x00":
            end = text.index("\x00", i + 1)
            number = int(text[i + 1 : end])
            escaped = i > 0 and text[i - 1] == "\\"
            if heredoc or where in ("dq", "sq", "arith") or escaped:
                place = {"dq": "double quotes", "sq": "single quotes", "arith": "$(( ))"}.get(where, "a here-document")
                place = "a backslash escape" if escaped and not heredoc and where in _COMMAND else place
                raise TemplateError(
                    f"value {number} of this shell command sits inside {place}, where it could end the quotes or "
                    "run as code: put the {{ }} outside any quotes (it is passed as one word)"
                )
            out.append('"${' + VARIABLE.format(number) + '}"')
            i = end + 1
            continue
        if ch == "\\" and where != "sq" and i + 1 < len(text) and text[i + 1] != "\x00":
            out.append(text[i : i + 2])
            i += 2
            continue
        if ch == _CLOSERS.get(where):
            stack.pop()
            out.append(ch)
            i += 1
            continue
        opener = next((o for o in _OPENERS.get("dq" if where == "dq" else "top", ()) if text.startswith(o, i)), None)
        if where in _COMMAND + ("dq",) and opener is not None:
            stack.append(_CONTEXT[opener])
            if opener == "$((":
                stack.append("arith")  # its two ")" each close one level
            out.append(opener)
            i += len(opener)
            continue
        if ch == "(" and where in ("top", "cmd", "arith"):
            stack.append("arith" if where == "arith" else "cmd")  # a subshell or a group: its ")" is its own
        elif ch == "#" and where in _COMMAND and (i == 0 or text[i - 1] in " \t\n;&|("):
            stop = text.find("\n", i)
            stop = len(text) if stop < 0 else stop
            out.append(text[i:stop])
            i = stop
            continue
        elif text.startswith("<<", i) and where in _COMMAND:
            heredoc = True
        out.append(ch)
        i += 1
    return "".join(out)

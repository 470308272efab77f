"""A person's own public keys in her ``authorized_keys``, as OpenSSH reads that file.

An inventory gives a cluster user her own keys (``ssh_keys``: key lines; ``ssh_keys_file``: a file
beside the inventory, one key line each, ``#`` comments and blank lines skipped). Each line is
checked as sshd reads it (openssh-portable 0ef0f5a8, ``auth2-pubkeyfile.c``
``auth_check_authkey_line``): optional options up to the first unquoted blank
(``authfile.c`` ``sshkey_advance_past_options``), each a flag or ``name="value"``
(``auth-options.c`` ``sshauthopt_parse``, ``misc.c`` ``opt_flag``/``opt_match``/``opt_dequote``),
then the key type, the base64 blob whose first field names that same type (``sshkey.c``
``sshkey_read``: "ensure type of blob matches type at start of line"), then a comment. A line
sshd would skip (bad options, a blob of another type) is refused here, naming it, so that no
run writes a key that never logs her in.

The lines provision writes for her end with the mark ``provision-own-key`` (in the comment, which
sshd ignores): the next run makes exactly the inventory's keys marked, so a key removed from the
inventory leaves her file. A line she wrote herself carries no mark and is kept, and a key she
already has is never added a second time::

    >>> blob = "AAAAC3NzaC1lZDI1NTE5AAAAILdzYX/58IzKduhE9JS9qvgN/7PFPnGFM4l70oClZpk8"
    >>> key = parse_key_line(f'from="10.0.0.0/8" ssh-ed25519 {blob} me')
    >>> key.options, key.type, key.comment
    ('from="10.0.0.0/8"', 'ssh-ed25519', 'me')
    >>> set_own_keys("ssh-rsa AAAA her-own-line\\n", [key]).splitlines()[1].endswith("me provision-own-key")
    True
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from provision.errors import ArgumentError
from provision.files import read_input_text
from provision.text import shown_value

OWN_MARK = "provision-own-key"
MAX_LINE = 16 * 1024  # an RSA-16384 key is ~2.8 KB of base64; certificates more
MAX_KEYS = 1000
MAX_FILE = 1024 * 1024
_TYPE = re.compile(r"[a-z0-9][a-z0-9@.-]{2,80}")
_BLOB = re.compile(r"[A-Za-z0-9+/]+={0,2}")
# auth-options.c sshauthopt_parse: the flags (opt_flag; those with allow_negate also as no-NAME)
# and the options with a quoted value (opt_match), matched case-insensitively as sshd does.
FLAGS = ("restrict", "cert-authority")
NEGATABLE = ("port-forwarding", "agent-forwarding", "x11-forwarding", "touch-required", "verify-required", "pty", "user-rc")
VALUED = ("command", "principals", "from", "expiry-time", "environment", "permitopen", "permitlisten", "tunnel")


@dataclass(frozen=True)
class KeyLine:
    """One authorized_keys line: its options (as written, or ""), key type, base64 blob, comment."""

    options: str
    type: str
    blob: str
    comment: str

    @property
    def identity(self) -> tuple[str, str]:
        """What sshd compares: the key itself (type and blob), not its options or comment."""
        return self.type, self.blob

    def line(self, mark: bool = False) -> str:
        """The line as written to the file, with provision's mark at its end when ``mark``."""
        words = [self.options] if self.options else []
        words += [self.type, self.blob]
        comment = " ".join(w for w in self.comment.split() if w != OWN_MARK)
        words += [comment] if comment else []
        words += [OWN_MARK] if mark else []
        return " ".join(words)


def _dequote(text: str, at: int) -> int:
    """misc.c opt_dequote: the index after the closing quote of the value starting at ``at``."""
    if at >= len(text) or text[at] != '"':
        raise ValueError("an option's value must be in double quotes")
    index = at + 1
    while index < len(text) and text[index] != '"':
        index += 2 if text[index] == "\\" and text[index + 1 : index + 2] == '"' else 1
    if index >= len(text):
        raise ValueError("an option's value lacks its closing quote")
    return index + 1


def check_options(options: str) -> str:
    """sshauthopt_parse's walk: flags and ``name="value"`` options separated by commas, up to a
    blank; anything else is sshd's "unknown key option" (the line would never log her in)."""
    index = 0
    lower = options.lower()
    while index < len(options):
        for flag in FLAGS + NEGATABLE + tuple(f"no-{n}" for n in NEGATABLE):
            if lower.startswith(flag, index):
                index += len(flag)
                break
        else:
            name = next((n for n in VALUED if lower.startswith(n + "=", index)), None)
            if name is None:
                word = re.split(r"[,=]", options[index:], maxsplit=1)[0]
                raise ValueError(f"unknown key option {shown_value(word[:40])} (sshd skips such a line)")
            index = _dequote(options, index + len(name) + 1)
        if index == len(options):
            break
        if options[index] != ",":
            raise ValueError(f"unknown key option after {shown_value(options[:index][-40:])} (sshd skips such a line)")
        index += 1
        if index == len(options):
            raise ValueError("the options end with a comma")
    return options


def _split_options(text: str) -> tuple[str, str]:
    """authfile.c sshkey_advance_past_options: the options run to the first blank outside quotes."""
    quoted, index = False, 0
    while index < len(text) and (quoted or text[index] not in " \t"):
        if text[index] == "\\" and text[index + 1 : index + 2] == '"':
            index += 1
        elif text[index] == '"':
            quoted = not quoted
        index += 1
    if quoted:
        raise ValueError("the options have an unterminated quote")
    return text[:index], text[index:].lstrip(" \t")


def _blob_type(blob: str) -> str:
    """The key type the blob names in its first field (a uint32 length, then that many bytes)."""
    try:
        data = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the key is not valid base64") from None
    if len(data) < 4:
        raise ValueError("the key is too short to be a key")
    (length,) = struct.unpack(">I", data[:4])
    if length > 128 or len(data) < 4 + length:
        raise ValueError("the key's data does not start with its type")
    return data[4 : 4 + length].decode("ascii", errors="replace")


def _key_at(text: str) -> tuple[str, str, str] | None:
    """(type, blob, comment) when ``text`` starts with a key whose blob matches its type."""
    words = text.split(None, 2)
    if len(words) < 2 or not _TYPE.fullmatch(words[0]) or not _BLOB.fullmatch(words[1]):
        return None
    named = _blob_type(words[1])
    if named != words[0]:
        raise ValueError(f"the key's data is a {shown_value(named)} key, not {words[0]} (sshd refuses the mismatch)")
    return words[0], words[1], (words[2] if len(words) > 2 else "").strip()


def parse_key_line(line: str) -> KeyLine:
    """One public key line as sshd reads it (module docstring), or :class:`ArgumentError`
    naming the problem; a line without options is tried as a key first, as sshd does."""
    text = line.strip()
    try:
        if not text or len(text) > MAX_LINE or any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in text):
            raise ValueError("empty, longer than 16 KiB, or holding control characters")
        key = _key_at(text)
        options = ""
        if key is None:
            options, rest = _split_options(text)
            check_options(options)
            key = _key_at(rest)
            if key is None:
                raise ValueError("no key type and base64 key after the options")
        return KeyLine(options, *key)
    except ValueError as error:
        raise ArgumentError(f"not a public key line ({error}): {shown_value(text[:60])}") from None


def keys_of(lines: list[str], where: str) -> list[KeyLine]:
    """Each line of ``lines`` parsed (:func:`parse_key_line`); an error names ``where[INDEX]``."""
    if len(lines) > MAX_KEYS:
        raise ArgumentError(f"{where}: more than {MAX_KEYS} keys")
    out = []
    for index, line in enumerate(lines):
        if not isinstance(line, str):
            raise ArgumentError(f"{where}[{index}]: {shown_value(line)} is not a key line (text)")
        try:
            out.append(parse_key_line(line))
        except ArgumentError as error:
            raise ArgumentError(f"{where}[{index}]: {error}") from None
    return out


def read_keys_file(path: Path) -> list[KeyLine]:
    """The keys of a controller file in authorized_keys format (``#`` comments and blank lines
    skipped); an error names ``path:LINE``. Never through a link, never a FIFO (it would hold
    the run), 1 MiB at most."""
    text = read_input_text(path, what="ssh_keys_file", limit=MAX_FILE)
    keys = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            keys.append(parse_key_line(line))
        except ArgumentError as error:
            raise ArgumentError(f"{path}:{number}: {error}") from None
    if len(keys) > MAX_KEYS:
        raise ArgumentError(f"{path}: more than {MAX_KEYS} keys")
    return keys


def own_keys(keys: list | None, keys_file: str | None, base_dir: str | None) -> list[KeyLine] | None:
    """A person's own keys from both sources (``keys_file`` relative to ``base_dir``, the
    inventory's folder), checked; None when neither is given (her marked lines left as they are)."""
    if keys is None and not keys_file:
        return None
    if keys is not None and not isinstance(keys, list):
        raise ArgumentError(f"ssh_keys must be a list of public key lines, not {shown_value(keys)}")
    found = keys_of(list(keys or []), "ssh_keys")
    if keys_file:
        path = Path(keys_file)
        found += read_keys_file(path if path.is_absolute() or not base_dir else Path(base_dir) / path)
    return found


def set_own_keys(text: str, keys: list[KeyLine]) -> str:
    """Pure: ``text`` (an authorized_keys) with the lines marked :data:`OWN_MARK` made exactly
    ``keys``: a marked line whose key is no longer wanted goes, a wanted key is written marked
    (with its options) unless an unmarked line of hers holds that key already (hers is kept as
    she wrote it). Every other line stays, in place; new ones go at the end."""
    wanted = {key.identity: key for key in keys}
    lines, present = [], set()
    for line in text.splitlines():
        marked = line.rstrip().endswith(" " + OWN_MARK)
        try:
            found = parse_key_line(line) if line.strip() and not line.lstrip().startswith("#") else None
        except ArgumentError:
            found = None
        if marked and (found is None or found.identity not in wanted):
            continue  # ours, no longer in the inventory
        if found is not None:
            if found.identity in present and marked:
                continue  # ours twice: once is enough
            present.add(found.identity)
            if marked:
                line = wanted[found.identity].line(mark=True)  # its options as the inventory says now
        lines.append(line)
    lines += [key.line(mark=True) for identity, key in wanted.items() if identity not in present]
    return "".join(line + "\n" for line in lines)

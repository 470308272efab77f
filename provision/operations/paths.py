"""Who can change where a path leads: the folders above every path a round trip reads, walked on
the node as the kernel resolves them, in one ``stat`` process for the whole round trip.

Root acts only where no other user can change what a name leads to. A path is walked from ``/``,
one name at a time, as the kernel resolves it: each link met is read (``readlink``) and its
target walked in turn (a root link into a folder a user controls is caught at the user's part),
``..`` goes up the folder really reached. A name is *stable* for its reader (root, or the user a
``~user/`` path is read as) when only root or the reader can replace it:

- its folder is not writable by anyone else (owned by root or the reader, not writable by
  others, nor by a group other than the reader's own, nor through an ACL: a folder whose group
  may write is read with ``ls -ld``, whose ``+`` says an ACL may let others write it, its mask
  being all the mode shows);
- or its folder is **sticky** (``/tmp``-like, 1777) and owned by root or the reader, and the
  name itself is root's or the reader's (others may add names there, never rename or remove
  these).

Every other case is refused: a folder on the way another user can write (sticky or not) whose
next name is not stable, a missing folder where another user could make it first, a link with a
control character in it, more than 40 links. ``fs.protected_symlinks`` is never relied on (it is
0 on many machines and in containers). The path's own name, in its last folder:

- a folder nobody else can write: safe (``V`` empty);
- a sticky folder of root's or the reader's: ``sticky`` (other users may put names in it, never
  replace root's): an operation acts there only on a name that is absent or the reader's own
  (:func:`provision.operations.base.refuse_unsafe_paths`);
- otherwise: ``below`` (refused).

A path that cannot be walked is ``changing|0|WHY`` (refused, never taken for missing): a name on
the way changed while it was read (``changed``: there, then gone; a link, then none), more than 40
links or a link whose text holds a newline or tab (``links``), more than 64 names or one over 1024
bytes (``long``: what a user's link can make of an admin's path is bounded, so is the walk's time).

The shell sets ``V_<n>`` for the n-th path (exported, so a read as a user sees it): empty, or
``below|MODE|OWNER|GROUP|0`` (``|acl`` where an ACL makes it so) / ``sticky|...`` and the folder
on the next line, or ``absent`` (a
``~user`` path whose user does not exist). All paths of a round trip are queued first and their
folders read by one ``stat``; only a link on the way costs a ``readlink`` (and a ``stat`` of what
it leads to), and a folder its reader's group may write an ``ls -ld``.

>>> "_pw /etc/ssh/ssh_known_hosts 0 0" in walk_prelude([(0, "/etc/ssh/ssh_known_hosts", "")], as_root=True)
True
"""

from __future__ import annotations

from provision.operations.base import check_path, home_var, shell_path, split_home

# The walk's sh functions (dash-compatible, no process but stat/readlink). C caches each name's
# lstat as lines "MODEHEX UID GID\tNAME" ("-": missing; a name there that stat did not report, made
# meanwhile or an argument list too long, is stat-ed again alone, and "?" if it still says nothing:
# refused, never taken for missing), L each link's text as lines "TEXT\tNAME"; Q queues names for
# the next stat. Names never hold a newline or a tab (checked paths; a link's text with one is
# refused), so a line is found exactly by its "\tNAME" end. Lookups go line by line and cut at the
# first tab: dash's ${x#*pattern} is quadratic in the length of x, never used on the caches.
WALK_LIB = r"""NL='
' T='	' C= Q= L=
_pq() { qb= qs=${1#/} qn=0
while [ -n "$qs" ]; do qc=${qs%%/*}; case $qs in */*) qs=${qs#*/};; *) qs=;; esac
case $qc in ''|.) continue;; ..) return;; esac; qb=$qb/$qc qn=$((qn + 1)); [ $qn -le 64 ] && [ ${#qb} -le 1024 ] || return
case "$NL$Q$NL$C" in *"$NL$qb$NL"*|*"$T$qb$NL"*) ;; *) Q=$Q$qb$NL;; esac; done; }
_pst() { [ -n "$Q" ] || return 0; IFS=$NL; set -f
for ql in $(stat -c '%f %u %g|%n' -- $Q 2>/dev/null); do qf=${ql%%|*}; C=$C$qf$T${ql#"$qf|"}$NL; done
for ql in $Q; do case "$NL$C" in *"$T$ql$NL"*) continue;; esac; qs=-
if [ -e "$ql" ] || [ -L "$ql" ]; then qs=$(stat -c '%f %u %g' -- "$ql" 2>/dev/null) || qs='?'; fi; C=$C$qs$T$ql$NL
done; unset IFS; set +f; Q=; }
_find() { r=; IFS=$NL; set -f; for e in $2; do case $e in *"$T$1") r=${e%%"$T"*}; break;; esac; done; unset IFS; set +f; }
_look() { case "$NL$C" in *"$T$1$NL"*) ;; *) Q=$Q$1$NL; _pst;; esac; _find "$1" "$C"; [ -n "$r" ] || r='?'; }
_at() { _look "$1"; case $r in -|'?') r='2 -1 -1';; esac; set -f; set -- $r; set +f; fm=$((0x$1)) fu=$2 fg=$3; }
_ow() { va=0; { [ "$fu" -ne 0 ] && [ "$fu" -ne "$ru" ]; } || [ $((fm & 2)) -ne 0 ] ||
{ [ $((fm & 16)) -ne 0 ] && { [ "$fg" -ne "$rg" ] || _acl; }; }; }
_acl() { case $(ls -ld -- "$cur" 2>/dev/null) in d?????????' '*|d?????????.' '*) return 1;; esac; va=acl; }
_kept() { [ $((fm & 512)) -ne 0 ] && { [ "$fu" -eq 0 ] || [ "$fu" -eq "$ru" ]; }; }
_vd() { o=$(stat -c '%U|%G' -- "$2" 2>/dev/null) || o="$fu|$fg"; m=$((fm & 4095))
V="$1|$(((m >> 9 & 7) * 1000 + (m >> 6 & 7) * 100 + (m >> 3 & 7) * 10 + (m & 7)))|$o|$va$NL$2"
[ $((fm & 18)) -ne 0 ] || [ "$fu" -eq 0 ] || W=$fu; }
_pw() { V= W= ru=$2 rg=$3 cur=/ k=0 j=0 s=${1%/*}; s=${s#/}; _at /
case $1 in *"$NL"*|*"$T"*) V="changing|0|links|?|0$NL/"; return 0;; esac
while [ -n "$s" ]; do c=${s%%/*}; case $s in */*) s=${s#*/};; *) s=;; esac; j=$((j + 1))
case $c in ''|.) continue;; ..) cur=${cur%/*}; cur=${cur:-/}; _at "$cur"; continue;; esac
n=${cur%/}/$c; [ $j -le 64 ] && [ ${#n} -le 1024 ] || { V="changing|0|long|?|0$NL$n"; return 0; }; _look "$n"
case $r in -) _ow && _vd below "$cur"; return 0;; '?') V="changing|0|changed|?|0$NL$n"; return 0;; esac
set -f; set -- $r; set +f
if _ow && ! { _kept && { [ "$2" -eq 0 ] || [ "$2" -eq "$ru" ]; }; }; then _vd below "$cur"
{ _kept && [ $((fm & 18)) -ne 0 ]; } && W=$2; return 0; fi
case $((0x$1 & 61440)) in
40960) k=$((k + 1)); case "$NL$L" in *"$T$n$NL"*) _find "$n" "$L"; t=$r;;
*) t=$(readlink -- "$n"; echo .); t=${t%?}; t=${t%"$NL"}; case $t in ''|*"$NL"*|*"$T"*) k=41;; *) L=$L$t$T$n$NL;; esac;; esac
[ -n "$t" ] || { V="changing|0|changed|?|0$NL$n"; return 0; }
[ $k -le 40 ] || { V="changing|0|links|?|0$NL$n"; return 0; }
case $t in /*) cur=/; _at /; s=${t#/}${s:+/$s};; *) s=$t${s:+/$s};; esac; _pq "$cur/$s"; _pst;;
16384) cur=$n fm=$((0x$1)) fu=$2 fg=$3;;
*) return 0;; esac; done
if _ow; then if _kept; then _vd sticky "$cur"; W=; else _vd below "$cur"; fi; fi; }
"""


LOGIN_USER = "@login"  # a fact's reader that is the login user (a task without become)


def _users(entries: list[tuple[int, str, str]]) -> list[str]:
    """Every user whose home or identity the walks need: the ``~user`` of a path, a reader."""
    users = {user for _n, path, _reader in entries if (user := split_home(path)[0]) is not None}
    users |= {reader for _n, _path, reader in entries if reader not in ("", "root", LOGIN_USER)}
    return sorted(users)


def _reader_ids(path: str, reader: str, as_root: bool | None) -> str:
    """The uid and gid words a walk checks against: its reader's (a user name: that user's; the
    login user in a root round trip: sudo's ``SUDO_UID``), else the user a ``~user`` path is
    read as in a root round trip, else the script's own user."""
    user = reader if reader not in ("", "root", LOGIN_USER) else split_home(path)[0] if not reader else None
    if user is not None and as_root:
        return f'"$U_{_hex(user)}" "$G_{_hex(user)}"'
    if reader == LOGIN_USER and as_root:
        return '"$SUDO_UID" "$SUDO_GID"'
    return "0 0" if as_root else '"$RU" "$RG"'


def _homes(users: list[str]) -> str:
    """One ``getent`` for every user named: ``H_<hex>`` (their home, exported for the reads done
    as them), ``U_<hex>`` and ``G_<hex>`` (uid and primary gid)."""
    if not users:
        return ""
    arms = " ".join(f"'{user}') H_{_hex(user)}=$h U_{_hex(user)}=$u G_{_hex(user)}=$g;;" for user in users)
    return (
        f"while IFS=: read -r n x u g c h e; do case $n in {arms} esac; done <<PROVISION_HOMES\n"
        f"$(getent passwd {' '.join(users)} 2>/dev/null)\nPROVISION_HOMES\n"
        f"export {' '.join(home_var(user) for user in users)}\n"
    )


def _hex(user: str) -> str:
    return home_var(user)[2:]


def walk_prelude(entries: list[tuple[int, str, str]], as_root: bool | None) -> str:
    """The sh that walks every path of ``entries`` (``(n, checked path, reader)``; reader "":
    the path's default one) with one ``stat`` process, and sets ``V_<n>`` for each (see the
    module docstring). ``as_root``: the script runs as root (a ``~user`` path is then checked
    for that user, as it is read as that user); False: as the login user; None: as whoever runs
    it (``id``)."""
    entries = [(n, check_path(path), reader) for n, path, reader in entries]
    lines = [WALK_LIB.rstrip("\n"), _homes(_users(entries)).rstrip("\n")]
    if as_root is not True:
        lines.append("RU=$(id -u) RG=$(id -g)")
    lines.append("Q=/$NL; " + "; ".join(f"_pq {shell_path(path)}" for _n, path, _reader in entries) + "; _pst")
    for n, path, reader in entries:
        walk = f"_pw {shell_path(path)} {_reader_ids(path, reader, as_root)}; V_{n}=$V"
        needed = [user for user in (split_home(path)[0],) if user]
        needed += [reader] if as_root and reader not in ("", "root", LOGIN_USER, *needed) else []
        if needed:  # a user that does not exist: the path is absent
            known = " && ".join(f'[ -n "${{{home_var(user)}}}" ]' for user in needed)
            walk = f"if {known}; then {walk}; else V_{n}=absent; fi"
        lines.append(walk)
    lines.append("export " + " ".join(f"V_{n}" for n, _path, _reader in entries))
    return "\n".join(line for line in lines if line) + "\n"


CONTENT_LIMIT = 4 * 1024 * 1024  # files larger than this are compared by sha256 only

# The path's own name, read by its reader after the walk (``V_<n>``): a link is reported, never
# followed; a file with other names that the reader does not own is "hard link"; in a sticky
# folder the entry is "own" (the reader's, one name) or "other" (its content never read). Content
# is read once, with dd's O_NOFOLLOW and O_NONBLOCK (a link or FIFO swapped in after the stat
# gives nothing, never a hang); the controller computes its sha256 (a file over the limit: its
# sha256 only).
_ENTRY = (
    'case $V_{n} in "") S=;; sticky*) printf \'%s\\n\' "$V_{n}"; S=1;; *) printf \'%s\\n\' "$V_{n}"; exit 0;; esac; p={word}; '
    'if [ -L "$p" ]; then [ -z "$S" ] || echo other; stat -c \'%F|%a|%U|%G|%s\' -- "$p"; exit 0; fi; '
    "l=$(stat -c '%F|%a|%U|%G|%s|%h' -- \"$p\" 2>/dev/null) || {{ echo absent; exit 0; }}; h=${{l##*|}}; l=${{l%|*}}; "
    'if [ -n "$S" ]; then if [ -O "$p" ] && {{ [ -d "$p" ] || [ "$h" -eq 1 ]; }}; then echo own; else echo other; S=2; fi; fi; '
    'if [ "$h" -gt 1 ] && [ -f "$p" ] && {{ [ ! -O "$p" ] || [ "$S" = 2 ]; }}; then echo "hard link|${{l#*|}}"; exit 0; fi; '
    "printf '%s\\n' \"$l\"; "
)
_CONTENT = (
    'if [ "$S" != 2 ] && [ -f "$p" ] && [ -r "$p" ]; then if [ "${{l##*|}}" -le {limit} ]; then printf =; '
    'dd if="$p" iflag=nofollow,nonblock bs=1M 2>/dev/null | base64 -w0; echo; '
    'else dd if="$p" iflag=nofollow,nonblock bs=1M 2>/dev/null | sha256sum; fi; fi'
)
_EXISTS = (
    'case $V_{n} in "") S=;; sticky*) printf \'%s\\n\' "$V_{n}"; S=1;; *) printf \'%s\\n\' "$V_{n}"; exit 0;; esac; p={word}; '
    'if [ -e "$p" ] || [ -L "$p" ]; then if [ -n "$S" ]; then if [ -O "$p" ]; then echo own; else echo other; fi; fi; '
    "echo present; else echo absent; fi"
)


def path_read(kind: str, n: int, path: str) -> str:
    """The sh that reads path fact ``kind`` (file, stat, exists) of the ``n``-th walked path, as
    its reader (after :func:`walk_prelude` set ``V_<n>``)."""
    word = shell_path(check_path(path))
    if kind == "exists":
        return _EXISTS.format(n=n, word=word)
    entry = _ENTRY.format(n=n, word=word)
    return entry + (_CONTENT.format(limit=CONTENT_LIMIT) if kind == "file" else "")


def path_command(kind: str, path: str) -> str:
    """A path fact's whole sh on its own (the walk of its one path, then its read), for whoever
    runs it: a round trip walks all its paths at once instead (:func:`walk_prelude`)."""
    return f"( {walk_prelude([(0, path, '')], None)}( {path_read(kind, 0, path)} ) )"

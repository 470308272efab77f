#!/bin/bash
# TEST STAND-IN for an Anaconda installer (no real one can be downloaded on the test machines).
# Same command-line contract as Anaconda's installers: `bash INSTALLER -b -p PREFIX` (batch
# mode; without -b it refuses, since it cannot ask for the licence). It writes a small prefix:
# bin/conda (a TEST STAND-IN too, see below), bin/python (a link to the system python3),
# conda-meta/, a few MB of package files, and its own .condarc, as the real installer does.
set -eu
batch=0; prefix="$HOME/anaconda3"
while [ $# -gt 0 ]; do
  case "$1" in
    -b) batch=1 ;;
    -p) prefix="$2"; shift ;;
    -u|-f) ;;
    *) echo "ERROR: did not recognize option '$1'" >&2; exit 2 ;;
  esac
  shift
done
[ "$batch" = 1 ] || { echo "this TEST STAND-IN installer only runs in batch mode (-b)" >&2; exit 2; }
if [ -e "$prefix" ] && [ -n "$(ls -A "$prefix" 2>/dev/null)" ]; then
  echo "ERROR: File or directory already exists: '$prefix'" >&2; exit 1
fi
echo "PREFIX=$prefix"
mkdir -p "$prefix/bin" "$prefix/conda-meta" "$prefix/pkgs" "$prefix/lib/python3/site-packages/standin"
ln -s "$(command -v python3)" "$prefix/bin/python"
printf '{"name": "conda", "version": "0.0.0-test-stand-in"}\n' >"$prefix/conda-meta/conda-0.0.0-test.json"
printf '{"name": "python", "version": "3"}\n' >"$prefix/conda-meta/python-3-test.json"
head -c 2097152 /dev/zero >"$prefix/lib/python3/site-packages/standin/payload.bin"
# Tests of an interrupted install (issue 15) make it stop here, half done, for that many seconds.
if [ -r /tmp/anaconda-test-stand-in.pause ]; then sleep "$(cat /tmp/anaconda-test-stand-in.pause)"; fi
printf 'channels:\n  - defaults\n# written by the installer\n' >"$prefix/.condarc"
cat >"$prefix/bin/conda" <<'CONDA'
#!/bin/bash
# TEST STAND-IN for conda: `conda create -p DIR --clone PREFIX [-y] [-q]`, `conda install PKG`
# (refused where the user cannot write, with the message of the seed), `conda --version`,
# `conda info --base`. Nothing else.
set -eu
base="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-}"; shift || true
case "$cmd" in
  --version) echo "conda 0.0.0 (TEST STAND-IN)" ;;
  info) [ "${1:-}" = --base ] && echo "$base" ;;
  create)
    dest=""; src=""
    while [ $# -gt 0 ]; do
      case "$1" in
        -p|--prefix) dest="$2"; shift ;;
        --clone) src="$2"; shift ;;
        --clone=*) src="${1#--clone=}" ;;
        -y|--yes|-q|--quiet) ;;
        *) echo "TEST STAND-IN conda: unsupported argument $1" >&2; exit 2 ;;
      esac
      shift
    done
    [ -n "$dest" ] && [ -n "$src" ] || { echo "usage: conda create -p DIR --clone PREFIX" >&2; exit 2; }
    [ -d "$src/conda-meta" ] || { echo "CondaValueError: no environment at $src" >&2; exit 1; }
    [ ! -e "$dest" ] || { echo "CondaValueError: prefix already exists: $dest" >&2; exit 1; }
    parent="$(dirname "$dest")"
    while [ ! -e "$parent" ]; do parent="$(dirname "$parent")"; done
    if [ ! -w "$parent" ]; then
      echo "CondaIOError: Missing write permissions in: $parent" >&2; exit 1
    fi
    echo "Source: $src"; echo "Destination: $dest"
    mkdir -p "$dest"
    (cd "$src" && tar --exclude=./pkgs --exclude=./.condarc --exclude=./.provision-installer -cf - .) | (cd "$dest" && tar -xf -)
    echo "cloned from $src" >"$dest/conda-meta/history"
    ;;
  install)
    # `conda install [-y] [-q] [-p DIR] PKG...`; jupyter_server gets bin/jupyter-server, a TEST
    # STAND-IN too (prints its version; refuses to serve: no real Jupyter here).
    target="${CONDA_PREFIX:-$base}"; pkgs=""
    while [ $# -gt 0 ]; do
      case "$1" in
        -p|--prefix) target="$2"; shift ;;
        -y|--yes|-q|--quiet) ;;
        -*) echo "TEST STAND-IN conda: unsupported argument $1" >&2; exit 2 ;;
        *) pkgs="$pkgs $1" ;;
      esac
      shift
    done
    [ -d "$target/conda-meta" ] || { echo "EnvironmentLocationNotFound: Not a conda environment: $target" >&2; exit 1; }
    if [ ! -w "$target" ]; then
      echo "CondaIOError: Missing write permissions in: $target" >&2
      echo "# You don't appear to have the necessary permissions to install packages" >&2
      echo "# into the install area '$target'." >&2
      echo "# However you can clone this environment into your home directory and" >&2
      echo "# then make changes to it." >&2
      echo "# \$ conda create -n my_root --clone=\"$target\"" >&2
      exit 1
    fi
    for pkg in $pkgs; do
      case "$pkg" in
        jupyter_server|jupyter-server)
          printf '{"name": "jupyter_server", "version": "0.0.0-test-stand-in"}\n' >"$target/conda-meta/jupyter_server-0.0.0-test.json"
          printf '#!/bin/sh\n# TEST STAND-IN for jupyter-server (written by the TEST STAND-IN conda)\n[ "${1:-}" = --version ] && { echo 0.0.0-test-stand-in; exit 0; }\necho "TEST STAND-IN jupyter-server: cannot serve" >&2; exit 2\n' >"$target/bin/jupyter-server"
          chmod 755 "$target/bin/jupyter-server"
          echo "TEST STAND-IN: installed jupyter_server into $target" ;;
        *) echo "TEST STAND-IN: would install $pkg into $target" ;;
      esac
    done
    ;;
  *) echo "TEST STAND-IN conda: unsupported command '$cmd'" >&2; exit 2 ;;
esac
CONDA
chmod 755 "$prefix/bin/conda"
echo "installation finished."

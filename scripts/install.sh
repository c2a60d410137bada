#!/usr/bin/env bash
# install.sh (make install / make uninstall): the site layout under PREFIX, with a manifest of
# every file installed so that uninstall removes exactly those (and the folders left empty).
#
#   scripts/install.sh install   BUILD PREFIX [DESTDIR]
#   scripts/install.sh uninstall PREFIX [DESTDIR]
#
# Layout: bin/slurm-train; lib/slurm/spank_train.so; etc/plugstack.conf.d/slurm-train.conf (an
# example line for the site's plugstack.conf); share/slurm-train/{examples,profiles}/;
# lib/python/slurm_train/ (the Python helper for exec); share/man/man1/slurm-train.1,
# share/man/man8/spank_train.8; share/doc/slurm-train/;
# modulefiles/slurm-train/VERSION.lua.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly MANIFEST=share/slurm-train/install-manifest

die() { echo "install.sh: error: $*" >&2; exit 1; }

action=${1:-}
case "$action" in
  install) [ $# -ge 3 ] || die "usage: install.sh install BUILD PREFIX [DESTDIR]"; build=$2 prefix=$3 destdir=${4:-} ;;
  uninstall) [ $# -ge 2 ] || die "usage: install.sh uninstall PREFIX [DESTDIR]"; prefix=$2 destdir=${3:-} ;;
  *) die "usage: install.sh install|uninstall ..." ;;
esac
[[ $prefix = /* ]] || die "PREFIX '$prefix' must be an absolute path"
root=$destdir$prefix

uninstall() {
  [ -f "$root/$MANIFEST" ] || die "no slurm-train installation under '$root' ($MANIFEST is missing)"
  local f dirs=()
  while IFS= read -r f; do
    rm -f "$root/$f"
    dirs+=("$(dirname "$root/$f")")
    # What Python compiled of a module on import (as a package manager removes it too).
    if [[ $f == *.py ]]; then
      rm -f "$(dirname "$root/$f")/__pycache__/$(basename "$f" .py)".*.pyc
      dirs+=("$(dirname "$root/$f")/__pycache__")
    fi
  done <"$root/$MANIFEST"
  rm -f "$root/$MANIFEST"
  dirs+=("$(dirname "$root/$MANIFEST")")
  # Folders this installation emptied, deepest first, never the prefix itself.
  local d
  for d in $(printf '%s\n' "${dirs[@]}" | sort -ur); do
    while [ "$d" != "$root" ] && [[ $d == "$root"/* ]] && rmdir "$d" 2>/dev/null; do d=$(dirname "$d"); done
  done
  echo "uninstalled slurm-train from $root"
}

if [ "$action" = uninstall ]; then uninstall; exit 0; fi

version=$(cat "$ROOT/VERSION")
[ -x "$build/bin/slurm-train" ] || die "$build/bin/slurm-train is not built (run make first)"
installed=()
put() { # put MODE SOURCE DEST (DEST relative to the prefix)
  install -D -m "$1" "$2" "$root/$3"
  installed+=("$3")
}
subst() { # subst MODE TEMPLATE DEST: @PREFIX@ and @VERSION@ filled in
  local tmp
  tmp=$(mktemp)
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" "$2" >"$tmp"
  put "$1" "$tmp" "$3"
  rm -f "$tmp"
}

put 755 "$build/bin/slurm-train" bin/slurm-train
plugin_line="# spank_train.so was not built (no /usr/include/slurm/spank.h at build time)"
if [ -f "$build/lib/spank_train.so" ]; then
  put 755 "$build/lib/spank_train.so" lib/slurm/spank_train.so
  plugin_line="required $prefix/lib/slurm/spank_train.so profiles=$prefix/share/slurm-train/profiles bind=soft"
fi
conf=$(mktemp)
cat >"$conf" <<CONF
# slurm-train $version: add this line to the cluster's plugstack.conf (or include this folder
# with "include $prefix/etc/plugstack.conf.d/*.conf"). Site arguments: man spank_train.
$plugin_line
CONF
put 644 "$conf" etc/plugstack.conf.d/slurm-train.conf
rm -f "$conf"
for f in "$ROOT"/examples/*.sbatch "$ROOT"/examples/*.toml "$ROOT"/examples/*.md "$ROOT"/examples/*.py; do
  [ -f "$f" ] && put 644 "$f" "share/slurm-train/examples/$(basename "$f")"
done
# The Python helper, pure Python: one folder for every Python 3 (the module file puts it on PYTHONPATH).
for f in "$ROOT"/python/slurm_train/*.py; do
  put 644 "$f" "lib/python/slurm_train/$(basename "$f")"
done
for f in "$ROOT"/examples/profiles/*.conf; do
  [ -f "$f" ] && put 644 "$f" "share/slurm-train/profiles/$(basename "$f")"
done
put 644 "$build/share/man/man1/slurm-train.1" share/man/man1/slurm-train.1
put 644 "$build/share/man/man8/spank_train.8" share/man/man8/spank_train.8
put 644 "$ROOT/README.md" share/doc/slurm-train/README.md
# The guides beside it, where the README's links find them.
for f in "$ROOT"/docs/*.md; do
  put 644 "$f" "share/doc/slurm-train/docs/$(basename "$f")"
done
subst 644 "$ROOT/scripts/modulefiles/slurm-train.lua.in" "modulefiles/slurm-train/$version.lua"

mkdir -p "$(dirname "$root/$MANIFEST")"
printf '%s\n' "${installed[@]}" >"$root/$MANIFEST"
echo "installed slurm-train $version under $root (${#installed[@]} files)"
echo "  users: module use $prefix/modulefiles; module load slurm-train"
echo "  admins: see $prefix/etc/plugstack.conf.d/slurm-train.conf"

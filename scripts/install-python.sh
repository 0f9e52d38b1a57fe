#!/usr/bin/env bash
# Makes `import clustersim` work for Debian's /usr/bin/python3 without PYTHONPATH (docs/python.md,
# "Install"): writes clustersim.pth, one line holding the absolute path of BUILD/python, into that
# interpreter's user site-packages (`python3 -m site --user-site`: ~/.local/lib/python3.X/
# site-packages, or under $PYTHONUSERBASE when set). No pip, no network, nothing copied: the
# module is used where the build put it, so a rebuild is picked up as it is, and csim-rank and the
# loadable modules are found beside it in the build tree.
#
# usage: scripts/install-python.sh [--build DIR] [--python PY] [--uninstall]
#   --build DIR   the build holding python/clustersim (default build/release)
#   --python PY   the interpreter (default /usr/bin/python3, the one the module is built for)
#   --uninstall   remove the clustersim.pth this script wrote
# Exit status: 0 done, 2 usage error, no built module, or no user site for that interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/install-python.sh [--build DIR] [--python PY] [--uninstall]"
build=build/release
py=/usr/bin/python3
uninstall=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="${2:?$usage}"; shift 2 ;;
    --python) py="${2:?$usage}"; shift 2 ;;
    --uninstall) uninstall=1; shift ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "install-python: unknown argument '$1'; $usage" >&2; exit 2 ;;
  esac
done

if ! site_dir=$("$py" -c 'import site, sys; sys.exit(3) if not site.ENABLE_USER_SITE else print(site.getusersitepackages())' 2>/dev/null); then
  echo "install-python: $py has no user site-packages (running with -s, PYTHONNOUSERSITE, or as another user); use PYTHONPATH=$build/python instead" >&2
  exit 2
fi
pth="$site_dir/clustersim.pth"

if [[ $uninstall -eq 1 ]]; then
  if [[ -f "$pth" ]]; then rm -f "$pth"; echo "install-python: removed $pth"; else echo "install-python: no $pth"; fi
  exit 0
fi

module_dir="$(cd "$build" 2>/dev/null && pwd)/python" || true
if ! compgen -G "$module_dir/clustersim/_clustersim*.so" > /dev/null; then
  echo "install-python: $build/python/clustersim holds no built module; build it first (cmake --build --preset release)" >&2
  exit 2
fi
mkdir -p "$site_dir"
# Written to a temporary file and renamed: an interpreter starting meanwhile reads the old file or
# the new one, never half of one.
tmp="$(mktemp "$site_dir/.clustersim.pth.XXXXXX")"
printf '%s\n' "$module_dir" > "$tmp"
mv -f "$tmp" "$pth"
echo "install-python: wrote $pth -> $module_dir"
# The check a user would make: the module imports from another folder, without PYTHONPATH.
found="$(cd / && env -u PYTHONPATH "$py" -c 'import clustersim; print(clustersim.__file__)')"
echo "install-python: $py imports clustersim from $found"

#!/usr/bin/env bash
# Installs the Debian 12 packages ClusterSim needs to build and test (only those missing).
# ccache: scripts/run-tests.sh compiles through it when present (a rerun on the same machine
# rebuilds only what changed). lld: the link step (CMakeLists.txt CSIM_LLD; docs/ci.md, "Build time"). clang + libclang-rt-14-dev (libFuzzer's runtime) + python3 (seed corpora): scripts/fuzz.sh.
set -euo pipefail
packages=(build-essential ccache lld cmake ninja-build pkg-config nlohmann-json3-dev libsimdjson-dev libcli11-dev catch2 zlib1g-dev libimgui-dev libglfw3-dev libstb-dev fonts-dejavu-core xvfb xauth mesa-utils libgl1-mesa-dri libopenmpi-dev openmpi-bin clang libclang-rt-14-dev python3 python3-dev pybind11-dev python3-pytest python3-pandas python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Installs the Debian packages eggroll needs to build, test and plot, if any are missing.
# Usage: scripts/install_deps.sh [extra-package ...]
set -euo pipefail
packages=(cmake g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libtomlplusplus-dev
          nlohmann-json3-dev zlib1g-dev libzstd-dev liblzma-dev gnuplot-nox fortunes dataset-fashion-mnist "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "eggroll: installing missing packages: ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "eggroll: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 1; fi
else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

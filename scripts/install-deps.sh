#!/usr/bin/env bash
# Installs the Debian 12 packages the build needs (see README). Does nothing when they are all
# present already, so it is cheap to call before every build.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libboost-filesystem-dev libabsl-dev libtomlplusplus-dev libhdf5-dev
  libopenmpi-dev openmpi-bin libcli11-dev libspdlog-dev libfmt-dev libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev coinor-libcbc-dev
  protobuf-compiler libprotobuf-dev
  python3 python3-h5py python3-numpy python3-matplotlib
  dataset-fashion-mnist
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2

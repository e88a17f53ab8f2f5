#!/usr/bin/env bash
# The checks that need a GPU, in one go: runs every test that exercises a GPU (CUDA kernels
# against their CPU twins, cuBLAS products, NCCL collectives with device and host buffers, GPU
# training against CPU training), then trains the tiny GPT with cuBLAS products and, with at
# least two GPUs, through NCCL, and runs the compressor bench. Logs and results go to OUTDIR
# (default gpu-check/).
#   scripts/gpu-check.sh [OUTDIR]            builds with CUDA here first (needs the dependencies)
#   scripts/gpu-check.sh --bundle [OUTDIR]   runs gpu-bundle/ made by scripts/gpu-bundle.sh on a
#                                            machine with only a driver and CUDA's libraries
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "${1:-}" = --bundle ]; then
  shift
  exec "$root/scripts/gpu-check-bundle.sh" "$@"
fi
out="${1:-$root/gpu-check}"
mkdir -p "$out"
build="${TESTBED_GPU_BUILD_DIR:-$root/build-gpu}"
jobs="${TESTBED_JOBS:-$(nproc)}"

nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >> "$out/nvidia-smi.txt"
{
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESTBED_BUILD_TESTS=ON \
    -DTESTBED_BUILD_BENCH=ON -DTESTBED_WITH_CUDA=ON &&
    cmake --build "$build" -- -j"$jobs"
} > "$out/build.log" 2>&1 || { echo "build failed: see $out/build.log"; tail -30 "$out/build.log"; exit 1; }

# Tests that touch the GPU (and their CPU-side neighbours, cheap enough to run again).
ctest --test-dir "$build" --output-on-failure -j1 \
  -R 'Cuda|Cublas|Nccl|Gemm|HostStag|ExecutorTest' > "$out/gpu-tests.log" 2>&1
tests_rc=$?
grep -E 'tests passed|Skipped|Failed|\*\*\*' "$out/gpu-tests.log" | tail -40

tb="$build/bin/testbed" bench="$build/bin/compressor_bench"
run() { "$@"; }
. "$root/scripts/gpu-runs.sh"
gpu_training_and_bench
echo "tests exit status $tests_rc; results in $out"
exit $tests_rc

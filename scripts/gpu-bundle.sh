#!/usr/bin/env bash
# Builds the GPU checks here, where the dependencies and nvcc are installed, into a bundle that
# runs on a GPU machine that has only a CUDA driver and CUDA's own libraries (cuBLAS, the CUDA
# runtime, NCCL) and can install nothing: scripts/gpu-check.sh --bundle runs it there.
#
# The bundle (gpu-bundle/, ignored by git) mirrors the build tree's bin/ and lib/ for the
# programs the GPU checks use, and holds in sys/ every shared library they need except CUDA's
# and the driver's, the C library and its loader included, so that the target's own C library
# version does not matter. The test programs carry this build's source and build paths
# (plugins, data); manifest.txt records them for gpu-check.sh to map onto the target's copy.
#   scripts/gpu-bundle.sh            # then carry gpu-bundle/ to the GPU machine
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TESTBED_GPU_BUILD_DIR:-$root/build-gpu}"
bundle="$root/gpu-bundle"
jobs="${TESTBED_JOBS:-$(nproc)}"
command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu-bundle: nvcc not found"; exit 1; }

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESTBED_BUILD_TESTS=ON \
  -DTESTBED_BUILD_BENCH=ON -DTESTBED_WITH_CUDA=ON > /dev/null
cmake --build "$build" -- -j"$jobs"
[ -e "$build/lib/libtestbed_cublas.so" ] || { echo "gpu-bundle: $build was built without CUDA"; exit 1; }

# The tests that touch a GPU, as ctest names them: one "program filter" line per test.
tests_json="$(ctest --test-dir "$build" -N --show-only=json-v1 -R 'Cuda|Cublas|Nccl|Gemm')"
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/testbed/plugins" "$bundle/sys"
python3 - "$tests_json" > "$bundle/gpu-tests.txt" << 'EOF'
import json, os, sys
for test in json.loads(sys.argv[1])["tests"]:
    program = os.path.basename(test["command"][0])
    filters = [a.split("=", 1)[1] for a in test["command"][1:] if a.startswith("--gtest_filter=")]
    if filters:
        print(program, filters[0])
EOF

programs="$(cut -d' ' -f1 "$bundle/gpu-tests.txt" | sort -u) testbed compressor_bench"
for p in $programs; do cp "$build/bin/$p" "$bundle/bin/"; done
cp -L "$build/lib/libtestbed.so" "$build/lib/libtestbed_cublas.so" "$bundle/lib/"
for plugin in "$build"/lib/testbed/plugins/*.so; do
  # The mpi plugin needs OpenMPI's runtime and its components: not part of the GPU checks.
  [ "$(basename "$plugin")" = mpi.so ] || cp "$plugin" "$bundle/lib/testbed/plugins/"
done
strip --strip-unneeded "$bundle"/bin/* "$bundle"/lib/*.so "$bundle"/lib/testbed/plugins/*.so 2> /dev/null || true

# Every library those need, except the driver's and CUDA's (the target provides those, matching
# its driver), copied with the names they are asked for by.
is_cuda() { case "$1" in libcuda.so* | libcudart.so* | libcublas*.so* | libnccl.so* | libnvidia*) return 0 ;; esac; return 1; }
for f in "$bundle"/bin/* "$bundle"/lib/*.so "$bundle"/lib/testbed/plugins/*.so; do
  LD_LIBRARY_PATH="$bundle/lib" ldd "$f" | awk '/=> \// { print $1, $3 } /^\t\/.*ld-linux/ { print "LOADER", $1 }'
done | sort -u | while read -r name path; do
  if [ "$name" = LOADER ]; then
    cp -L "$path" "$bundle/sys/ld-linux.so"
  elif ! is_cuda "$name" && [ ! -e "$bundle/lib/$name" ]; then
    cp -L "$path" "$bundle/sys/$name"
  fi
done
[ -e "$bundle/sys/ld-linux.so" ] || { echo "gpu-bundle: no dynamic loader found"; exit 1; }

{
  echo "source_dir=$root"
  echo "build_dir=$build"
  echo "cuda_libraries=$(ldd "$bundle/lib/testbed/plugins/nccl.so" "$bundle/lib/libtestbed_cublas.so" |
    awk '/=>/ { print $1 }' | grep -E '^lib(cudart|cublas|cublasLt|nccl)\.so' | sort -u | tr '\n' ' ')"
  echo "made=$(date -u +%Y-%m-%dT%H:%M:%SZ) revision=$(git -C "$root" rev-parse --short HEAD)"
} > "$bundle/manifest.txt"
echo "gpu-bundle: $(du -sh "$bundle" | cut -f1) in $bundle ($(wc -l < "$bundle/gpu-tests.txt") GPU tests)"

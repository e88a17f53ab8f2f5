#!/usr/bin/env bash
# scripts/gpu-check.sh --bundle [OUTDIR]: the GPU checks from gpu-bundle/ (scripts/gpu-bundle.sh)
# on a machine that has a CUDA driver and CUDA's libraries but none of the build's
# dependencies. Every program runs under the bundle's own dynamic loader and libraries; CUDA's
# libraries are the machine's. The paths the test programs were built with are mapped onto this
# copy of the repository with symbolic links where they do not exist here.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$root/gpu-bundle"
out="${1:-$root/gpu-check}"
mkdir -p "$out"
[ -f "$bundle/manifest.txt" ] || { echo "no gpu-bundle/ here: run scripts/gpu-bundle.sh where the build works"; exit 1; }
value() { sed -n "s/^$1=//p" "$bundle/manifest.txt"; }
source_dir="$(value source_dir)" build_dir="$(value build_dir)" cuda_libraries="$(value cuda_libraries)"
cp "$bundle/manifest.txt" "$out/bundle-manifest.txt"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >> "$out/nvidia-smi.txt"

# The build's paths, baked into the tests (plugins, data), onto this copy.
if [ "$source_dir" != "$root" ] && [ ! -e "$source_dir" ]; then
  mkdir -p "$(dirname "$source_dir")" && ln -s "$root" "$source_dir"
fi
case "$build_dir" in
  "$source_dir"/*) build_here="$root/${build_dir#"$source_dir"/}" ;;
  *) build_here="$build_dir" ;;
esac
[ -e "$build_here" ] || { mkdir -p "$(dirname "$build_here")" && ln -s "$bundle" "$build_here"; }
if [ "$(cd "$source_dir" 2> /dev/null && pwd -P)" != "$(cd "$root" && pwd -P)" ] ||
  [ "$(cd "$build_dir" 2> /dev/null && pwd -P)" != "$(cd "$bundle" && pwd -P)" ]; then
  echo "warning: $source_dir or $build_dir is not this copy and its bundle; tests that read them may fail" |
    tee "$out/path-warning.txt"
fi

# CUDA's libraries on this machine: the toolkit's, the Python packages', or the loader cache's.
search_dirs="/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64"
for site in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2> /dev/null); do
  search_dirs="$search_dirs $site/nvidia"
done
cuda_dirs=""
for lib in $cuda_libraries; do
  found="$(find $search_dirs -maxdepth 4 -name "$lib" 2> /dev/null | head -1)"
  if [ -z "$found" ]; then
    echo "$lib not found under: $search_dirs" | tee -a "$out/missing-libraries.txt"
    continue
  fi
  case ":$cuda_dirs:" in *":$(dirname "$found"):"*) ;; *) cuda_dirs="$cuda_dirs:$(dirname "$found")" ;; esac
done
libpath="$bundle/lib:$bundle/sys$cuda_dirs"
echo "library path: $libpath" > "$out/environment.txt"
run() { "$bundle/sys/ld-linux.so" --library-path "$libpath" "$@"; }
# Where each program's libraries come from (everything but the driver should be the bundle's
# or CUDA's).
for p in "$bundle"/bin/*; do
  echo "== $(basename "$p")"
  "$bundle/sys/ld-linux.so" --list --library-path "$libpath" "$p"
done > "$out/libraries.txt" 2>&1

export TESTBED_PLUGIN_PATH="$bundle/lib/testbed/plugins" TESTBED_DATA_PATH="$root/data" TESTBED_CONFIG_PATH="$root/configs"
tests_rc=0
for program in $(cut -d' ' -f1 "$bundle/gpu-tests.txt" | sort -u); do
  filter="$(awk -v p="$program" '$1 == p { print $2 }' "$bundle/gpu-tests.txt" | paste -sd: -)"
  run "$bundle/bin/$program" --gtest_filter="$filter" > "$out/$program.log" 2>&1 || tests_rc=1
  count() { grep -cE "^\\[ *$1 *\\] .*\\([0-9]+ ms\\)\$" "$out/$program.log"; }
  echo "$program: $(count OK) passed, $(count SKIPPED) skipped, $(count FAILED) failed"
done | tee "$out/gpu-tests-summary.txt"
grep -hE '^\[ *(FAILED|SKIPPED) *\] .*\([0-9]+ ms\)$' "$out"/*.log | sort -u | tee -a "$out/gpu-tests-summary.txt"

tb="$bundle/bin/testbed" bench="$bundle/bin/compressor_bench"
. "$root/scripts/gpu-runs.sh"
gpu_training_and_bench
echo "tests exit status $tests_rc; results in $out"
exit $tests_rc

# Sourced by gpu-check.sh and gpu-check-bundle.sh: the training runs and the bench that follow
# the GPU tests. Needs: root, out, tb (the testbed program), bench (compressor_bench), and a
# function run that starts a program (directly, or under the bundle's loader).
gpu_training_and_bench() {
  local gpus device
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
  # The tiny GPT with cuBLAS products beside the same runs on the CPU.
  for device in cuda cpu; do
    run "$tb" run "$root/experiments/tiny_gpt_parallel.toml" --set real.device=$device --only single --only tp4 \
      --only pp4-1f1b -o "$out/tiny_gpt_$device.h5" --fresh -q > "$out/tiny_gpt_$device.log" 2>&1
    run "$tb" show "$out/tiny_gpt_$device.h5" --csv > "$out/tiny_gpt_$device.csv" 2>&1
  done
  # Two pipeline stages through NCCL, one GPU each.
  if [ "${gpus:-0}" -ge 2 ]; then
    run "$tb" run "$root/experiments/tiny_gpt_parallel.toml" --only dp2-pp2 --set parallel.dp=1 \
      --set 'communicator={ use = "nccl", host_buffers = true }' -o "$out/tiny_gpt_nccl.h5" --fresh -q \
      > "$out/tiny_gpt_nccl.log" 2>&1
    run "$tb" show "$out/tiny_gpt_nccl.h5" --csv > "$out/tiny_gpt_nccl.csv" 2>&1
  fi
  run "$bench" > "$out/compressor_bench.txt" 2>&1 || true
}

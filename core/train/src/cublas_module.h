// The cuBLAS matrix products live in a module of their own (libtestbed_cublas.so), opened the
// first time a run asks for them (MakeCublasGemm), so that every other use of the testbed
// (a simulation, `testbed --version`) starts without loading cuBLAS. The module exports one C
// function returning this table; the loader checks the version first.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "testbed/train/gemm.h"

namespace testbed::train {

inline constexpr std::uint32_t kCublasModuleVersion = 1;
inline constexpr const char* kCublasModuleFile = "libtestbed_cublas.so";
inline constexpr const char* kCublasModuleEntry = "testbed_cublas_module";

struct CublasModule {
  std::uint32_t version;  // kCublasModuleVersion; stays the first member
  absl::StatusOr<std::unique_ptr<GemmBackend>> (*make)(int device);
};

}  // namespace testbed::train

// MakeCublasGemm with CUDA: opens the cuBLAS module (cublas_module.h) the first time, from
// $TESTBED_CUBLAS_MODULE, next to the library or program holding this code, its ../lib, or
// the loader's search path, and asks it for a backend.
#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cublas_module.h"
#include "cuda_launch.h"
#include "testbed/train/gemm.h"

namespace testbed::train {
namespace {

struct Loaded {
  const CublasModule* module = nullptr;
  std::string error;
};

Loaded Open() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("TESTBED_CUBLAS_MODULE"); env != nullptr && *env != 0) candidates.emplace_back(env);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MakeCublasGemm), &info) != 0 && info.dli_fname != nullptr) {
    const std::filesystem::path here = std::filesystem::path(info.dli_fname).parent_path();
    candidates.push_back((here / kCublasModuleFile).string());
    candidates.push_back((here / ".." / "lib" / kCublasModuleFile).string());
  }
  candidates.emplace_back(kCublasModuleFile);
  Loaded out;
  std::vector<std::string> tried;
  for (const std::string& path : candidates) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      tried.push_back(absl::StrCat(path, ": ", e != nullptr ? e : "cannot open"));
      continue;
    }
    auto entry = reinterpret_cast<const CublasModule* (*)()>(dlsym(handle, kCublasModuleEntry));
    const CublasModule* m = entry != nullptr ? entry() : nullptr;
    if (m == nullptr || m->version != kCublasModuleVersion) {
      tried.push_back(absl::StrCat(path, ": not a cuBLAS module of version ", kCublasModuleVersion));
      dlclose(handle);
      continue;
    }
    out.module = m;  // kept open for the process's life
    return out;
  }
  out.error = absl::StrCat("the cuBLAS module could not be opened (", absl::StrJoin(tried, "; "), ")");
  return out;
}

}  // namespace

int CudaDeviceCount() noexcept { return std::max(0, cuda_detail::DeviceCount()); }

absl::StatusOr<std::unique_ptr<GemmBackend>> MakeCublasGemm(int device) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = Open(); });
  if (loaded.module == nullptr) return absl::UnavailableError(absl::StrCat("cuBLAS matrix products: ", loaded.error));
  return loaded.module->make(device);
}

}  // namespace testbed::train

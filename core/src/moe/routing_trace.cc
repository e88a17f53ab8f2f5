// Reading and writing MoE routing traces (testbed/routing_trace.h) with HDF5's C++ API. The
// library is not built thread-safe on Debian, so every access holds one lock.
#include "testbed/routing_trace.h"

#include <H5Cpp.h>

#include <cmath>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace testbed {
namespace {

std::mutex& Hdf5Lock() {
  static std::mutex mu;
  return mu;
}

constexpr const char* kDataset = "tokens";

std::string ReadOptionalStr(const H5::DataSet& d, const std::string& name) {
  if (!d.attrExists(name)) return "";
  H5::Attribute a = d.openAttribute(name);
  std::string v;
  a.read(a.getStrType(), v);
  return v;
}

void WriteStr(H5::DataSet& d, const std::string& name, const std::string& value) {
  H5::StrType t(H5::PredType::C_S1, H5T_VARIABLE);
  H5::Attribute a = d.createAttribute(name, t, H5::DataSpace(H5S_SCALAR));
  a.write(t, value);
}

}  // namespace

Routing RoutingTrace::Slice(int iteration, int layer) const {
  Routing r;
  r.ranks = ranks;
  r.experts = experts;
  const size_t per = static_cast<size_t>(ranks) * static_cast<size_t>(experts);
  const size_t at = (static_cast<size_t>(iteration) * static_cast<size_t>(layers) + static_cast<size_t>(layer)) * per;
  r.tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(at), tokens.begin() + static_cast<std::ptrdiff_t>(at + per));
  return r;
}

absl::StatusOr<RoutingTrace> ReadRoutingTrace(const std::filesystem::path& path) {
  std::lock_guard<std::mutex> hold(Hdf5Lock());
  H5::Exception::dontPrint();
  const std::string p = path.string();
  const std::string where = absl::StrCat(p, ", dataset \"", kDataset, "\"");
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat(p, ": no such routing trace file (routing = even, synthetic or an HDF5 "
                                            "trace file)"));
  }
  bool hdf5 = false;
  try {
    hdf5 = H5::H5File::isHdf5(p);
  } catch (const H5::Exception&) {
    hdf5 = false;
  }
  if (!hdf5) return absl::DataLossError(absl::StrCat(p, ": not an HDF5 file; expected a routing trace (dataset \"", kDataset, "\")"));
  try {
    H5::H5File f(p, H5F_ACC_RDONLY);
    if (!f.nameExists(kDataset)) {
      return absl::InvalidArgumentError(absl::StrCat(p, ": no dataset \"", kDataset,
                                                     "\"; a routing trace holds tokens[iterations][MoE layers][ranks][experts]"));
    }
    H5::DataSet d = f.openDataSet(kDataset);
    H5::DataSpace space = d.getSpace();
    const int rank = space.getSimpleExtentNdims();
    if (rank != 4) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", rank, " dimensions; expected 4 (iterations, MoE layers, "
                                                     "ranks, experts)"));
    }
    hsize_t dims[4];
    space.getSimpleExtentDims(dims);
    const H5T_class_t cls = d.getTypeClass();
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": not numbers; expected token counts (float or integer)"));
    }
    RoutingTrace t;
    t.iterations = static_cast<int>(dims[0]);
    t.layers = static_cast<int>(dims[1]);
    t.ranks = static_cast<int>(dims[2]);
    t.experts = static_cast<int>(dims[3]);
    if (t.iterations < 1 || t.layers < 1 || t.ranks < 1 || t.experts < 1) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": shape ", absl::StrJoin(dims, dims + 4, " x "),
                                                     "; every dimension must be at least 1"));
    }
    t.tokens.resize(static_cast<size_t>(dims[0] * dims[1] * dims[2] * dims[3]));
    d.read(t.tokens.data(), H5::PredType::NATIVE_DOUBLE);
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      const double v = t.tokens[i];
      if (std::isfinite(v) && v >= 0) continue;
      const size_t e = i % dims[3], r = i / dims[3] % dims[2], l = i / dims[3] / dims[2] % dims[1],
                   it = i / dims[3] / dims[2] / dims[1];
      return absl::InvalidArgumentError(absl::StrCat(where, ": tokens[", it, "][", l, "][", r, "][", e, "] = ", v,
                                                     "; counts must be finite and >= 0"));
    }
    t.model = ReadOptionalStr(d, "model");
    t.source = ReadOptionalStr(d, "source");
    return t;
  } catch (const H5::Exception& e) {
    return absl::DataLossError(absl::StrCat(where, ": cannot read: ", e.getDetailMsg()));
  }
}

absl::Status WriteRoutingTrace(const std::filesystem::path& path, const RoutingTrace& t) {
  const size_t n = static_cast<size_t>(t.iterations) * static_cast<size_t>(t.layers) * static_cast<size_t>(t.ranks) *
                   static_cast<size_t>(t.experts);
  if (n == 0 || t.tokens.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": a routing trace of ", t.iterations, " x ", t.layers, " x ",
                                                   t.ranks, " x ", t.experts, " needs ", n, " counts; got ", t.tokens.size()));
  }
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      return absl::InternalError(absl::StrCat(path.string(), ": cannot create its directory: ", ec.message()));
    }
  }
  std::lock_guard<std::mutex> hold(Hdf5Lock());
  H5::Exception::dontPrint();
  try {
    H5::H5File f(path.string(), H5F_ACC_TRUNC);
    const hsize_t dims[4] = {static_cast<hsize_t>(t.iterations), static_cast<hsize_t>(t.layers),
                             static_cast<hsize_t>(t.ranks), static_cast<hsize_t>(t.experts)};
    H5::DataSet d = f.createDataSet(kDataset, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(4, dims));
    d.write(t.tokens.data(), H5::PredType::NATIVE_DOUBLE);
    if (!t.model.empty()) WriteStr(d, "model", t.model);
    if (!t.source.empty()) WriteStr(d, "source", t.source);
    f.close();
  } catch (const H5::Exception& e) {
    return absl::InternalError(absl::StrCat(path.string(), ": cannot write the routing trace: ", e.getDetailMsg()));
  }
  return absl::OkStatus();
}

}  // namespace testbed

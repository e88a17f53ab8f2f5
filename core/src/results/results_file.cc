#include "results/results_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <H5Cpp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "results/file_seal.h"
#include "testbed/status_macros.h"

namespace testbed {
namespace {

constexpr const char* kFormat = "testbed-results-1";

std::atomic<bool> g_abandoned{false};

H5::StrType VarStr() {
  H5::StrType t(H5::PredType::C_S1, H5T_VARIABLE);
  t.setCset(H5T_CSET_UTF8);
  return t;
}

H5::EnumType BoolType() {
  H5::EnumType t(H5::PredType::NATIVE_INT8);
  std::int8_t v = 0;
  t.insert("FALSE", &v);  // the names h5py maps to numpy bool
  v = 1;
  t.insert("TRUE", &v);
  return t;
}

void Attr(H5::H5Object& obj, const std::string& name, const std::string& value) {
  if (obj.attrExists(name)) obj.removeAttr(name);
  H5::StrType t = VarStr();
  H5::Attribute a = obj.createAttribute(name, t, H5::DataSpace(H5S_SCALAR));
  a.write(t, value);
}
void AttrUnsigned(H5::H5Object& obj, const std::string& name, std::uint64_t value) {
  if (obj.attrExists(name)) obj.removeAttr(name);
  H5::Attribute a = obj.createAttribute(name, H5::PredType::NATIVE_UINT64, H5::DataSpace(H5S_SCALAR));
  a.write(H5::PredType::NATIVE_UINT64, &value);
}
// An unsigned attribute; files written before it was stored unsigned hold its bits signed.
std::uint64_t ReadUnsigned(const H5::H5Object& obj, const std::string& name) {
  if (!obj.attrExists(name)) return 0;
  H5::Attribute a = obj.openAttribute(name);
  if (a.getTypeClass() == H5T_INTEGER && a.getIntType().getSign() == H5T_SGN_2) {
    std::int64_t v = 0;
    a.read(H5::PredType::NATIVE_INT64, &v);
    return static_cast<std::uint64_t>(v);
  }
  std::uint64_t v = 0;
  a.read(H5::PredType::NATIVE_UINT64, &v);
  return v;
}
void Attr(H5::H5Object& obj, const std::string& name, std::int64_t value) {
  if (obj.attrExists(name)) obj.removeAttr(name);
  H5::Attribute a = obj.createAttribute(name, H5::PredType::NATIVE_INT64, H5::DataSpace(H5S_SCALAR));
  a.write(H5::PredType::NATIVE_INT64, &value);
}
void Attr(H5::H5Object& obj, const std::string& name, double value) {
  if (obj.attrExists(name)) obj.removeAttr(name);
  H5::Attribute a = obj.createAttribute(name, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(H5S_SCALAR));
  a.write(H5::PredType::NATIVE_DOUBLE, &value);
}
void AttrBool(H5::H5Object& obj, const std::string& name, bool value) {
  if (obj.attrExists(name)) obj.removeAttr(name);
  H5::EnumType t = BoolType();
  std::int8_t v = value ? 1 : 0;
  H5::Attribute a = obj.createAttribute(name, t, H5::DataSpace(H5S_SCALAR));
  a.write(t, &v);
}
template <typename T>
void AttrArray(H5::H5Object& obj, const std::string& name, const std::vector<T>& values, const H5::DataType& type) {
  if (obj.attrExists(name)) obj.removeAttr(name);
  hsize_t n = values.size();
  H5::Attribute a = obj.createAttribute(name, type, H5::DataSpace(1, &n));
  if (n) a.write(type, values.data());
}
void AttrStrings(H5::H5Object& obj, const std::string& name, const std::vector<std::string>& values) {
  std::vector<const char*> ptrs;
  for (const auto& s : values) ptrs.push_back(s.c_str());
  AttrArray(obj, name, ptrs, VarStr());
}

void AttrParam(H5::H5Object& obj, const std::string& name, const ParamValue& v) {
  struct Visitor {
    H5::H5Object& obj;
    const std::string& name;
    void operator()(bool b) const { AttrBool(obj, name, b); }
    void operator()(std::int64_t i) const { Attr(obj, name, i); }
    void operator()(double d) const { Attr(obj, name, d); }
    void operator()(const std::string& s) const { Attr(obj, name, s); }
    void operator()(const std::vector<std::int64_t>& l) const { AttrArray(obj, name, l, H5::PredType::NATIVE_INT64); }
    void operator()(const std::vector<double>& l) const { AttrArray(obj, name, l, H5::PredType::NATIVE_DOUBLE); }
    void operator()(const std::vector<std::string>& l) const { AttrStrings(obj, name, l); }
  };
  std::visit(Visitor{obj, name}, v);
}

std::string ReadStr(const H5::H5Object& obj, const std::string& name, std::string fallback = "") {
  if (!obj.attrExists(name)) return fallback;
  H5::Attribute a = obj.openAttribute(name);
  std::string s;
  a.read(a.getStrType(), s);
  return s;
}
std::int64_t ReadInt(const H5::H5Object& obj, const std::string& name, std::int64_t fallback = 0) {
  if (!obj.attrExists(name)) return fallback;
  std::int64_t v = 0;
  obj.openAttribute(name).read(H5::PredType::NATIVE_INT64, &v);
  return v;
}
double ReadDouble(const H5::H5Object& obj, const std::string& name, double fallback = 0) {
  if (!obj.attrExists(name)) return fallback;
  double v = 0;
  obj.openAttribute(name).read(H5::PredType::NATIVE_DOUBLE, &v);
  return v;
}

// Reads back what AttrParam wrote: the HDF5 type and shape give the ParamValue alternative.
ParamValue ReadParam(const H5::Attribute& a) {
  H5::DataSpace space = a.getSpace();
  const bool scalar = space.getSimpleExtentType() == H5S_SCALAR;
  const size_t n = scalar ? 1 : static_cast<size_t>(space.getSimpleExtentNpoints());
  switch (a.getTypeClass()) {
    case H5T_ENUM: {
      std::int8_t v = 0;
      a.read(BoolType(), &v);
      return v != 0;
    }
    case H5T_INTEGER: {
      std::vector<std::int64_t> v(n);
      if (n) a.read(H5::PredType::NATIVE_INT64, v.data());
      if (scalar) return v[0];
      return v;
    }
    case H5T_FLOAT: {
      std::vector<double> v(n);
      if (n) a.read(H5::PredType::NATIVE_DOUBLE, v.data());
      if (scalar) return v[0];
      return v;
    }
    case H5T_STRING: {
      if (scalar) {
        std::string s;
        a.read(a.getStrType(), s);
        return s;
      }
      std::vector<char*> buf(n, nullptr);
      H5::StrType t = VarStr();
      if (n) a.read(t, buf.data());
      std::vector<std::string> out;
      for (char* p : buf) out.emplace_back(p ? p : "");
      if (n) H5::DataSet::vlenReclaim(buf.data(), t, space);
      return out;
    }
    default:
      return std::string("(unreadable attribute)");
  }
}

std::vector<std::string> ReadStringsAttr(const H5::H5Object& obj, const std::string& name) {
  std::vector<std::string> out;
  if (!obj.attrExists(name)) return out;
  ParamValue v = ReadParam(obj.openAttribute(name));
  if (auto* list = std::get_if<std::vector<std::string>>(&v)) out = std::move(*list);
  return out;
}

void WriteStrings(H5::Group& g, const std::string& name, const std::vector<std::string>& values) {
  if (g.nameExists(name)) g.unlink(name);
  std::vector<const char*> ptrs;
  for (const auto& s : values) ptrs.push_back(s.c_str());
  hsize_t n = ptrs.size();
  H5::DataSet ds = g.createDataSet(name, VarStr(), H5::DataSpace(1, &n));
  if (n) ds.write(ptrs.data(), VarStr());
}

std::vector<std::string> ReadStrings(const H5::DataSet& ds) {
  H5::DataSpace space = ds.getSpace();
  hsize_t n = 0;
  space.getSimpleExtentDims(&n);
  std::vector<char*> buf(n, nullptr);
  H5::StrType t = VarStr();
  if (n) ds.read(buf.data(), t);
  std::vector<std::string> out;
  for (char* p : buf) out.emplace_back(p ? p : "");
  if (n) H5::DataSet::vlenReclaim(buf.data(), t, space);
  return out;
}

struct MetricRec {
  const char* name;
  double value;
  const char* unit;
  const char* better;
};
struct MetricRecRead {
  char* name;
  double value;
  char* unit;
  char* better;
};
H5::CompType MetricType() {
  H5::CompType t(sizeof(MetricRec));
  t.insertMember("name", HOFFSET(MetricRec, name), VarStr());
  t.insertMember("value", HOFFSET(MetricRec, value), H5::PredType::NATIVE_DOUBLE);
  t.insertMember("unit", HOFFSET(MetricRec, unit), VarStr());
  t.insertMember("better", HOFFSET(MetricRec, better), VarStr());
  return t;
}
const char* BetterName(Better b) {
  switch (b) {
    case Better::kHigher: return "higher";
    case Better::kLower: return "lower";
    case Better::kNeither: return "";
  }
  return "";
}
Better BetterFrom(const std::string& s) {
  if (s == "higher") return Better::kHigher;
  if (s == "lower") return Better::kLower;
  return Better::kNeither;
}

struct RefRec {
  const char* arm;
  const char* point;
  double value;
};
struct RefRecRead {
  char* arm;
  char* point;
  double value;
};
H5::CompType RefType() {
  H5::CompType t(sizeof(RefRec));
  t.insertMember("arm", HOFFSET(RefRec, arm), VarStr());
  t.insertMember("point", HOFFSET(RefRec, point), VarStr());
  t.insertMember("value", HOFFSET(RefRec, value), H5::PredType::NATIVE_DOUBLE);
  return t;
}

void WriteHeader(H5::H5File& f, const ResultsHeader& h) {
  Attr(f, "format", std::string(kFormat));
  Attr(f, "testbed_version", std::string(TESTBED_VERSION_STRING));
  Attr(f, "experiment", h.experiment);
  Attr(f, "paper", h.paper);
  Attr(f, "source_file", h.source_file);
  Attr(f, "backend", h.backend);
  Attr(f, "metric", h.metric);
  Attr(f, "reference_metric", h.reference_metric);
  H5::Group root = f.openGroup("/");
  WriteStrings(root, "experiment_toml", {h.source_text});
  {
    H5::DataSet ds = root.openDataSet("experiment_toml");
    AttrStrings(ds, "sets", h.sets);
  }
  WriteStrings(root, "arms", h.arms);
  WriteStrings(root, "points", h.points);
  WriteStrings(root, "sweep_keys", h.sweep_keys);
  WriteStrings(root, "columns", h.columns);
  if (root.nameExists("references")) root.unlink("references");
  std::vector<RefRec> refs;
  for (const auto& r : h.references) refs.push_back(RefRec{r.arm.c_str(), r.point.c_str(), r.value});
  hsize_t n = refs.size();
  H5::DataSet ds = root.createDataSet("references", RefType(), H5::DataSpace(1, &n));
  if (n) ds.write(refs.data(), RefType());
}

ResultsHeader ReadHeader(const H5::H5File& f) {
  ResultsHeader h;
  h.experiment = ReadStr(f, "experiment");
  h.paper = ReadStr(f, "paper");
  h.source_file = ReadStr(f, "source_file");
  h.backend = ReadStr(f, "backend");
  h.metric = ReadStr(f, "metric");
  h.reference_metric = ReadStr(f, "reference_metric", "speedup");
  H5::Group root = f.openGroup("/");
  if (root.nameExists("experiment_toml")) {
    H5::DataSet ds = root.openDataSet("experiment_toml");
    auto v = ReadStrings(ds);
    if (!v.empty()) h.source_text = v[0];
    h.sets = ReadStringsAttr(ds, "sets");
  }
  if (root.nameExists("arms")) h.arms = ReadStrings(root.openDataSet("arms"));
  if (root.nameExists("points")) h.points = ReadStrings(root.openDataSet("points"));
  if (root.nameExists("sweep_keys")) h.sweep_keys = ReadStrings(root.openDataSet("sweep_keys"));
  if (root.nameExists("columns")) h.columns = ReadStrings(root.openDataSet("columns"));
  if (root.nameExists("references")) {
    H5::DataSet ds = root.openDataSet("references");
    H5::DataSpace space = ds.getSpace();
    hsize_t n = 0;
    space.getSimpleExtentDims(&n);
    std::vector<RefRecRead> buf(n);
    H5::CompType t = RefType();
    if (n) ds.read(buf.data(), t);
    for (const auto& r : buf) h.references.push_back({r.arm ? r.arm : "", r.point ? r.point : "", r.value});
    if (n) H5::DataSet::vlenReclaim(buf.data(), t, space);
  }
  return h;
}

void WriteTable(H5::Group& run, const Table& table) {
  if (run.nameExists(table.name)) run.unlink(table.name);
  H5::Group g = run.createGroup(table.name);
  for (const Column& c : table.columns) {
    hsize_t n = c.size();
    H5::DataSpace space(1, &n);
    H5::DSetCreatPropList props;
    if (n > 4096) {  // large tables (timelines) are chunked and compressed
      hsize_t chunk = 4096;
      props.setChunk(1, &chunk);
      props.setDeflate(4);
    }
    H5::DataSet ds;
    if (const auto* d = std::get_if<std::vector<double>>(&c.values)) {
      ds = g.createDataSet(c.name, H5::PredType::NATIVE_DOUBLE, space, props);
      if (n) ds.write(d->data(), H5::PredType::NATIVE_DOUBLE);
    } else if (const auto* i = std::get_if<std::vector<std::int64_t>>(&c.values)) {
      ds = g.createDataSet(c.name, H5::PredType::NATIVE_INT64, space, props);
      if (n) ds.write(i->data(), H5::PredType::NATIVE_INT64);
    } else {
      const auto& s = std::get<std::vector<std::string>>(c.values);
      std::vector<const char*> ptrs;
      for (const auto& x : s) ptrs.push_back(x.c_str());
      ds = g.createDataSet(c.name, VarStr(), space, props);
      if (n) ds.write(ptrs.data(), VarStr());
    }
    Attr(ds, "unit", c.unit);
  }
  AttrStrings(g, "columns", [&] {
    std::vector<std::string> names;
    for (const Column& c : table.columns) names.push_back(c.name);
    return names;
  }());
}

Table ReadTable(const H5::Group& run, const std::string& name) {
  Table t;
  t.name = name;
  H5::Group g = run.openGroup(name);
  std::vector<std::string> order;
  if (g.attrExists("columns")) {
    H5::Attribute a = g.openAttribute("columns");
    H5::DataSpace space = a.getSpace();
    hsize_t n = 0;
    space.getSimpleExtentDims(&n);
    std::vector<char*> buf(n, nullptr);
    H5::StrType st = VarStr();
    if (n) a.read(st, buf.data());
    for (char* p : buf) order.emplace_back(p ? p : "");
    if (n) H5::DataSet::vlenReclaim(buf.data(), st, space);
  }
  for (const std::string& col : order) {
    if (!g.nameExists(col)) continue;
    H5::DataSet ds = g.openDataSet(col);
    Column c;
    c.name = col;
    c.unit = ReadStr(ds, "unit");
    H5::DataSpace space = ds.getSpace();
    hsize_t n = 0;
    space.getSimpleExtentDims(&n);
    const H5T_class_t cls = ds.getTypeClass();
    if (cls == H5T_FLOAT) {
      std::vector<double> v(n);
      if (n) ds.read(v.data(), H5::PredType::NATIVE_DOUBLE);
      c.values = std::move(v);
    } else if (cls == H5T_INTEGER) {
      std::vector<std::int64_t> v(n);
      if (n) ds.read(v.data(), H5::PredType::NATIVE_INT64);
      c.values = std::move(v);
    } else {
      c.values = ReadStrings(ds);
    }
    t.columns.push_back(std::move(c));
  }
  return t;
}

void WriteRun(H5::H5File& f, const StoredRun& r) {
  H5::Group runs = f.nameExists("runs") ? f.openGroup("runs") : f.createGroup("runs");
  if (runs.nameExists(r.id)) runs.unlink(r.id);
  H5::Group g = runs.createGroup(r.id);
  Attr(g, "index", static_cast<std::int64_t>(r.index));
  Attr(g, "arm", r.arm);
  Attr(g, "point", r.point);
  Attr(g, "status", r.status);
  Attr(g, "error", r.error);
  AttrUnsigned(g, "seed", r.seed);
  Attr(g, "backend", r.backend);
  Attr(g, "git_revision", r.git_revision);
  Attr(g, "start_time", r.start_time);
  Attr(g, "wall_time_s", r.wall_time_s);
  Attr(g, "config_hash", r.config_hash);
  Attr(g, "config_toml", r.config_toml);
  H5::Group params = g.createGroup("params");
  for (const auto& [k, v] : r.params) AttrParam(params, k, v);

  std::vector<MetricRec> recs;
  for (const Metric& m : r.output.metrics.all()) {
    recs.push_back(MetricRec{m.name.c_str(), m.value, m.unit.c_str(), BetterName(m.better)});
  }
  hsize_t n = recs.size();
  H5::CompType mt = MetricType();
  H5::DataSet ds = g.createDataSet("metrics", mt, H5::DataSpace(1, &n));
  if (n) ds.write(recs.data(), mt);
  for (const Table& t : r.output.tables) WriteTable(g, t);
  if (!r.output.notes.empty()) WriteStrings(g, "notes", r.output.notes);
}

StoredRun ReadRun(const H5::Group& runs, const std::string& id, bool with_tables) {
  StoredRun r;
  r.id = id;
  H5::Group g = runs.openGroup(id);
  r.index = static_cast<int>(ReadInt(g, "index"));
  r.arm = ReadStr(g, "arm");
  r.point = ReadStr(g, "point");
  r.status = ReadStr(g, "status");
  r.error = ReadStr(g, "error");
  r.seed = ReadUnsigned(g, "seed");
  r.backend = ReadStr(g, "backend");
  r.git_revision = ReadStr(g, "git_revision");
  r.start_time = ReadStr(g, "start_time");
  r.wall_time_s = ReadDouble(g, "wall_time_s");
  r.config_hash = ReadStr(g, "config_hash");
  r.config_toml = ReadStr(g, "config_toml");
  if (g.nameExists("params")) {
    H5::Group params = g.openGroup("params");
    for (int i = 0; i < params.getNumAttrs(); ++i) {
      H5::Attribute a = params.openAttribute(static_cast<unsigned>(i));
      r.params.emplace_back(a.getName(), ReadParam(a));
    }
  }
  if (g.nameExists("metrics")) {
    H5::DataSet ds = g.openDataSet("metrics");
    H5::DataSpace space = ds.getSpace();
    hsize_t n = 0;
    space.getSimpleExtentDims(&n);
    std::vector<MetricRecRead> buf(n);
    H5::CompType mt = MetricType();
    if (n) ds.read(buf.data(), mt);
    for (const auto& m : buf) {
      r.output.metrics.Add(m.name ? m.name : "", m.value, m.unit ? m.unit : "", BetterFrom(m.better ? m.better : ""));
    }
    if (n) H5::DataSet::vlenReclaim(buf.data(), mt, space);
  }
  if (g.nameExists("notes")) r.output.notes = ReadStrings(g.openDataSet("notes"));
  if (with_tables) {
    for (hsize_t i = 0; i < g.getNumObjs(); ++i) {
      const std::string name = g.getObjnameByIdx(i);
      if (name == "params" || g.childObjType(name) != H5O_TYPE_GROUP) continue;
      r.output.tables.push_back(ReadTable(g, name));
    }
  }
  return r;
}

absl::Status CheckOurs(const std::filesystem::path& path) {
  const std::string p = path.string();
  bool is_hdf5 = false;
  try {
    is_hdf5 = H5::H5File::isHdf5(p);
  } catch (const H5::Exception&) {
    is_hdf5 = false;
  }
  if (!is_hdf5) {
    return absl::DataLossError(absl::StrCat(p, ": exists but is not a readable HDF5 file (corrupt or something "
                                            "else); it was left untouched: move it away or choose another "
                                            "[experiment] output"));
  }
  return absl::OkStatus();
}

absl::Status SyncAndRename(const std::filesystem::path& tmp, const std::filesystem::path& path) {
  int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path.string(), ": cannot replace the results file: ", ec.message()));
  int dfd = ::open(path.parent_path().empty() ? "." : path.parent_path().c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

constexpr const char* kTempInfix = ".tmp-";

// Closes a file just written; the close throws when its data cannot be flushed (disk full,
// file-size limit). A failed close is not retried by the destructor, which would crash the
// HDF5 library: the handle is abandoned (the temporary copy it wrote is removed by the caller).
void CloseOrAbandon(std::unique_ptr<H5::H5File> f) {
  try {
    f->close();
  } catch (const H5::Exception&) {
    (void)f.release();
    g_abandoned.store(true);
    throw;
  }
}

// A new file at `path` holding `runs` and nothing else (no dead space).
void WriteFresh(const std::filesystem::path& path, const ResultsHeader& header, const std::string& created,
                const std::vector<StoredRun>& runs) {
  auto f = std::make_unique<H5::H5File>(path.string(), H5F_ACC_TRUNC);
  Attr(*f, "created", created);
  WriteHeader(*f, header);
  for (const StoredRun& r : runs) WriteRun(*f, r);
  CloseOrAbandon(std::move(f));
}

std::filesystem::path TempPath(const std::filesystem::path& path) {
  return std::filesystem::path(absl::StrCat(path.string(), kTempInfix, ::getpid()));
}

// Temporary copies left by writers that died mid-write (`<file>.tmp-<pid>` of a process that
// no longer exists) are removed.
void RemoveStaleTemporaries(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  const std::string prefix = absl::StrCat(path.filename().string(), kTempInfix);
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH) std::filesystem::remove(entry.path(), ec);
  }
}

// An exclusive advisory lock on `<file>.lock` for as long as it lives: writers of one results
// file take turns, each copying the file as the previous one left it.
class WriteLock {
 public:
  static absl::StatusOr<std::unique_ptr<WriteLock>> Take(const std::filesystem::path& path) {
    const std::string lock_path = absl::StrCat(path.string(), ".lock");
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::PermissionDeniedError(absl::StrCat(lock_path, ": cannot open the lock of the results file: ",
                                                      std::strerror(errno)));
    }
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat(lock_path, ": cannot lock: ", std::strerror(err)));
    }
    return std::unique_ptr<WriteLock>(new WriteLock(fd));
  }
  ~WriteLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  WriteLock(const WriteLock&) = delete;
  WriteLock& operator=(const WriteLock&) = delete;

 private:
  explicit WriteLock(int fd) : fd_(fd) {}
  int fd_;
};

absl::StatusOr<ResultsFile::Contents> ReadHdf5(const std::filesystem::path& path, bool with_tables);

// Reads an unsealed file in a child process, which writes what it read into a fresh, sealed
// copy that this process then reads: a file that crashes or hangs the HDF5 library is refused
// here instead of taking this process down, and a read that corrupted the child's memory
// without crashing it never runs here at all.
absl::StatusOr<ResultsFile::Contents> ReadThroughChild(const std::filesystem::path& path, bool with_tables) {
  static std::atomic<int> copies{0};
  const std::filesystem::path copy = std::filesystem::temp_directory_path() /
                                     absl::StrCat("testbed-read-", ::getpid(), "-", copies++, ".h5");
  int fds[2];
  if (::pipe(fds) != 0) return ReadHdf5(path, with_tables);  // cannot isolate: read it here
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return ReadHdf5(path, with_tables);
  }
  if (pid == 0) {
    ::close(fds[0]);
    auto c = ReadHdf5(path, /*with_tables=*/true);
    if (!c.ok()) {
      const std::string msg = absl::StrCat(static_cast<int>(c.status().code()), " ", c.status().message());
      (void)!::write(fds[1], msg.data(), msg.size());
      ::_exit(3);
    }
    try {
      std::string created;
      {
        H5::H5File f(path.string(), H5F_ACC_RDONLY);
        created = ReadStr(f, "created");
      }
      WriteFresh(copy, c->header, created, c->runs);
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(results::Seal(copy).ok() ? 0 : 4);
  }
  ::close(fds[1]);
  std::error_code ec;
  auto cleanup = [&] { std::filesystem::remove(copy, ec); };
  int status = 0;
  for (int waited_ms = 0;; waited_ms += 5) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      ::close(fds[0]);
      cleanup();
      return absl::InternalError(absl::StrCat(path.string(), ": lost the process reading it"));
    }
    if (waited_ms >= 60000) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ::close(fds[0]);
      cleanup();
      return absl::DataLossError(absl::StrCat(path.string(), ": corrupt results file: reading it did not finish "
                                              "within 60 s; it was left untouched"));
    }
    ::usleep(5000);
  }
  std::string reported;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) reported.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  if (WIFSIGNALED(status)) {
    cleanup();
    return absl::DataLossError(absl::StrCat(path.string(), ": corrupt results file: reading it crashed the HDF5 "
                                            "library (signal ", WTERMSIG(status), "); it was left untouched"));
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 3) {
    cleanup();
    const size_t space = reported.find(' ');
    const int sc = space == std::string::npos ? 0 : std::atoi(reported.substr(0, space).c_str());
    const std::string msg = space == std::string::npos ? reported : reported.substr(space + 1);
    return absl::Status(sc > 0 && sc <= 16 ? static_cast<absl::StatusCode>(sc) : absl::StatusCode::kDataLoss, msg);
  }
  if (code != 0) {
    cleanup();
    return absl::DataLossError(absl::StrCat(path.string(), ": corrupt results file: what could be read of it "
                                            "could not be copied; it was left untouched"));
  }
  auto sealed = results::CheckSeal(copy);
  auto c = sealed.ok() && *sealed == results::SealState::kSealed
               ? ReadHdf5(copy, with_tables)
               : absl::StatusOr<ResultsFile::Contents>(absl::DataLossError(
                     absl::StrCat(path.string(), ": corrupt results file: its copy did not check")));
  cleanup();
  return c;
}

}  // namespace

absl::StatusOr<ResultsFile::Contents> ResultsFile::Read(const std::filesystem::path& path, bool with_tables) {
  H5::Exception::dontPrint();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path.string(), ": no such results file"));
  }
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": is a directory, not a results file"));
  }
  TESTBED_ASSIGN_OR_RETURN(const results::SealState seal, results::CheckSeal(path));
  if (seal == results::SealState::kUnsealed) return ReadThroughChild(path, with_tables);
  return ReadHdf5(path, with_tables);
}

namespace {

absl::StatusOr<ResultsFile::Contents> ReadHdf5(const std::filesystem::path& path, bool with_tables) {
  H5::Exception::dontPrint();
  if (auto s = CheckOurs(path); !s.ok()) return s;
  try {
    H5::H5File f(path.string(), H5F_ACC_RDONLY);
    if (ReadStr(f, "format") != kFormat) {
      return absl::FailedPreconditionError(absl::StrCat(path.string(), ": an HDF5 file, but not a testbed results file "
                                                        "(no format attribute '", kFormat, "')"));
    }
    ResultsFile::Contents c;
    c.header = ReadHeader(f);
    if (f.nameExists("runs")) {
      H5::Group runs = f.openGroup("runs");
      for (hsize_t i = 0; i < runs.getNumObjs(); ++i) {
        c.runs.push_back(ReadRun(runs, runs.getObjnameByIdx(i), with_tables));
      }
    }
    std::sort(c.runs.begin(), c.runs.end(), [](const StoredRun& a, const StoredRun& b) { return a.index < b.index; });
    return c;
  } catch (const H5::Exception& e) {
    return absl::DataLossError(absl::StrCat(path.string(), ": cannot read the results file: ", e.getDetailMsg()));
  }
}

}  // namespace

absl::StatusOr<ResultsFile> ResultsFile::Open(const std::filesystem::path& path, const ResultsHeader& header) {
  H5::Exception::dontPrint();
  ResultsFile rf;
  rf.path_ = path;
  rf.header_ = header;
  std::error_code ec;
  const std::filesystem::path dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat(path.string(), ": cannot create the directory ", dir.string(), ": ",
                                                    ec.message()));
  }
  // Probe that the directory takes new files before any run is spent.
  const std::filesystem::path probe = TempPath(path);
  {
    std::ofstream out(probe);
    if (!out) {
      return absl::PermissionDeniedError(absl::StrCat(path.string(), ": results file is not writable (cannot create ",
                                                      probe.string(), ": ", std::strerror(errno), ")"));
    }
  }
  std::filesystem::remove(probe, ec);
  RemoveStaleTemporaries(path);
  if (std::filesystem::exists(path, ec)) {
    if (::access(path.c_str(), W_OK) != 0) {
      return absl::PermissionDeniedError(absl::StrCat(path.string(), ": results file is not writable (",
                                                      std::strerror(errno), ")"));
    }
    auto contents = Read(path, /*with_tables=*/false);
    if (!contents.ok()) return contents.status();
    if (contents->header.experiment != header.experiment) {
      return absl::FailedPreconditionError(absl::StrCat(
          path.string(), ": holds results of experiment '", contents->header.experiment, "', not '", header.experiment,
          "'; choose another output or pass --fresh (the old file is kept as a backup)"));
    }
    rf.runs_ = std::move(contents->runs);
  }
  return rf;
}

bool ResultsFile::AbandonedAFile() noexcept { return g_abandoned.load(); }

absl::StatusOr<ResultsFile::Compaction> ResultsFile::Compact(const std::filesystem::path& path) {
  H5::Exception::dontPrint();
  TESTBED_ASSIGN_OR_RETURN(std::unique_ptr<WriteLock> lock, WriteLock::Take(path));
  Compaction out;
  std::error_code ec;
  out.bytes_before = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
  TESTBED_ASSIGN_OR_RETURN(Contents c, Read(path, /*with_tables=*/true));
  out.runs = static_cast<int>(c.runs.size());
  std::string created;
  try {
    H5::H5File f(path.string(), H5F_ACC_RDONLY);
    created = ReadStr(f, "created");
  } catch (const H5::Exception&) {
  }
  const std::filesystem::path tmp = TempPath(path);
  try {
    WriteFresh(tmp, c.header, created, c.runs);
  } catch (const H5::Exception& e) {
    std::filesystem::remove(tmp, ec);
    return absl::InternalError(absl::StrCat(path.string(), ": cannot compact (disk full?): ", e.getDetailMsg(),
                                            "; the file is unchanged"));
  }
  if (absl::Status s = results::Seal(tmp); !s.ok()) {
    std::filesystem::remove(tmp, ec);
    return s;
  }
  if (absl::Status s = SyncAndRename(tmp, path); !s.ok()) {
    std::filesystem::remove(tmp, ec);
    return s;
  }
  out.bytes_after = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
  return out;
}

absl::StatusOr<std::string> ResultsFile::MoveAside(const std::filesystem::path& path) {
  const std::string stamp = absl::StrCat(path.string(), ".", std::time(nullptr));
  for (int n = 1; n < 10000; ++n) {
    const std::string backup = n == 1 ? absl::StrCat(stamp, ".bak") : absl::StrCat(stamp, "-", n, ".bak");
    // A hard link fails when the name is taken, so no backup is ever replaced.
    if (::link(path.c_str(), backup.c_str()) == 0) {
      if (::unlink(path.c_str()) != 0) {
        return absl::InternalError(absl::StrCat(path.string(), ": backed up as ", backup, " but cannot be removed: ",
                                                std::strerror(errno)));
      }
      return backup;
    }
    if (errno == EEXIST) continue;
    // No hard links here: a rename onto a name checked just before.
    std::error_code ec;
    if (std::filesystem::exists(backup, ec)) continue;
    std::filesystem::rename(path, backup, ec);
    if (ec) return absl::InternalError(absl::StrCat(path.string(), ": cannot move aside: ", ec.message()));
    return backup;
  }
  return absl::InternalError(absl::StrCat(path.string(), ": cannot move aside: every backup name is taken"));
}

const StoredRun* ResultsFile::Find(const std::string& id) const {
  for (const StoredRun& r : runs_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

absl::Status ResultsFile::Append(const StoredRun& run) {
  // Under the lock the copy starts from the file as every other writer left it, so no
  // completed run of another process is lost.
  TESTBED_ASSIGN_OR_RETURN(std::unique_ptr<WriteLock> lock, WriteLock::Take(path_));
  const std::filesystem::path tmp = TempPath(path_);
  std::error_code ec;
  try {
    if (std::filesystem::exists(path_, ec)) {
      std::filesystem::copy_file(path_, tmp, std::filesystem::copy_options::overwrite_existing, ec);
      if (ec) return absl::InternalError(absl::StrCat(tmp.string(), ": cannot copy the results file: ", ec.message()));
      if (absl::Status s = results::Unseal(tmp); !s.ok()) {
        std::filesystem::remove(tmp, ec);
        return s;
      }
      auto f = std::make_unique<H5::H5File>(tmp.string(), H5F_ACC_RDWR);
      const bool replaces = f->nameExists("runs") && f->openGroup("runs").nameExists(run.id);
      if (replaces) {
        // A replaced run would leave its space dead in the file: write the file afresh instead.
        const std::string created = ReadStr(*f, "created", run.start_time);
        CloseOrAbandon(std::move(f));
        std::filesystem::remove(tmp, ec);
        TESTBED_ASSIGN_OR_RETURN(Contents c, Read(path_, /*with_tables=*/true));
        std::erase_if(c.runs, [&](const StoredRun& r) { return r.id == run.id; });
        c.runs.push_back(run);
        WriteFresh(tmp, header_, created, c.runs);
      } else {
        WriteHeader(*f, header_);
        WriteRun(*f, run);
        CloseOrAbandon(std::move(f));
      }
    } else {
      auto f = std::make_unique<H5::H5File>(tmp.string(), H5F_ACC_TRUNC);
      Attr(*f, "created", run.start_time);
      WriteHeader(*f, header_);
      WriteRun(*f, run);
      CloseOrAbandon(std::move(f));
    }
  } catch (const H5::Exception& e) {
    std::filesystem::remove(tmp, ec);
    return absl::InternalError(absl::StrCat(path_.string(), ": cannot write run '", run.id,
                                            "' (disk full or a file-size limit?): ", e.getDetailMsg(),
                                            "; the file keeps the runs written before"));
  }
  if (absl::Status s = results::Seal(tmp); !s.ok()) {
    std::filesystem::remove(tmp, ec);
    return s;
  }
  if (auto s = SyncAndRename(tmp, path_); !s.ok()) {
    std::filesystem::remove(tmp, ec);
    return s;
  }
  StoredRun header_only = run;
  header_only.output.tables.clear();
  auto it = std::find_if(runs_.begin(), runs_.end(), [&](const StoredRun& r) { return r.id == run.id; });
  if (it != runs_.end()) {
    *it = std::move(header_only);
  } else {
    runs_.push_back(std::move(header_only));
  }
  return absl::OkStatus();
}

}  // namespace testbed

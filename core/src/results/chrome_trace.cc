#include "results/chrome_trace.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace testbed {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out;
}

template <typename T>
absl::StatusOr<const std::vector<T>*> Col(const Table& t, const char* name) {
  const Column* c = t.Find(name);
  if (c == nullptr) return absl::InvalidArgumentError(absl::StrCat("timeline has no column '", name, "'"));
  const auto* v = std::get_if<std::vector<T>>(&c->values);
  if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat("timeline column '", name, "' has another type"));
  return v;
}

}  // namespace

absl::StatusOr<std::string> ChromeTraceJson(const Table& timeline, const std::string& run_id) {
  auto device = Col<std::int64_t>(timeline, "device");
  auto stream = Col<std::int64_t>(timeline, "stream");
  auto stream_name = Col<std::string>(timeline, "stream_name");
  auto start = Col<double>(timeline, "start_s");
  auto end = Col<double>(timeline, "end_s");
  auto kind = Col<std::string>(timeline, "kind");
  auto label = Col<std::string>(timeline, "label");
  for (const absl::Status& s : {device.status(), stream.status(), stream_name.status(), start.status(), end.status(),
                                kind.status(), label.status()}) {
    if (!s.ok()) return s;
  }
  std::string out = absl::StrCat("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"run\":\"", Escape(run_id),
                                 "\"},\"traceEvents\":[\n");
  std::set<std::int64_t> devices;
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> threads;
  const size_t n = (*device)->size();
  for (size_t i = 0; i < n; ++i) {
    const std::int64_t d = (**device)[i], s = (**stream)[i];
    devices.insert(d);
    threads[{d, s}] = (**stream_name)[i];
    absl::StrAppend(&out, absl::StrFormat("{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
                                          "\"pid\":%d,\"tid\":%d},\n",
                                          Escape((**label)[i]), Escape((**kind)[i]), (**start)[i] * 1e6,
                                          ((**end)[i] - (**start)[i]) * 1e6, d, s));
  }
  for (std::int64_t d : devices) {
    absl::StrAppend(&out, absl::StrFormat("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"device %d\"}},\n", d, d));
    absl::StrAppend(&out, absl::StrFormat("{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}},\n", d, d));
  }
  for (const auto& [key, name] : threads) {
    absl::StrAppend(&out, absl::StrFormat("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}},\n",
                                          key.first, key.second, Escape(name)));
  }
  if (out.back() == '\n') out.pop_back();
  if (out.back() == ',') out.pop_back();
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

}  // namespace testbed

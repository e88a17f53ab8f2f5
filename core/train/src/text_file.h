// Whole text files, gzip-compressed or not (zlib reads plain files transparently): the
// loaders' common first step.
#pragma once

#include <zlib.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace testbed::train {

// NotFound when the file cannot be opened; DataLoss for corrupt or truncated gzip data.
inline absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string text;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  const bool failed = n < 0;
  gzclose(f);
  if (failed) return absl::DataLossError(absl::StrCat(path, ": corrupt or truncated gzip data"));
  return text;
}

}  // namespace testbed::train

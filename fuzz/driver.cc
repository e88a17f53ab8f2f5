// A deterministic stand-in for libFuzzer, linked when the fuzz targets are not built with
// clang's -fsanitize=fuzzer: it runs every seed of the corpus directories as it is, then
// `--runs N` mutations of them (byte flips, insertions, deletions, repeated ranges, and
// tokens that configuration and HDF5 parsers find hard), from `--seed S`. The target must
// neither crash nor hang on any of them; the test suite runs it for a fixed count.
//   build/bin/fuzz_experiment --runs 100000 --seed 7 experiments configs
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

struct Rng {
  std::uint64_t s;
  std::uint64_t Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  std::size_t Below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(Next() % n); }
};

const char* const kTokens[] = {
    "[[arm]]", "[experiment]", "[cluster]", "[model]", "[train]", "[parallel]", "[sweep]", "[[point]]", " = ",
    "\"", "'", "{", "}", "[", "]", ",", ".", "\n", "#", "preset", "nodes", "layers", "hidden", "-1", "0", "1e308",
    "nan", "inf", "9223372036854775807", "-9223372036854775808", "4294967296", "true", "\"\"\"", "\\u0000",
    "use", "partitioner", "scheduler", "global_batch", "tp", "pp", "dp", "given", "repeat", "fan_in", "tiers",
    "HDF", "\x89HDF\r\n\x1a\n", "testbed-seal-v1",
};

std::string Mutate(std::string in, Rng& rng) {
  const std::size_t steps = 1 + rng.Below(8);
  for (std::size_t k = 0; k < steps; ++k) {
    const std::size_t at = rng.Below(in.size() + 1);
    switch (rng.Below(6)) {
      case 0:  // flip bits of a byte
        if (!in.empty()) in[rng.Below(in.size())] ^= static_cast<char>(1 + rng.Below(255));
        break;
      case 1:  // insert a random byte
        in.insert(at, 1, static_cast<char>(rng.Below(256)));
        break;
      case 2: {  // delete a range
        if (in.empty()) break;
        const std::size_t from = rng.Below(in.size());
        in.erase(from, 1 + rng.Below(std::min<std::size_t>(64, in.size() - from)));
        break;
      }
      case 3: {  // repeat a range
        if (in.empty()) break;
        const std::size_t from = rng.Below(in.size());
        const std::string piece = in.substr(from, 1 + rng.Below(64));
        in.insert(at, piece);
        break;
      }
      case 4: {  // insert a token
        const char* t = kTokens[rng.Below(sizeof(kTokens) / sizeof(kTokens[0]))];
        in.insert(at, t);
        break;
      }
      default:  // overwrite a byte with a digit or a quote
        if (!in.empty()) in[rng.Below(in.size())] = "0123456789\"=[]\n"[rng.Below(15)];
        break;
    }
  }
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  long runs = 1000;
  std::uint64_t seed = 1;
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::strtol(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::error_code ec;
      for (auto it = std::filesystem::recursive_directory_iterator(argv[i], ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file() || it->file_size() > (1 << 20)) continue;
        std::ifstream in(it->path(), std::ios::binary);
        std::ostringstream text;
        text << in.rdbuf();
        corpus.push_back(text.str());
      }
    }
  }
  if (corpus.empty()) corpus.emplace_back();
  for (const std::string& c : corpus) LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(c.data()), c.size());
  Rng rng{seed * 0x9E3779B97F4A7C15ull + 1};
  for (long r = 0; r < runs; ++r) {
    const std::string input = Mutate(corpus[rng.Below(corpus.size())], rng);
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  }
  std::printf("%zu seeds and %ld mutations ran without a crash\n", corpus.size(), runs);
  return 0;
}

// The shipped data sets and their loaders: sizes and ranges as documented, deterministic
// and disjoint splits, batches that cover an epoch exactly once; the IDX loader on files
// written here (gzip and plain) and on Fashion-MNIST when it is installed.
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "testbed/train/batcher.h"
#include "testbed/train/char_corpus.h"
#include "testbed/train/labeled_data.h"

namespace testbed::train {
namespace {

const std::string kDigits = std::string(TESTBED_DATA_DIR) + "/digits/digits.csv.gz";
const std::string kText = std::string(TESTBED_DATA_DIR) + "/text/gpl-3.0.txt";

TEST(Digits, LoadsTheDocumentedShape) {
  auto data = LoadDigits(kDigits);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size(), 1797);
  EXPECT_EQ(data->features.cols(), 64);
  EXPECT_GE(data->features.minCoeff(), 0.0f);
  EXPECT_LE(data->features.maxCoeff(), 1.0f);
  std::set<std::int64_t> classes(data->labels.begin(), data->labels.end());
  EXPECT_EQ(classes, (std::set<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(Digits, BadFileIsAnErrorNamingTheLine) {
  const std::string path = ::testing::TempDir() + "/bad_digits.csv";
  std::ofstream(path) << "0,1,2\n";
  auto data = LoadDigits(path);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(data.status().message()).find(path + ":1"), std::string::npos) << data.status();
  EXPECT_EQ(LoadDigits(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(Digits, SplitIsDeterministicDisjointAndComplete) {
  auto data = LoadDigits(kDigits);
  ASSERT_TRUE(data.ok());
  auto [train, val] = SplitTrainValidation(*data, 0.25, 11);
  auto [train2, val2] = SplitTrainValidation(*data, 0.25, 11);
  EXPECT_EQ(train.labels, train2.labels);
  EXPECT_EQ(val.features, val2.features);
  EXPECT_EQ(train.size() + val.size(), data->size());
  EXPECT_EQ(val.size(), static_cast<std::int64_t>(0.25 * 1797));
  // Every sample lands on one side: the multiset of rows is preserved.
  std::multiset<std::vector<float>> all, split;
  auto rows = [](const LabeledData& d, std::multiset<std::vector<float>>& out) {
    for (Eigen::Index r = 0; r < d.features.rows(); ++r) {
      out.insert(std::vector<float>(d.features.row(r).data(), d.features.row(r).data() + d.features.cols()));
    }
  };
  rows(*data, all);
  rows(train, split);
  rows(val, split);
  EXPECT_EQ(all, split);
  auto [train3, val3] = SplitTrainValidation(*data, 0.25, 12);
  EXPECT_NE(train.labels, train3.labels) << "another seed, another shuffle";
}

// An IDX file's bytes: the big-endian magic and sizes, then the payload.
std::string IdxBytes(std::uint32_t magic, const std::vector<std::uint32_t>& sizes, const std::string& payload) {
  std::string out;
  auto put = [&out](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  put(magic);
  for (std::uint32_t s : sizes) put(s);
  return out + payload;
}

std::string WritePlain(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string WriteGzip(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return path;
  EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  EXPECT_EQ(gzclose(f), Z_OK);
  return path;
}

// Three 2 x 3 images and their labels.
const std::string kPixels = std::string("\x00\x33\x66\x99\xcc\xff", 6) + std::string("\x01\x02\x03\x04\x05\x06", 6) +
                            std::string("\xff\x00\xff\x00\xff\x00", 6);
const std::string kImages = IdxBytes(0x00000803, {3, 2, 3}, kPixels);
const std::string kLabels = IdxBytes(0x00000801, {3}, std::string("\x02\x00\x04", 3));

void ExpectMessageHas(const absl::Status& status, const std::string& part) {
  EXPECT_NE(std::string(status.message()).find(part), std::string::npos)
      << "'" << status.message() << "' lacks '" << part << "'";
}

TEST(Idx, LoadsGzipAndPlainFilesScaledToUnitRange) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {WriteGzip("idx_images.gz", kImages), WriteGzip("idx_labels.gz", kLabels)},
      {WritePlain("idx_images", kImages), WritePlain("idx_labels", kLabels)},
      {WriteGzip("idx_images_mixed.gz", kImages), WritePlain("idx_labels_mixed", kLabels)}};
  for (const auto& [images, labels] : files) {
    auto data = LoadIdx(images, labels);
    ASSERT_TRUE(data.ok()) << data.status();
    ASSERT_EQ(data->size(), 3);
    ASSERT_EQ(data->features.cols(), 6);
    EXPECT_EQ(data->labels, (std::vector<std::int64_t>{2, 0, 4}));
    EXPECT_EQ(data->classes, 5);
    for (Eigen::Index r = 0; r < 3; ++r) {
      for (Eigen::Index c = 0; c < 6; ++c) {
        const auto byte = static_cast<unsigned char>(kPixels[static_cast<size_t>(r * 6 + c)]);
        EXPECT_FLOAT_EQ(data->features(r, c), static_cast<float>(byte) / 255.0f) << images << " " << r << "," << c;
      }
    }
    EXPECT_EQ(data->features(0, 5), 1.0f);
    EXPECT_EQ(data->features(0, 0), 0.0f);
    EXPECT_FLOAT_EQ(data->features(0, 1), 0.2f);
  }
  auto first_two = LoadIdx(files[0].first, files[0].second, 2);
  ASSERT_TRUE(first_two.ok()) << first_two.status();
  EXPECT_EQ(first_two->size(), 2);
  EXPECT_EQ(first_two->classes, 3);
  EXPECT_EQ(first_two->features.row(1)(2), 3.0f / 255.0f);
  auto declared = LoadIdx(files[0].first, files[0].second, 0, 10);
  ASSERT_TRUE(declared.ok()) << declared.status();
  EXPECT_EQ(declared->classes, 10);
  EXPECT_EQ(LoadIdx(files[0].first, files[0].second, 10)->size(), 3) << "max_samples beyond the file keeps all";
}

TEST(Idx, ReadsFilesOfManyChunks) {
  // 2,000 images of 28 x 28: 1.5 MB of pixels, more than one read of the loader.
  constexpr int kCount = 2000, kSide = 28;
  std::string pixels(static_cast<size_t>(kCount * kSide * kSide), '\0');
  std::string labels(static_cast<size_t>(kCount), '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>((i * 7 + i / 784) % 256);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<char>(i % 10);
  const std::string images_path = WriteGzip("idx_many_images.gz", IdxBytes(0x00000803, {kCount, kSide, kSide}, pixels));
  const std::string labels_path = WriteGzip("idx_many_labels.gz", IdxBytes(0x00000801, {kCount}, labels));
  auto data = LoadIdx(images_path, labels_path);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->size(), kCount);
  ASSERT_EQ(data->features.cols(), kSide * kSide);
  EXPECT_EQ(data->classes, 10);
  bool all_equal = true;
  for (size_t i = 0; i < pixels.size(); ++i) {
    all_equal &= data->features.data()[i] == static_cast<float>(static_cast<unsigned char>(pixels[i]) / 255.0);
  }
  EXPECT_TRUE(all_equal);
  EXPECT_EQ(data->labels[1999], 9);
  EXPECT_EQ(LoadIdx(images_path, labels_path, 1500)->size(), 1500);
}

TEST(Idx, LabelOutOfRangeNamesTheFileAndSample) {
  const std::string images = WritePlain("idx_range_images", kImages);
  const std::string labels = WritePlain("idx_range_labels", kLabels);
  auto data = LoadIdx(images, labels, 0, 4);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  ExpectMessageHas(data.status(), labels + ": label 4 of sample 2");
}

TEST(Idx, BadMagicNamesTheFileAndTheValueFound) {
  const std::string labels = WriteGzip("idx_magic_labels.gz", kLabels);
  // A labels file given as the images.
  auto data = LoadIdx(labels, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  ExpectMessageHas(data.status(), labels + ": bad IDX magic 0x00000801, expected 0x00000803");
  const std::string images = WritePlain("idx_magic_images", kImages);
  data = LoadIdx(images, images);
  ExpectMessageHas(data.status(), images + ": bad IDX magic 0x00000803, expected 0x00000801");
  // IDX doubles (type 0x0d) rather than unsigned bytes.
  const std::string doubles = WritePlain("idx_magic_doubles", IdxBytes(0x00000d03, {3, 2, 3}, kPixels));
  ExpectMessageHas(LoadIdx(doubles, labels).status(), doubles + ": bad IDX magic 0x00000d03");
}

TEST(Idx, TruncationGivesTheBytesExpectedAndRead) {
  const std::string labels = WritePlain("idx_trunc_labels", kLabels);
  // Pixels of 2.5 images, plain and gzip.
  for (const std::string& images : {WritePlain("idx_trunc_images", kImages.substr(0, kImages.size() - 3)),
                                    WriteGzip("idx_trunc_images.gz", kImages.substr(0, kImages.size() - 3))}) {
    auto data = LoadIdx(images, labels);
    EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss) << data.status();
    ExpectMessageHas(data.status(), images + ": truncated pixel data: expected 18 bytes, read 15");
  }
  // A gzip file cut short mid-stream.
  const std::string whole = WriteGzip("idx_cut_images.gz", kImages);
  std::ifstream in(whole, std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = WritePlain("idx_cut_images.gz.part", gz.substr(0, gz.size() / 2));
  auto data = LoadIdx(cut, labels);
  EXPECT_FALSE(data.ok());
  ExpectMessageHas(data.status(), cut + ": truncated");
  // A header cut short, and labels short of the count.
  const std::string header = WritePlain("idx_trunc_header", kImages.substr(0, 10));
  ExpectMessageHas(LoadIdx(header, labels).status(),
                   header + ": truncated IDX sizes after the magic: expected 12 bytes, read 6");
  const std::string magic = WritePlain("idx_trunc_magic", kImages.substr(0, 2));
  ExpectMessageHas(LoadIdx(magic, labels).status(), magic + ": truncated IDX magic: expected 4 bytes, read 2");
  const std::string images = WritePlain("idx_trunc_images_ok", kImages);
  const std::string short_labels = WritePlain("idx_trunc_short_labels", kLabels.substr(0, kLabels.size() - 1));
  ExpectMessageHas(LoadIdx(images, short_labels).status(),
                   short_labels + ": truncated label data: expected 3 bytes, read 2");
  EXPECT_TRUE(LoadIdx(images, short_labels, 2).ok()) << "the first two samples are all there";
}

TEST(Idx, CountMismatchNamesBothFiles) {
  const std::string images = WritePlain("idx_count_images", kImages);
  const std::string labels = WriteGzip("idx_count_labels.gz", IdxBytes(0x00000801, {2}, std::string("\x01\x02", 2)));
  auto data = LoadIdx(images, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  ExpectMessageHas(data.status(), images + " has 3 images but " + labels + " has 2 labels");
  EXPECT_EQ(LoadIdx(images + ".missing", labels).status().code(), absl::StatusCode::kNotFound);
  ExpectMessageHas(LoadIdx(images, labels + ".missing").status(), labels + ".missing: cannot open");
}

TEST(Idx, FashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  const std::vector<std::string> names = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                          "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
  for (const std::string& name : names) {
    if (!std::filesystem::exists(dir + name)) {
      GTEST_SKIP() << dir << name << " is absent: Fashion-MNIST comes with the Debian package dataset-fashion-mnist";
    }
  }
  auto train = LoadIdx(dir + names[0], dir + names[1]);
  ASSERT_TRUE(train.ok()) << train.status();
  auto test = LoadIdx(dir + names[2], dir + names[3]);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(test->size(), 10000);
  for (const LabeledData* d : {&*train, &*test}) {
    EXPECT_EQ(d->features.cols(), 784);
    EXPECT_EQ(d->classes, 10);
    EXPECT_GE(d->features.minCoeff(), 0.0f);
    EXPECT_LE(d->features.maxCoeff(), 1.0f);
    std::vector<std::int64_t> per_class(10, 0);
    for (std::int64_t l : d->labels) ++per_class[static_cast<size_t>(l)];
    for (std::int64_t n : per_class) EXPECT_EQ(n, d->size() / 10) << "Fashion-MNIST is balanced";
  }
}

TEST(Batcher, EachEpochCoversEverySampleOnce) {
  Batcher batcher(10, 4, 3);
  EXPECT_EQ(batcher.batches_per_epoch(), 3);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::int64_t> seen;
    for (int b = 0; b < 3; ++b) {
      const auto batch = batcher.Next();
      EXPECT_EQ(batch.size(), b < 2 ? 4u : 2u);
      seen.insert(seen.end(), batch.begin(), batch.end());
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
  Batcher again(10, 4, 3);
  Batcher other(10, 4, 4);
  EXPECT_EQ(again.Next(), Batcher(10, 4, 3).Next());
  EXPECT_NE(again.Next(), other.Next());
}

TEST(Batcher, DropLastSkipsTheShortBatch) {
  Batcher batcher(10, 4, 1, /*drop_last=*/true);
  EXPECT_EQ(batcher.batches_per_epoch(), 2);
  (void)batcher.Next();
  (void)batcher.Next();
  EXPECT_EQ(batcher.Next().size(), 4u);
  EXPECT_EQ(batcher.epoch(), 1);
}

TEST(CharCorpus, VocabularySplitAndRoundTrip) {
  auto corpus = CharCorpus::Load(kText, 0.1);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  std::ifstream in(kText, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(static_cast<std::size_t>(corpus->vocab_size()), std::set<char>(text.begin(), text.end()).size());
  EXPECT_EQ(corpus->train().size() + corpus->validation().size(), text.size());
  EXPECT_EQ(corpus->validation().size(), static_cast<std::size_t>(0.1 * static_cast<double>(text.size())));
  // Contiguous split: decoding both parts gives the text back.
  EXPECT_EQ(corpus->Decode(corpus->train()) + corpus->Decode(corpus->validation()), text);
  auto ids = corpus->Encode("GNU General Public License");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(corpus->Decode(*ids), "GNU General Public License");
  EXPECT_EQ(corpus->Encode("\x01").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CharCorpus, SampledTargetsAreTheNextCharacters) {
  auto corpus = CharCorpus::Load(kText);
  ASSERT_TRUE(corpus.ok());
  Rng rng(5), rng2(5);
  auto batch = CharCorpus::Sample(corpus->train(), 3, 20, rng);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->inputs.size(), 60u);
  for (int b = 0; b < 3; ++b) {
    for (int t = 0; t + 1 < 20; ++t) EXPECT_EQ(batch->targets[static_cast<size_t>(b * 20 + t)], batch->inputs[static_cast<size_t>(b * 20 + t + 1)]);
  }
  EXPECT_EQ(CharCorpus::Sample(corpus->train(), 3, 20, rng2)->inputs, batch->inputs);
  EXPECT_EQ(CharCorpus::Sample({1, 2}, 1, 5, rng).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testbed::train

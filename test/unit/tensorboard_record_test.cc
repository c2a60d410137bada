// TensorBoard's event files (train/loop/tensorboard_record.h, tensorboard_writer.h) read back
// by a protocol-buffer decoder of the test's own, field by field, with the TFRecord framing's
// CRCs checked: the bytes are what event.proto and summary.proto say, not merely what our
// encoder expects. CRC-32C against the published check values (RFC 3720, B.4).
#include "train/loop/tensorboard_record.h"
#include "train/io/crc32c.h"
#include "train/loop/tensorboard_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace slurm_train;

namespace {

struct Field {
  int number = 0;
  int wire = 0;
  std::uint64_t scalar = 0;  // varint, fixed64, fixed32
  std::string bytes;         // length-delimited
};

std::uint64_t read_varint(std::string_view s, std::size_t& at) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= s.size()) throw std::runtime_error("varint runs past the end");
    const auto byte = static_cast<unsigned char>(s[at++]);
    v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return v;
  }
  throw std::runtime_error("varint longer than 10 bytes");
}

std::uint64_t read_little_endian(std::string_view s, std::size_t& at, int bytes) {
  if (s.size() - at < static_cast<std::size_t>(bytes)) throw std::runtime_error("fixed field runs past the end");
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[at++])) << (8 * i);
  return v;
}

std::vector<Field> decode(std::string_view s) {
  std::vector<Field> fields;
  for (std::size_t at = 0; at < s.size();) {
    const std::uint64_t key = read_varint(s, at);
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    if (f.wire == 0) {
      f.scalar = read_varint(s, at);
    } else if (f.wire == 1) {
      f.scalar = read_little_endian(s, at, 8);
    } else if (f.wire == 5) {
      f.scalar = read_little_endian(s, at, 4);
    } else if (f.wire == 2) {
      const std::uint64_t n = read_varint(s, at);
      if (n > s.size() - at) throw std::runtime_error("length-delimited field runs past the end");
      f.bytes = std::string(s.substr(at, n));
      at += n;
    } else {
      throw std::runtime_error("unknown wire type " + std::to_string(f.wire));
    }
    fields.push_back(f);
  }
  return fields;
}

const Field& field(const std::vector<Field>& fields, int number) {
  const Field* found = nullptr;
  for (const Field& f : fields) {
    if (f.number != number) continue;
    REQUIRE_MESSAGE(!found, "field ", number, " appears twice");
    found = &f;
  }
  REQUIRE_MESSAGE(found, "no field ", number);
  return *found;
}

double as_double(const Field& f) {
  REQUIRE(f.wire == 1);
  return std::bit_cast<double>(f.scalar);
}

std::vector<double> packed_doubles(const Field& f) {
  REQUIRE(f.wire == 2);
  REQUIRE(f.bytes.size() % 8 == 0);
  std::vector<double> out;
  for (std::size_t at = 0; at < f.bytes.size();)
    out.push_back(std::bit_cast<double>(read_little_endian(f.bytes, at, 8)));
  return out;
}

// The Event protos of a stream of TFRecords, each record's framing and CRCs checked.
std::vector<std::string> tfrecords(std::string_view s) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at < s.size();) {
    REQUIRE(s.size() - at >= 12);
    const std::size_t start = at;
    const std::uint64_t length = read_little_endian(s, at, 8);
    CHECK(read_little_endian(s, at, 4) == masked_crc32c(crc32c(s.data() + start, 8)));
    REQUIRE(s.size() - at >= length + 4);
    out.emplace_back(s.substr(at, length));
    at += length;
    CHECK(read_little_endian(s, at, 4) == masked_crc32c(crc32c(out.back().data(), out.back().size())));
  }
  return out;
}

std::string only_record(const std::string& bytes) {
  const auto records = tfrecords(bytes);
  REQUIRE(records.size() == 1);
  return records[0];
}

// A histogram's buckets recounted from the values: bucket i holds limit[i-1] <= v < limit[i].
void check_buckets_hold(const HistogramSummary& h, const std::vector<float>& values) {
  REQUIRE(h.bucket.size() == h.bucket_limit.size());
  REQUIRE(!h.bucket_limit.empty());
  CHECK(h.bucket_limit.back() == DBL_MAX);
  double total = 0;
  for (std::size_t i = 0; i < h.bucket.size(); ++i) {
    const double lower = i == 0 ? -std::numeric_limits<double>::infinity() : h.bucket_limit[i - 1];
    if (i > 0) CHECK(lower < h.bucket_limit[i]);
    double count = 0;
    for (float v : values) count += std::isfinite(v) && lower <= v && v < h.bucket_limit[i];
    CHECK(h.bucket[i] == count);
    total += h.bucket[i];
  }
  CHECK(total == static_cast<double>(h.num));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("tensorboard crc32c: the published check values, and the instruction equals the table") {
  CHECK(crc32c("123456789", 9) == 0xe3069283u);
  CHECK(crc32c("", 0) == 0u);
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, 0), down(32, 0);
  for (int i = 0; i < 32; ++i) up[i] = static_cast<char>(i), down[i] = static_cast<char>(31 - i);
  CHECK(crc32c(zeros.data(), 32) == 0x8a9136aau);
  CHECK(crc32c(ones.data(), 32) == 0x62a8ab43u);
  CHECK(crc32c(up.data(), 32) == 0x46dd794eu);
  CHECK(crc32c(down.data(), 32) == 0x113fdb5cu);
  CHECK(masked_crc32c(0) == 0xa282ead8u);
  CHECK(masked_crc32c(0x80000000u) == 0xa283ead8u);

  std::mt19937 rng(3);
  std::vector<unsigned char> bytes(600);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  long mismatches = 0;
  for (std::size_t length = 0; length <= 300; ++length)
    for (std::size_t start = 0; start < 8; ++start) {
      const std::uint32_t seed = length % 3 ? static_cast<std::uint32_t>(rng()) : 0;
      mismatches +=
          crc32c_update(seed, bytes.data() + start, length) != crc32c_update_table(seed, bytes.data() + start, length);
    }
  CHECK(mismatches == 0);
  // Continued in pieces, the CRC of the whole.
  std::uint32_t crc = 0;
  for (std::size_t at = 0, piece = 1; at < bytes.size(); at += piece, piece = piece * 2 + 1)
    crc = crc32c_update(crc, bytes.data() + at, std::min(piece, bytes.size() - at));
  CHECK(crc == crc32c_update_table(0, bytes.data(), bytes.size()));
}

TEST_CASE("tensorboard file_version record: brain.Event:2 and the wall time") {
  const std::string record = tensorboard_file_version_record(1700000000.25);
  // The first 12 bytes of every event file TensorFlow writes: length 24, its masked CRC-32C.
  CHECK(record.substr(0, 12) == std::string("\x18\0\0\0\0\0\0\0\xa3\x7f\x4b\x22", 12));
  const auto event = decode(only_record(record));
  for (const Field& f : event) CHECK(f.number != 2);  // step 0: not written
  CHECK(as_double(field(event, 1)) == 1700000000.25);
  CHECK(field(event, 3).wire == 2);
  CHECK(field(event, 3).bytes == "brain.Event:2");
}

TEST_CASE("tensorboard scalars record: decodes to its step, wall time, tags and values") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<std::string, float>> scalars = {
      {"loss", 0.25f}, {"lr/\xce\xbb", 3e-4f}, {"grad_norm", nan}};
  const std::int64_t step = 300000000000;  // past 32 bits: a varint of 6 bytes
  const auto event = decode(only_record(tensorboard_scalars_record(1234.5, step, scalars)));
  CHECK(as_double(field(event, 1)) == 1234.5);
  CHECK(field(event, 2).wire == 0);
  CHECK(field(event, 2).scalar == static_cast<std::uint64_t>(step));
  const auto summary = decode(field(event, 5).bytes);
  REQUIRE(summary.size() == scalars.size());
  for (std::size_t i = 0; i < scalars.size(); ++i) {
    CHECK(summary[i].number == 1);
    const auto value = decode(summary[i].bytes);
    CHECK(field(value, 1).bytes == scalars[i].first);
    CHECK(field(value, 2).wire == 5);
    const auto bits = static_cast<std::uint32_t>(field(value, 2).scalar);
    CHECK(bits == std::bit_cast<std::uint32_t>(scalars[i].second));  // NaN too, bit for bit
  }
}

TEST_CASE("tensorboard session start record: a SessionLog of status START at its step") {
  const auto event = decode(only_record(tensorboard_session_start_record(1700000000.5, 101)));
  CHECK(as_double(field(event, 1)) == 1700000000.5);
  CHECK(field(event, 2).scalar == 101);
  CHECK(field(event, 6).wire == 2);
  const auto session_log = decode(field(event, 6).bytes);
  REQUIRE(session_log.size() == 1);
  CHECK(session_log[0].number == 1);
  CHECK(session_log[0].wire == 0);
  CHECK(session_log[0].scalar == 1);  // SessionLog.START
  CHECK_THROWS_WITH_AS(tensorboard_session_start_record(1.0, -1), "tensorboard step -1 is negative",
                       std::invalid_argument);
}

TEST_CASE("tensorboard histogram: TensorFlow's buckets, counts that add up to num, non-finite values left out") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {-2.0f, -1e-13f, 0.0f, 0.5f, 0.5f, 3.0f, std::nanf(""), inf, -inf};
  const HistogramSummary h = histogram_of(values);
  CHECK(h.num == 6);
  CHECK(h.non_finite == 3);
  CHECK(h.min == -2.0);
  CHECK(h.max == 3.0);
  CHECK(h.sum == doctest::Approx(-2.0 - 1e-13 + 1.0 + 3.0));
  CHECK(h.sum_squares == doctest::Approx(4.0 + 0.5 + 9.0));
  check_buckets_hold(h, values);
  // 0 counts in the bucket from 0 to 1e-12, TensorFlow's first positive limit.
  for (std::size_t i = 1; i < h.bucket.size(); ++i)
    if (h.bucket_limit[i - 1] == 0.0) CHECK(h.bucket_limit[i] == 1e-12);
  // Empty runs merged: at most one empty bucket between two full ones.
  for (std::size_t i = 1; i < h.bucket.size(); ++i) CHECK((h.bucket[i - 1] != 0 || h.bucket[i] != 0));

  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> weights(5000);
  for (float& w : weights) w = normal(rng);
  const HistogramSummary wh = histogram_of(weights);
  CHECK(wh.num == weights.size());
  check_buckets_hold(wh, weights);

  const HistogramSummary empty = histogram_of({});
  CHECK(empty.num == 0);
  CHECK(empty.bucket_limit == std::vector<double>{DBL_MAX});
  CHECK(empty.bucket == std::vector<double>{0.0});
}

TEST_CASE("tensorboard histogram record: decodes to the HistogramProto of histogram_of") {
  const std::vector<float> values = {1.0f, 2.0f, 2.0f, -7.5f, 1e-20f, 65504.0f};
  const HistogramSummary h = histogram_of(values);
  const auto event = decode(only_record(tensorboard_histogram_record(99.0, 7, "weights/fc1", values)));
  CHECK(as_double(field(event, 1)) == 99.0);
  CHECK(field(event, 2).scalar == 7);
  const auto summary = decode(field(event, 5).bytes);
  REQUIRE(summary.size() == 1);
  const auto value = decode(summary[0].bytes);
  CHECK(field(value, 1).bytes == "weights/fc1");
  const auto histo = decode(field(value, 5).bytes);
  CHECK(as_double(field(histo, 1)) == h.min);
  CHECK(as_double(field(histo, 2)) == h.max);
  CHECK(as_double(field(histo, 3)) == 6.0);
  CHECK(as_double(field(histo, 4)) == h.sum);
  CHECK(as_double(field(histo, 5)) == h.sum_squares);
  CHECK(packed_doubles(field(histo, 6)) == h.bucket_limit);
  CHECK(packed_doubles(field(histo, 7)) == h.bucket);
  check_buckets_hold(h, values);
}

TEST_CASE("tensorboard records: bad tags, steps, wall times and empty lists refused, naming the value") {
  const std::vector<float> values = {1.0f};
  for (const std::string bad : {"\xff", "a\xc0\x80", "\xed\xa0\x80", "ab\xe2\x82", "\xf4\x90\x80\x80", "\x80"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(tensorboard_histogram_record(0, 0, bad, values), std::invalid_argument);
    const std::vector<std::pair<std::string, float>> scalars = {{"fine", 1.0f}, {bad, 1.0f}};
    CHECK_THROWS_AS(tensorboard_scalars_record(0, 0, scalars), std::invalid_argument);
  }
  CHECK_THROWS_WITH_AS(tensorboard_histogram_record(0, 0, "w\xff", values),
                       "tensorboard tag 'w\\xff' is not valid UTF-8", std::invalid_argument);
  CHECK_THROWS_AS(tensorboard_histogram_record(0, 0, "", values), std::invalid_argument);
  CHECK_THROWS_WITH_AS(tensorboard_histogram_record(0, -1, "w", values), "tensorboard step -1 is negative",
                       std::invalid_argument);
  CHECK_THROWS_AS(tensorboard_histogram_record(NAN, 0, "w", values), std::invalid_argument);
  CHECK_THROWS_AS(tensorboard_scalars_record(0, 0, {}), std::invalid_argument);
  // Valid UTF-8 of every length passes.
  CHECK_NOTHROW(tensorboard_histogram_record(0, 0, "h\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80", values));
}

TEST_CASE("TensorboardWriter: a new event file under a created folder, file_version first, records after") {
  const auto root = std::filesystem::temp_directory_path() / ("tensorboard-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  const std::string dir = (root / "run" / "tb").string();
  std::string first;
  {
    TensorboardWriter writer(dir);
    first = writer.path();
    const std::vector<std::pair<std::string, float>> scalars = {{"loss", 2.5f}};
    writer.scalars(10, scalars);
    const std::vector<float> values = {1.0f, -1.0f};
    writer.histogram(10, "w", values);
    writer.flush();
    writer.close();
    CHECK_THROWS_AS(writer.scalars(11, scalars), std::logic_error);
  }
  const std::string name = std::filesystem::path(first).filename().string();
  CHECK(name.starts_with("events.out.tfevents."));
  CHECK(name.ends_with("." + std::to_string(::getpid()) + ".0"));
  CHECK(std::filesystem::path(first).parent_path() == dir);
  struct stat st;
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((st.st_mode & 0777) == (0775 & ~mask));

  const auto records = tfrecords(read_file(first));
  REQUIRE(records.size() == 3);
  CHECK(field(decode(records[0]), 3).bytes == "brain.Event:2");
  CHECK(field(decode(records[1]), 2).scalar == 10);
  CHECK(decode(field(decode(records[2]), 5).bytes).size() == 1);

  // A second writer (a resumed run) makes a file of its own beside the first.
  {
    TensorboardWriter again(dir);
    CHECK(again.path() != first);
  }
  CHECK(tfrecords(read_file(first)).size() == 3);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++files;
  CHECK(files == 2);

  // A folder where a file is: the error names the path and the reason.
  std::ofstream(root / "plain") << "x";
  const std::string under_file = (root / "plain" / "tb").string();
  const std::string plain = (root / "plain").string();
  CHECK_THROWS_WITH_AS(TensorboardWriter{under_file}, doctest::Contains(plain.c_str()), std::runtime_error);
  CHECK_THROWS_WITH_AS(TensorboardWriter{under_file}, doctest::Contains("Not a directory"), std::runtime_error);
  std::filesystem::remove_all(root);
}

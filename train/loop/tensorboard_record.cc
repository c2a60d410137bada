#include "train/loop/tensorboard_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include "train/io/crc32c.h"

namespace slurm_train {

namespace {

// Protocol buffers' wire types (the low 3 bits of a field's key).
enum class Wire : std::uint8_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

void put_varint(std::string& out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  out += static_cast<char>(v);
}

void put_key(std::string& out, int field, Wire wire) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire));
}

// Little-endian whatever the host's order: the wire format's and TFRecord's.
void put_little_endian(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_double(std::string& out, double v) { put_little_endian(out, std::bit_cast<std::uint64_t>(v), 8); }

void put_double_field(std::string& out, int field, double v) {
  put_key(out, field, Wire::fixed64);
  put_double(out, v);
}

void put_bytes_field(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, Wire::length_delimited);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_packed_doubles(std::string& out, int field, const std::vector<double>& values) {
  std::string packed;
  for (double v : values) put_double(packed, v);
  put_bytes_field(out, field, packed);
}

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    std::size_t continuation;
    std::uint32_t code;
    if ((lead & 0xe0) == 0xc0) {
      continuation = 1, code = lead & 0x1f;
    } else if ((lead & 0xf0) == 0xe0) {
      continuation = 2, code = lead & 0x0f;
    } else if ((lead & 0xf8) == 0xf0) {
      continuation = 3, code = lead & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= continuation) return false;
    for (std::size_t k = 1; k <= continuation; ++k) {
      const auto byte = static_cast<unsigned char>(s[i + k]);
      if ((byte & 0xc0) != 0x80) return false;
      code = (code << 6) | (byte & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and code points past Unicode's last are not UTF-8.
    constexpr std::uint32_t kShortest[] = {0, 0x80, 0x800, 0x10000};
    if (code < kShortest[continuation] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    i += continuation + 1;
  }
  return true;
}

// A tag as an error message can print it: bytes outside printable ASCII as \xNN.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f || c == '\\')
      out += fmt::format("\\x{:02x}", byte);
    else
      out += c;
  }
  return out;
}

void check_tag(const std::string& tag) {
  if (tag.empty()) throw std::invalid_argument("a tensorboard tag is empty");
  if (!valid_utf8(tag))
    throw std::invalid_argument(fmt::format("tensorboard tag '{}' is not valid UTF-8", printable(tag)));
}

// An Event's wall_time and step, the fields every record begins with.
std::string event_head(double wall_time, std::int64_t step) {
  if (!std::isfinite(wall_time))
    throw std::invalid_argument(fmt::format("tensorboard wall time {} is not finite", wall_time));
  if (step < 0) throw std::invalid_argument(fmt::format("tensorboard step {} is negative", step));
  std::string event;
  put_double_field(event, 1, wall_time);
  // Step 0 is left out, as proto3 leaves out a default: the file_version record is then the
  // 24 bytes TensorFlow writes.
  if (step != 0) {
    put_key(event, 2, Wire::varint);
    put_varint(event, static_cast<std::uint64_t>(step));
  }
  return event;
}

std::string tfrecord(std::string_view data) {
  std::string length;
  put_little_endian(length, data.size(), 8);
  std::string out = length;
  put_little_endian(out, masked_crc32c(crc32c(length.data(), length.size())), 4);
  out += data;
  put_little_endian(out, masked_crc32c(crc32c(data.data(), data.size())), 4);
  return out;
}

std::string summary_event(double wall_time, std::int64_t step, std::string_view summary) {
  std::string event = event_head(wall_time, step);
  put_bytes_field(event, 5, summary);
  return tfrecord(event);
}

// TensorFlow's default limits (histogram.cc, InitDefaultBucketsInner), computed the same way so
// that each limit is the same double.
const std::vector<double>& default_bucket_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> positive;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) positive.push_back(v);
    positive.push_back(DBL_MAX);
    std::vector<double> all;
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), positive.begin(), positive.end());
    return all;
  }();
  return limits;
}

}  // namespace

HistogramSummary histogram_of(std::span<const float> values) {
  const std::vector<double>& limits = default_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  HistogramSummary h;
  for (const float f : values) {
    if (!std::isfinite(f)) {
      ++h.non_finite;
      continue;
    }
    const double v = f;
    // A finite float is below DBL_MAX, the last limit: the index is always in range.
    counts[std::upper_bound(limits.begin(), limits.end(), v) - limits.begin()] += 1;
    h.min = h.num == 0 ? v : std::min(h.min, v);
    h.max = h.num == 0 ? v : std::max(h.max, v);
    h.sum += v;
    h.sum_squares += v * v;
    ++h.num;
  }
  for (std::size_t i = 0; i < counts.size();) {
    double limit = limits[i];
    const double count = counts[i++];
    if (count == 0)
      for (; i < counts.size() && counts[i] == 0; ++i) limit = limits[i];
    h.bucket_limit.push_back(limit);
    h.bucket.push_back(count);
  }
  return h;
}

std::string tensorboard_file_version_record(double wall_time) {
  std::string event = event_head(wall_time, 0);
  put_bytes_field(event, 3, "brain.Event:2");
  return tfrecord(event);
}

std::string tensorboard_session_start_record(double wall_time, std::int64_t step) {
  std::string event = event_head(wall_time, step);
  std::string session_log;
  put_key(session_log, 1, Wire::varint);
  put_varint(session_log, 1);  // SessionLog.SessionStatus START
  put_bytes_field(event, 6, session_log);
  return tfrecord(event);
}

std::string tensorboard_scalars_record(double wall_time, std::int64_t step,
                                       std::span<const std::pair<std::string, float>> scalars) {
  if (scalars.empty()) throw std::invalid_argument("a tensorboard scalars record needs at least one scalar");
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    check_tag(tag);
    std::string v;
    put_bytes_field(v, 1, tag);
    put_key(v, 2, Wire::fixed32);
    put_little_endian(v, std::bit_cast<std::uint32_t>(value), 4);
    put_bytes_field(summary, 1, v);
  }
  return summary_event(wall_time, step, summary);
}

std::string tensorboard_histogram_record(double wall_time, std::int64_t step, const std::string& tag,
                                         std::span<const float> values) {
  check_tag(tag);
  const HistogramSummary h = histogram_of(values);
  std::string histo;
  put_double_field(histo, 1, h.min);
  put_double_field(histo, 2, h.max);
  put_double_field(histo, 3, static_cast<double>(h.num));
  put_double_field(histo, 4, h.sum);
  put_double_field(histo, 5, h.sum_squares);
  put_packed_doubles(histo, 6, h.bucket_limit);
  put_packed_doubles(histo, 7, h.bucket);
  std::string v;
  put_bytes_field(v, 1, tag);
  put_bytes_field(v, 5, histo);
  std::string summary;
  put_bytes_field(summary, 1, v);
  return summary_event(wall_time, step, summary);
}

}  // namespace slurm_train

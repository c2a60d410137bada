// TensorBoard's event-file records, encoded by hand: TFRecord framing around serialized Event
// protocol buffers (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto).
// Four small messages - Event, Summary (with its Value), HistogramProto and SessionLog - are all we write,
// so they are written field by field here rather than through libprotobuf and generated code:
// no protoc step in the build, no library to link. Pure: no I/O (tensorboard_writer.h writes).
//
// What the reader needs, and test/integration/tensorboard_events.py decodes:
//   record:         uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes,
//                   the data, uint32 masked CRC-32C of the data (train/io/crc32c.h)
//   Event:          wall_time = 1 (double), step = 2 (int64), file_version = 3 (string),
//                   summary = 5 (Summary), session_log = 6 (SessionLog)
//   SessionLog:     status = 1 (enum: START = 1)
//   Summary:        repeated Value value = 1
//   Summary.Value:  tag = 1 (string), simple_value = 2 (float), histo = 5 (HistogramProto)
//   HistogramProto: min = 1, max = 2, num = 3, sum = 4, sum_squares = 5 (double),
//                   bucket_limit = 6, bucket = 7 (packed repeated double)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace slurm_train {

// A histogram as TensorFlow's (tensorflow/core/lib/histogram/histogram.cc) builds it: the
// default bucket limits (0, then +-1e-12 growing by 1.1x up to 1e20, then +-DBL_MAX); a value v
// counts in the first bucket whose limit is above v. Runs of empty buckets are merged into one
// (limit: the run's last), as TensorFlow's EncodeToProto does, so a histogram of n values has at
// most 2n + 1 buckets. TensorBoard draws bucket i from limit i-1 (min for the first non-empty
// one) to limit i (max for the last non-empty one).
struct HistogramSummary {
  double min = 0, max = 0;  // 0 and 0 when no value counted
  std::uint64_t num = 0;    // values counted: the buckets add up to it
  double sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;  // increasing; the last is DBL_MAX
  std::vector<double> bucket;        // counts, one per limit
  // NaN and infinite values, left out of everything above: a bucket cannot hold them and one
  // would make sum and sum_squares meaningless. The caller may log this count.
  std::uint64_t non_finite = 0;
};

HistogramSummary histogram_of(std::span<const float> values);

// The first record of every event file: file_version "brain.Event:2".
std::string tensorboard_file_version_record(double wall_time);

// An Event holding a SessionLog of status START at `step`: TensorBoard then drops every point it
// read before it (from this file or an earlier one of the run) whose step is `step` or later, as
// for PyTorch's SummaryWriter(purge_step). A run that resumes writes one, so that the points a
// failed run wrote after its last checkpoint do not stand beside the steps done again.
std::string tensorboard_session_start_record(double wall_time, std::int64_t step);

// One Event holding a simple_value for each (tag, value); a NaN or infinite value is kept
// (TensorBoard plots it as such: a diverged loss is worth seeing).
std::string tensorboard_scalars_record(double wall_time, std::int64_t step,
                                       std::span<const std::pair<std::string, float>> scalars);

// One Event holding the histogram of `values` (histogram_of).
std::string tensorboard_histogram_record(double wall_time, std::int64_t step, const std::string& tag,
                                         std::span<const float> values);

// Every function above throws std::invalid_argument naming the value for: a tag that is empty
// or not valid UTF-8, an empty list of scalars, a negative step, a wall time that is not finite.

}  // namespace slurm_train

// A checkpoint file's reader (checkpoint_file.h has the layout): every check of its structure,
// sizes and checksums, in two passes. checkpoint_file.cc runs the probe pass in a child process
// (crash_contained.h) before the read pass in this one; nothing else calls these directly.
#pragma once

#include <string>
#include <vector>

#include "train/checkpoint/checkpoint_file.h"
#include "train/io/span_checksums.h"

namespace slurm_train {

// What a read does with the bytes of a contiguous dataset (ours: the tensors). The first pass,
// in a child process (crash_contained.h), probes: it runs everything libhdf5 parses but leaves
// those bytes, which are the file's plain bytes at an offset (read by pread, or by libhdf5
// without parsing anything more), so that the child copies no data and touches no memory of
// this process's. The second pass reads them, or only checks them against their checksums
// where nothing needs them (`ckpt show`): no buffer of their size is allocated then.
enum class CheckpointPass { kProbe, kRead, kChecksums };

// The whole checkpoint into `s` (a probe reads no tensor's bytes, and allocates nothing for them);
// with `expected`, another model's file throws CheckpointMismatch before any buffer is sized.
// Without `optimizer_state`, a read checks the optimizer's tensors against their checksums and
// leaves `s.first` and `s.second` empty.
void read_checkpoint_uncontained(const std::string& path, CheckpointState& s, const ModelLayout* expected,
                                 CheckpointPass pass, bool optimizer_state = true);
// The model alone, from a checkpoint (as read_checkpoint_uncontained without optimizer_state) or
// from a model file (train.save's, model_file.h: /model, its recipe, /meta's version and config).
void read_model_uncontained(const std::string& path, CheckpointState& s, CheckpointPass pass);
// Every problem of the file, one line each (empty: valid). With `spans` (the file's bytes read
// already, span_checksums.h), each dataset's checksum is composed from them rather than read.
std::vector<std::string> verify_checkpoint_uncontained(const std::string& path, CheckpointPass pass,
                                                       SpanChecksums* spans = nullptr);
// `ckpt show`'s text.
std::string describe_checkpoint_uncontained(const std::string& path, CheckpointPass pass);

}  // namespace slurm_train

// A checkpoint of sharded optimizer state (train.shard_optimizer), written by every rank at once
// into one file of the usual format (checkpoint_file.h), so that its time falls as ranks, nodes
// and a parallel file system's servers are added, and every reader (a resume on any number of
// ranks, `ckpt verify`, PyTorch) reads it as any other:
//   1. rank 0 creates the temporary file with the checkpoint's structure (groups, attributes,
//      scalars; every tensor's space allocated, contiguous) and tells every rank the tensors'
//      dataset names;
//   2. every rank writes its part, the packed elements [begin, end) of its shard, of the
//      parameters and of each moment, straight to those tensors' places in the file (pwrite, as
//      the serial write does: whole blocks by direct I/O), checksums it, and fsyncs the file
//      (on a parallel file system, one client's fsync does not flush another's writes);
//   3. rank 0 gathers every part's CRC-32, records them (and each tensor's whole CRC-32, combined
//      from its parts'), then commits the file by checkpoint_store.h's protocol: fsync, rename,
//      folder fsync, `latest`, the keep policy.
// A rank that dies mid-write leaves a temporary file that is never renamed: the previous
// checkpoint stays the newest. Every failure is known on every rank, which all throw
// OnEveryRank<CheckpointWriteError> (a failure of MPI itself: CheckpointWriteError, on its rank).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_state.h"
#include "train/checkpoint/checkpoint_store.h"
#include "train/comm/comm.h"

namespace slurm_train {

// Elements [first, first + count) of the checkpoint's tensor `dataset` (create_checkpoint_file's
// order), in C (row-major) order, and where this rank keeps them.
struct DatasetPart {
  std::size_t dataset = 0;
  std::uint64_t first = 0, count = 0;
  const float* data = nullptr;
};

// A shard's parts of the checkpoint's tensors: elements [begin, begin + arrays[a].size()) of each
// array (the parameters, then each moment) cut at the model's tensors, each a part of its dataset
// in create_checkpoint_file's order (array by array, each in the model's tensor order). Throws
// std::invalid_argument when an array passes the model's end. Pure.
std::vector<DatasetPart> shard_parts(const ModelLayout& model, std::size_t begin,
                                     const std::vector<std::span<const float>>& arrays);

// This rank's part: the packed elements [begin, begin + size) of the parameters and of each
// optimizer state (AdamW: two, SGD: one), where the step keeps them; they are written from there.
struct ShardData {
  std::size_t begin = 0;
  std::vector<std::span<const float>> arrays;
};

// This rank's `parts` written to their tensors' `places` in `file` (create_checkpoint_file's
// pieces, whose offsets and sizes matter here), the file fsynced, and their checksums, rank
// `rank`'s. Throws CheckpointWriteError naming the file and the call (ENOSPC: a full disk), or a
// part past its tensor's end.
std::vector<ShardChecksum> write_shard_parts(const FilePath& file, const std::vector<TensorPiece>& places,
                                             const std::vector<DatasetPart>& parts, int rank, unsigned slow_ms = 0);

// Commits the checkpoint that `meta` describes (counters, model, metadata; is_shard and no
// tensors; the same on every rank, rank 0's written) as DIR/step-<step>.h5, every rank writing
// `mine`. `folder`: this rank's hold of DIR (checkpoint_store.h's open_checkpoint_folder), opened
// at the first save (rank 0 makes DIR when missing) and kept for the next, so that every rank
// writes through the folder it judged. Collective. slow_ms: the testing aid of
// write_checkpoint_file (64 KiB rounds, a pause after each). Returns the path.
std::string save_checkpoint_parallel(Comm& comm, std::optional<TrustedFolder>& folder, const std::string& dir,
                                     const CheckpointState& meta, const ShardData& mine, KeepPolicy keep,
                                     unsigned slow_ms = 0);

}  // namespace slurm_train

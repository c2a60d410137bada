// One checkpoint as one self-describing HDF5 file (format version kCheckpointFormatVersion):
//   /model/<tensor>                               float32: the MLP's layerN.weight [out, in] and
//                                                 layerN.bias [out]; the GPT's GPT-2 names
//                                                 (h.0.attn.c_attn.weight [in, out], ...)
//   /optimizer/<exp_avg|exp_avg_sq|momentum_buffer>/<param>   float32, same shapes
//   /optimizer/step_count                          uint64 scalar; attribute kind
//   /train/<step|epoch|batch_in_epoch|...>         scalars; attribute rng (why no RNG state)
//   /model attributes kind and the model's shape; /preprocessing (MLP; model_file.h)
//   /meta                                          attributes: format_version, config,
//                                                  world_size, program_version, created, host,
//                                                  device
// Every dataset carries a `crc32` attribute: zlib's CRC-32 of its little-endian bytes in C
// order, checked whenever the file is read. A checkpoint that the ranks wrote together (sharded
// optimizer state) also records each tensor's parts, one per rank that wrote some of it: the
// attributes shard_first (uint64 [k], the part's first element), shard_crc32 (uint32 [k]) and
// shard_rank (int64 [k]); `ckpt verify` checks each part and names the rank of a bad one. The scalars are one table
// (checkpoint_format.h); the tensors' bytes go straight to and from the file (tensor_io.h); the folder of checkpoints
// and its commit protocol are checkpoint_store.h's.
// The writer is checkpoint_file_writer.cc, the reader checkpoint_file_reader.h; checkpoint_file.cc
// runs every read of a file in a child process first (the crash-contained probe), then for real.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/checkpoint/checkpoint_state.h"
#include "train/io/file_path.h"
#include "train/io/tensor_io.h"

namespace slurm_train {

// A checkpoint that cannot be read or fails a check; the message names the file and dataset.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A checkpoint whose layers differ from the model a resume expects: not a damaged file to skip
// for an older one, but a run configured for another model.
struct CheckpointMismatch : CheckpointError {
  using CheckpointError::CheckpointError;
};
// A checkpoint that could not be written (full disk, unwritable folder); names the path. The
// run exits with its own code for it (launcher/exit_codes.h).
struct CheckpointWriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes `state` to `file` (created or truncated; the caller makes it durable and commits it,
// see checkpoint_store.h; a temporary file in the checkpoint folder is opened through the
// folder's descriptor, file_path.h). A testing aid: slow_ms > 0 writes the tensors 64 KiB at a
// time with a pause of slow_ms after each, so that a test can kill the process in the middle of
// a write. Throws CheckpointWriteError naming the file.
void write_checkpoint_file(const FilePath& file, const CheckpointState& state, unsigned slow_ms = 0);

// The parts of write_checkpoint_file, for a checkpoint every rank writes a part of
// (checkpoint_parallel.h). Creates `file` with the structure of `s`'s checkpoint (every group,
// attribute and scalar; every tensor's space allocated, unwritten) and returns the tensors'
// places: /model's, then each optimizer state's, each in the model's tensor order, with data
// pointers into `s` when it is whole (null for a shard). Throws CheckpointWriteError.
std::vector<TensorPiece> create_checkpoint_file(const FilePath& file, const CheckpointState& s);

// One rank's part of one tensor written in parallel: elements [first, first + count) of
// pieces[piece] (create_checkpoint_file's order) and the CRC-32 of their bytes.
struct ShardChecksum {
  std::uint64_t piece = 0, first = 0, count = 0;
  std::int64_t rank = 0;
  std::uint32_t crc = 0;
};
// Records every tensor's checksum from its parts': its crc32 (the parts' combined) and the
// attributes shard_first, shard_crc32 and shard_rank, which `ckpt verify` checks part by part.
// The parts must tile each tensor. Throws CheckpointWriteError.
void store_shard_checksums(const FilePath& file, const std::vector<TensorPiece>& pieces,
                           std::vector<ShardChecksum> parts);

// Reads a whole checkpoint, verifying every checksum and the structure; throws CheckpointError
// naming the file and the dataset at fault. Every reader here reads the file in a child process
// first, so that a file that crashes or hangs libhdf5 is a CheckpointError, not a crash
// (crash_contained.h).
CheckpointState read_checkpoint_file(const std::string& path);
// The same into `into`, whose buffers keep their capacity: a resume into buffers that exist
// already skips the kernel's zeroing and page faults of fresh memory. With `expected`, a file
// of another model throws CheckpointMismatch before any buffer is sized from it.
// Every size is checked against the bytes the file stores before it is allocated, and every
// attribute's dataspace and type before it is read.
void read_checkpoint_file(const std::string& path, CheckpointState& into, const ModelLayout* expected = nullptr);

// The same for a program that uses the model alone (`slurm-train sample`): the optimizer's state
// is checked against its checksums as it is read, but not kept (`first` and `second` empty),
// so that no memory is allocated for it.
CheckpointState read_checkpoint_model(const std::string& path);

// The model of a model file (train.save's, model_file.h) or of a checkpoint, for a program that
// runs it (`slurm-train serve`): its layout, parameters and, for an MLP, its recipe; checksums
// are checked where the file stores them (every file this program writes does), and the
// file is read in a child process first, as above. Throws CheckpointError naming the file.
CheckpointState read_model_file(const std::string& path);
// Every problem of the file, one line each (empty: valid): each dataset's checksum, found by
// walking the file, and that the file reads back as a checkpoint.
std::vector<std::string> verify_checkpoint_file(const std::string& path);

// For `ckpt show`: /meta, /train and every tensor's name, shape and type, as text.
std::string describe_checkpoint_file(const std::string& path);

// What the readers above run first in a separate process (crash_contained.h): everything libhdf5
// parses, not the tensors' bytes. In that process, run_checkpoint_probe runs the one `reader`
// names ("checkpoint-read", "-verify", "-describe", "model-read") and returns true; false for another name.
enum class CheckpointUse { kRead, kVerify, kDescribe, kModel };
bool run_checkpoint_probe(const std::string& reader, const std::string& path);

}  // namespace slurm_train

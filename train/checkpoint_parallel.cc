#include "train/checkpoint_parallel.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "train/checkpoint_file.h"
#include "train/checkpoint_policy.h"
#include "train/crc32.h"
#include "train/durable_file.h"

namespace slurm_train {

std::vector<ShardBlock> shard_blocks(const ModelLayout& model, const std::vector<std::uint64_t>& piece_offsets,
                                     std::size_t begin, const std::vector<std::span<const float>>& arrays) {
  const std::size_t tensors = model.tensors.size();
  if (piece_offsets.size() != arrays.size() * tensors)
    throw std::invalid_argument(fmt::format("{} tensor offsets for {} arrays of {} tensors", piece_offsets.size(),
                                            arrays.size(), tensors));
  std::vector<ShardBlock> blocks;
  for (std::size_t a = 0; a < arrays.size(); ++a) {
    const std::size_t end = begin + arrays[a].size();
    if (end > model.parameters())
      throw std::invalid_argument(fmt::format("a shard of elements {} to {} of a model of {}", begin, end, model.parameters()));
    for (std::size_t t = 0; t < tensors; ++t) {
      const ParamTensor& tensor = model.tensors[t];
      const std::size_t lo = std::max(begin, tensor.offset), hi = std::min(end, tensor.offset + tensor.size);
      if (lo >= hi) continue;
      const std::size_t piece = a * tensors + t;
      blocks.push_back({piece, lo - tensor.offset, hi - lo,
                        {piece_offsets[piece] + (lo - tensor.offset) * sizeof(float), arrays[a].data() + (lo - begin),
                         (hi - lo) * sizeof(float)}});
    }
  }
  return blocks;
}

namespace {

void broadcast_text(Comm& comm, std::string& text) {
  std::uint64_t n = text.size();
  comm.broadcast(&n, sizeof n, 0);
  text.resize(n);
  if (n > 0) comm.broadcast(text.data(), n, 0);
}

void broadcast_numbers(Comm& comm, std::vector<std::uint64_t>& v) {
  std::uint64_t n = v.size();
  comm.broadcast(&n, sizeof n, 0);
  v.resize(n);
  if (n > 0) comm.broadcast(v.data(), n * sizeof(std::uint64_t), 0);
}

// Rank 0's error ends the write on every rank: the same exception everywhere, naming who failed.
[[noreturn]] void fail_everywhere(bool root, const std::string& error, const char* what) {
  if (root) throw CheckpointWriteError(error);
  throw CheckpointWriteError(fmt::format("rank 0 could not {} the checkpoint: {}", what, error));
}

constexpr std::size_t kRoundBytes = std::size_t{256} << 20;  // per rank and call: within MPI's int counts
constexpr std::size_t kSlowRoundBytes = std::size_t{64} << 10;

}  // namespace

std::string save_checkpoint_parallel(Comm& comm, const std::string& dir, const CheckpointState& s,
                                     const ShardData& mine, KeepPolicy keep, unsigned slow_ms) {
  if (!s.is_shard) throw std::logic_error("save_checkpoint_parallel: the state is not a shard's");
  if (mine.arrays.size() != 1 + optimizer_state_names(s.optimizer).size())
    throw std::logic_error(fmt::format("save_checkpoint_parallel: {} arrays for {}", mine.arrays.size(), s.optimizer));
  const bool root = comm.rank() == 0;
  const std::string path = dir + "/" + checkpoint_file_name(s.counters.step);

  // 1. Rank 0 creates the file: the structure, every tensor's space.
  std::string error, tmp;
  std::vector<TensorPiece> pieces;
  std::vector<std::uint64_t> offsets;
  if (root) {
    try {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) throw CheckpointWriteError(fmt::format("cannot create the checkpoint folder '{}': {}", dir, ec.message()));
      tmp = temporary_path_for(path);
      pieces = create_checkpoint_file(tmp, s);
      for (const TensorPiece& p : pieces) offsets.push_back(p.offset);
    } catch (const std::exception& e) {
      error = e.what();
      if (!tmp.empty()) ::unlink(tmp.c_str());
    }
  }
  broadcast_text(comm, error);
  if (!error.empty()) fail_everywhere(root, error, "create");
  broadcast_text(comm, tmp);
  broadcast_numbers(comm, offsets);

  // 2. Every rank writes its part of every tensor, and checksums it.
  std::vector<ShardChecksum> sums;
  std::vector<FileBlock> blocks;
  for (const ShardBlock& b : shard_blocks(s.model, offsets, mine.begin, mine.arrays)) {
    sums.push_back({b.piece, b.first, b.count, comm.rank(), crc32_update(0, b.block.data, b.block.bytes)});
    blocks.push_back(b.block);
  }
  try {
    comm.write_file_together(tmp, blocks, slow_ms > 0 ? kSlowRoundBytes : kRoundBytes, slow_ms);
  } catch (const std::exception& e) {
    if (root) ::unlink(tmp.c_str());
    throw CheckpointWriteError(fmt::format("cannot write the checkpoint '{}': {}", tmp, e.what()));
  }

  // 3. Rank 0 records the parts' checksums and commits the file.
  const auto gathered = comm.gather_bytes(sums.data(), sums.size() * sizeof(ShardChecksum), 0);
  if (root) {
    try {
      std::vector<ShardChecksum> parts;
      for (const auto& bytes : gathered) {
        const std::size_t n = bytes.size() / sizeof(ShardChecksum);
        if (n == 0) continue;  // a rank with an empty shard
        parts.resize(parts.size() + n);
        std::memcpy(parts.data() + parts.size() - n, bytes.data(), n * sizeof(ShardChecksum));
      }
      write_file_durably(path, [&](const std::string& temporary) {
        if (temporary != tmp) throw std::logic_error("save_checkpoint_parallel: another temporary name " + temporary);
        store_shard_checksums(temporary, pieces, std::move(parts));
      });
      record_latest_and_keep(dir, s.counters.step, keep);
    } catch (const std::exception& e) {
      error = e.what();
      ::unlink(tmp.c_str());
    }
  }
  broadcast_text(comm, error);
  if (!error.empty()) fail_everywhere(root, error, "commit");
  return path;
}

}  // namespace slurm_train

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

std::vector<DatasetPart> shard_parts(const ModelLayout& model, std::size_t begin,
                                     const std::vector<std::span<const float>>& arrays) {
  const std::size_t tensors = model.tensors.size();
  std::vector<DatasetPart> parts;
  for (std::size_t a = 0; a < arrays.size(); ++a) {
    const std::size_t end = begin + arrays[a].size();
    if (end > model.parameters())
      throw std::invalid_argument(fmt::format("a shard of elements {} to {} of a model of {}", begin, end, model.parameters()));
    for (std::size_t t = 0; t < tensors; ++t) {
      const ParamTensor& tensor = model.tensors[t];
      const std::size_t lo = std::max(begin, tensor.offset), hi = std::min(end, tensor.offset + tensor.size);
      if (lo >= hi) continue;
      parts.push_back({a * tensors + t, lo - tensor.offset, hi - lo, arrays[a].data() + (lo - begin)});
    }
  }
  return parts;
}

namespace {

void broadcast_text(Comm& comm, std::string& text) {
  std::uint64_t n = text.size();
  comm.broadcast(&n, sizeof n, 0);
  text.resize(n);
  if (n > 0) comm.broadcast(text.data(), n, 0);
}

void broadcast_lines(Comm& comm, std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + '\n';
  broadcast_text(comm, text);
  lines.clear();
  for (std::size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(text.substr(at, end - at));
}

// Rank 0's error ends the write on every rank: the same exception everywhere, naming who failed.
[[noreturn]] void fail_everywhere(bool root, const std::string& error, const char* what) {
  if (root) throw OnEveryRank<CheckpointWriteError>(error);
  throw OnEveryRank<CheckpointWriteError>(fmt::format("rank 0 could not {} the checkpoint: {}", what, error));
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
  std::vector<std::string> datasets;
  if (root) {
    try {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) throw CheckpointWriteError(fmt::format("cannot create the checkpoint folder '{}': {}", dir, ec.message()));
      tmp = temporary_path_for(path);
      pieces = create_checkpoint_file(tmp, s);
      for (const TensorPiece& p : pieces) datasets.push_back(p.name);
    } catch (const std::exception& e) {
      error = e.what();
      if (!tmp.empty()) ::unlink(tmp.c_str());
    }
  }
  broadcast_text(comm, error);
  if (!error.empty()) fail_everywhere(root, error, "create");
  broadcast_text(comm, tmp);
  broadcast_lines(comm, datasets);

  // 2. Every rank writes its part of every tensor, and checksums it.
  const std::vector<DatasetPart> parts = shard_parts(s.model, mine.begin, mine.arrays);
  std::vector<ShardChecksum> sums;
  for (const DatasetPart& p : parts)
    sums.push_back({p.dataset, p.first, p.count, comm.rank(), crc32_update(0, p.data, p.count * sizeof(float))});
  try {
    comm.write_datasets_together(tmp, datasets, parts, slow_ms > 0 ? kSlowRoundBytes : kRoundBytes, slow_ms);
  } catch (const OnEveryRank<CommError>& e) {
    if (root) ::unlink(tmp.c_str());
    throw OnEveryRank<CheckpointWriteError>(fmt::format("cannot write the checkpoint '{}': {}", tmp, e.what()));
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

#include "train/checkpoint/checkpoint_parallel.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "spank/jobenv/host.h"
#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_policy.h"
#include "train/io/crc32.h"
#include "train/io/durable_file.h"
#include "train/io/tensor_io.h"

namespace slurm_train {

namespace {

constexpr const char* kNotShared = " (is the folder on storage that every node shares?)";

}  // namespace

std::vector<DatasetPart> shard_parts(const ModelLayout& model, std::size_t begin,
                                     const std::vector<std::span<const float>>& arrays) {
  const std::size_t tensors = model.tensors.size();
  std::vector<DatasetPart> parts;
  for (std::size_t a = 0; a < arrays.size(); ++a) {
    const std::size_t end = begin + arrays[a].size();
    if (end > model.parameters())
      throw std::invalid_argument(
          fmt::format("a shard of elements {} to {} of a model of {}", begin, end, model.parameters()));
    for (std::size_t t = 0; t < tensors; ++t) {
      const ParamTensor& tensor = model.tensors[t];
      const std::size_t lo = std::max(begin, tensor.offset), hi = std::min(end, tensor.offset + tensor.size);
      if (lo >= hi) continue;
      parts.push_back({a * tensors + t, lo - tensor.offset, hi - lo, arrays[a].data() + (lo - begin)});
    }
  }
  return parts;
}

std::vector<ShardChecksum> write_shard_parts(const FilePath& file, const std::vector<TensorPiece>& places,
                                             const std::vector<DatasetPart>& parts, int rank, unsigned slow_ms) {
  std::vector<TensorPiece> writes;
  for (const DatasetPart& p : parts) {
    if (p.dataset >= places.size())
      throw CheckpointWriteError(fmt::format("a part of tensor {} of a checkpoint of {}", p.dataset, places.size()));
    const TensorPiece& place = places[p.dataset];
    if ((p.first + p.count) * sizeof(float) > place.bytes)
      throw CheckpointWriteError(fmt::format("elements {} to {} of {}, which holds {}", p.first, p.first + p.count,
                                             place.name, place.bytes / sizeof(float)));
    writes.push_back({place.name, place.offset + p.first * sizeof(float), p.data, p.count * sizeof(float)});
  }
  // The file rank 0 created: a rank that cannot see it has the folder on storage of its own. Held
  // open until the parts are written, for their fsync (on a parallel file system one client's
  // fsync does not flush another's writes).
  const int fd = ::open(file.path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw CheckpointWriteError(fmt::format("cannot open '{}' for writing: {}{}", file.shown, std::strerror(err),
                                           err == ENOENT && rank != 0 ? kNotShared : ""));
  }
  std::vector<std::uint32_t> crcs;
  try {
    crcs = write_tensor_pieces(file.path, writes, slow_ms);
    if (::fsync(fd) != 0) throw std::system_error(errno, std::generic_category(), "fsync");
  } catch (const std::runtime_error& e) {  // std::system_error too
    ::close(fd);
    throw CheckpointWriteError(fmt::format("cannot write its part of '{}': {}", file.shown, e.what()));
  }
  ::close(fd);  // fsynced: its close reports nothing more
  std::vector<ShardChecksum> sums;
  for (std::size_t i = 0; i < parts.size(); ++i)
    sums.push_back({parts[i].dataset, parts[i].first, parts[i].count, rank, crcs[i]});
  return sums;
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

// Every rank's error, if any rank had one: afterwards `error` holds the first failing rank's
// message on every rank (empty when none failed). Collective.
void agree_on_failure(Comm& comm, std::string& error) {
  double failed = error.empty() ? 0 : 1;
  comm.allreduce_sum(&failed, 1);
  if (failed == 0) return;
  const auto all = comm.gather_bytes(error.data(), error.size(), 0);
  if (comm.rank() == 0) {
    for (const auto& text : all)
      if (!text.empty()) {
        error.assign(text.begin(), text.end());
        break;
      }
    if (failed > 1) error += fmt::format(" ({} ranks failed)", static_cast<int>(failed));
  }
  broadcast_text(comm, error);
}

// The temporary file of a write that failed: it wastes space only, so a failure to remove it
// is not the error to report.
void discard(const std::optional<TrustedFolder>& folder, const std::string& tmp) {
  if (!folder || tmp.empty()) return;
  try {
    folder->remove(tmp);
  } catch (const std::runtime_error&) {
  }
}

// A rank other than 0 opens the folder that rank 0 made: one it cannot find is on storage that
// this node does not share.
TrustedFolder shared_checkpoint_folder(const std::string& dir, const std::string& tmp) {
  try {
    return TrustedFolder("the checkpoint folder", dir, false);
  } catch (const std::system_error& e) {
    if (e.code() == std::errc::no_such_file_or_directory)
      throw CheckpointWriteError(
          fmt::format("cannot open '{}/{}' for writing: {}{}", dir, tmp, std::strerror(ENOENT), kNotShared));
    throw CheckpointWriteError(e.what());
  }
}

// Rank 0's error ends the write on every rank: the same exception everywhere, naming who failed.
[[noreturn]] void fail_everywhere(bool root, const std::string& error, const char* what) {
  if (root) throw OnEveryRank<CheckpointWriteError>(error);
  throw OnEveryRank<CheckpointWriteError>(fmt::format("rank 0 could not {} the checkpoint: {}", what, error));
}

}  // namespace

std::string save_checkpoint_parallel(Comm& comm, std::optional<TrustedFolder>& folder, const std::string& dir,
                                     const CheckpointState& s, const ShardData& mine, KeepPolicy keep,
                                     unsigned slow_ms) {
  if (!s.is_shard) throw std::logic_error("save_checkpoint_parallel: the state is not a shard's");
  if (mine.arrays.size() != 1 + optimizer_state_names(s.optimizer).size())
    throw std::logic_error(fmt::format("save_checkpoint_parallel: {} arrays for {}", mine.arrays.size(), s.optimizer));
  const bool root = comm.rank() == 0;
  const std::string name = checkpoint_file_name(s.counters.step);

  // 1. Rank 0 creates the file: the structure, every tensor's space; every rank learns where
  //    each tensor's bytes are.
  std::string error, tmp;
  std::vector<TensorPiece> pieces;
  std::vector<std::string> lines;  // "OFFSET BYTES NAME", one a tensor
  if (root) {
    try {
      if (!folder) folder.emplace(open_checkpoint_folder(dir, true));
      tmp = folder->create_temporary(name);
      pieces = create_checkpoint_file(folder->file(tmp), s);
      for (const TensorPiece& p : pieces) lines.push_back(fmt::format("{} {} {}", p.offset, p.bytes, p.name));
    } catch (const std::exception& e) {
      error = e.what();
      discard(folder, tmp);
    }
  }
  broadcast_text(comm, error);
  if (!error.empty()) fail_everywhere(root, error, "create");
  broadcast_text(comm, tmp);
  broadcast_lines(comm, lines);
  std::vector<TensorPiece> places;
  for (const std::string& line : lines) {
    TensorPiece place;
    std::istringstream(line) >> place.offset >> place.bytes >> place.name;
    places.push_back(place);
  }

  // 2. Every rank writes its part of every tensor to its place, and makes it durable, through
  //    its own hold of the folder.
  std::vector<ShardChecksum> sums;
  try {
    if (!folder) folder.emplace(shared_checkpoint_folder(dir, tmp));
    sums = write_shard_parts(folder->file(tmp), places, shard_parts(s.model, mine.begin, mine.arrays), comm.rank(),
                             slow_ms);
  } catch (const std::exception& e) {
    error = fmt::format("rank {} on {}: {}", comm.rank(), host_name(), e.what());
  }
  agree_on_failure(comm, error);
  if (!error.empty()) {
    if (root) discard(folder, tmp);
    throw OnEveryRank<CheckpointWriteError>(error);
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
      store_shard_checksums(folder->file(tmp), pieces, std::move(parts));
      folder->commit_temporary(tmp, name);
      record_latest_and_keep(*folder, s.counters.step, keep, s.best);
    } catch (const std::exception& e) {
      error = e.what();
      discard(folder, tmp);
    }
  }
  broadcast_text(comm, error);
  if (!error.empty()) fail_everywhere(root, error, "commit");
  return folder->shown(name);
}

}  // namespace slurm_train

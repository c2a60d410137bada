#include "train/h5_parallel.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "spank/jobenv/host.h"
#include "train/comm.h"
#include "train/h5.h"

namespace slurm_train {

std::vector<Hyperslab> flat_range_hyperslabs(const std::vector<std::uint64_t>& shape, std::uint64_t first,
                                             std::uint64_t count) {
  const std::uint64_t total =
      std::accumulate(shape.begin(), shape.end(), std::uint64_t{1}, std::multiplies<std::uint64_t>());
  if (first > total || count > total - first)
    throw std::invalid_argument(fmt::format("elements {} to {} of an array of {}", first, first + count, total));
  std::vector<Hyperslab> out;
  if (count == 0) return out;
  if (shape.empty()) return {Hyperslab{}};
  // Recursion on the leading dimension: a partial first row, the whole rows, a partial last row.
  const std::vector<std::uint64_t> inner_shape(shape.begin() + 1, shape.end());
  const std::uint64_t row = total / shape[0];
  auto prefixed = [&](std::uint64_t r, std::uint64_t lo, std::uint64_t n) {
    for (Hyperslab h : flat_range_hyperslabs(inner_shape, lo, n)) {
      h.start.insert(h.start.begin(), r);
      h.count.insert(h.count.begin(), 1);
      out.push_back(std::move(h));
    }
  };
  std::uint64_t at = first, end = first + count;
  if (at % row != 0) {
    const std::uint64_t r = at / row, n = std::min(end, (r + 1) * row) - at;
    prefixed(r, at % row, n);
    at += n;
  }
  if (end - at >= row) {
    Hyperslab whole{{at / row}, {(end - at) / row}};
    whole.start.insert(whole.start.end(), inner_shape.size(), 0);
    whole.count.insert(whole.count.end(), inner_shape.begin(), inner_shape.end());
    at += whole.count[0] * row;
    out.push_back(std::move(whole));
  }
  if (at < end) prefixed(at / row, 0, end - at);
  return out;
}

std::vector<std::vector<DatasetPart>> dataset_part_rounds(std::size_t datasets, const std::vector<DatasetPart>& parts,
                                                          std::size_t round_bytes) {
  const std::uint64_t most = round_bytes / sizeof(float);
  if (most == 0) throw std::invalid_argument(fmt::format("rounds of {} bytes hold no float32 element", round_bytes));
  std::vector<std::vector<DatasetPart>> rounds(datasets);
  for (const DatasetPart& p : parts) {
    if (p.dataset >= datasets)
      throw std::invalid_argument(fmt::format("a part of dataset {} of a list of {}", p.dataset, datasets));
    for (std::uint64_t done = 0; done < p.count; done += most)
      rounds[p.dataset].push_back({p.dataset, p.first + done, std::min(most, p.count - done), p.data + done});
  }
  return rounds;
}

namespace {

[[noreturn]] void mpi_fail(int rc, const char* call, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw CommError(fmt::format("MPI call {} failed at {}:{}: {}", call, __FILE__, line, text));
}
#define MPI_CHECK(call)                                    \
  do {                                                     \
    const int mpi_check_rc_ = (call);                      \
    if (mpi_check_rc_ != MPI_SUCCESS) mpi_fail(mpi_check_rc_, #call, __LINE__); \
  } while (0)

// The elements of one round's part (none: an empty selection) selected in a dataset's space.
h5::Handle select_part(hid_t dataset, const DatasetPart* part, const std::string& where) {
  h5::Handle space(H5_CHECK(H5Dget_space(dataset), where));
  if (part == nullptr) {
    H5_CHECK(H5Sselect_none(space), where);
    return space;
  }
  const int rank = H5_CHECK(H5Sget_simple_extent_ndims(space), where);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5_CHECK(H5Sget_simple_extent_dims(space, dims.data(), nullptr), where);
  const std::vector<Hyperslab> boxes =
      flat_range_hyperslabs(std::vector<std::uint64_t>(dims.begin(), dims.end()), part->first, part->count);
  if (rank == 0) return space;  // a scalar: its one element, selected already
  bool first = true;
  for (const Hyperslab& box : boxes) {
    const std::vector<hsize_t> start(box.start.begin(), box.start.end()), count(box.count.begin(), box.count.end());
    H5_CHECK(H5Sselect_hyperslab(space, first ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(), nullptr, count.data(),
                                 nullptr),
             where);
    first = false;
  }
  return space;
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw CommError(fmt::format("cannot sync '{}': {}", path, std::strerror(err)));
  }
  if (::close(fd) != 0) throw CommError(fmt::format("cannot close '{}': {}", path, std::strerror(errno)));
}

}  // namespace

void write_dataset_parts(MPI_Comm comm, const std::string& path, const std::vector<std::string>& datasets,
                         const std::vector<DatasetPart>& parts, std::size_t round_bytes, unsigned pause_ms) {
  const bool parallel = comm != MPI_COMM_NULL;
  int rank = 0;
  if (parallel) MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const std::vector<std::vector<DatasetPart>> mine = dataset_part_rounds(datasets.size(), parts, round_bytes);
  std::vector<unsigned long long> rounds(datasets.size());
  for (std::size_t d = 0; d < datasets.size(); ++d) rounds[d] = mine[d].size();
  if (parallel && !rounds.empty())
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, rounds.data(), static_cast<int>(rounds.size()), MPI_UNSIGNED_LONG_LONG,
                            MPI_MAX, comm));

  // Every collective call is made by every rank, whatever failed before it: the first failure
  // is kept, and the rank goes on with nothing to write.
  std::string failure;
  auto keep = [&](const std::exception& e) {
    if (failure.empty()) failure = parallel ? fmt::format("rank {} on {}: {}", rank, host_name(), e.what()) : e.what();
  };
  auto attempt = [&](auto&& action) {
    if (!failure.empty()) return false;
    try {
      action();
      return true;
    } catch (const std::exception& e) {
      keep(e);
      return false;
    }
  };
  // A collective HDF5 call, made even after a failure; its own failure is kept.
  auto together = [&](herr_t rc, const char* call, int line, const std::string& where) {
    if (rc >= 0) return;
    try {
      h5::fail(call, __FILE__, line, where);
    } catch (const std::exception& e) {
      keep(e);
    }
  };
  auto all_succeeded = [&](bool ok) {
    int flag = ok ? 1 : 0;
    if (parallel) MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MIN, comm));
    return flag == 1;
  };
  h5::silence_default_error_printing();
  // The open is collective: a rank that cannot see the file rank 0 created (a checkpoint folder
  // on node-local storage) would leave the others waiting in H5Fopen. The ranks agree first.
  attempt([&] {
    // open(2), not access(2): NFS revalidates a cached lookup on open only.
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    const int err = errno;
    if (fd >= 0) {
      ::close(fd);
      return;
    }
    throw CommError(fmt::format("cannot open '{}' for writing: {}{}", path, std::strerror(err),
                                err == ENOENT && parallel ? " (is the folder on storage that every node shares?)" : ""));
  });
  const bool every_rank_sees_it = all_succeeded(failure.empty());
  h5::Handle file, transfer;
  if (every_rank_sees_it) attempt([&] {
    h5::Handle access(H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), path));
    transfer = h5::Handle(H5_CHECK(H5Pcreate(H5P_DATASET_XFER), path));
    if (parallel) {
      H5_CHECK(H5Pset_fapl_mpio(access, comm, MPI_INFO_NULL), path);
      // Metadata read once and broadcast, not by every rank: at thousands of ranks, every rank's
      // reads of each dataset's object header would be a storm on the file system's servers.
      H5_CHECK(H5Pset_all_coll_metadata_ops(access, true), path);
      H5_CHECK(H5Pset_coll_metadata_write(access, true), path);
      H5_CHECK(H5Pset_dxpl_mpio(transfer, H5FD_MPIO_COLLECTIVE), path);
    }
    h5::check_thread(path);
    file = h5::Handle(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, access), path));
  });
  std::vector<h5::Handle> sets(datasets.size());
  if (every_rank_sees_it)
    for (std::size_t d = 0; d < datasets.size(); ++d)
      attempt([&] { sets[d] = h5::open_dataset(file, datasets[d], path); });
  if (every_rank_sees_it && all_succeeded(failure.empty())) {
    const float nothing = 0;
    for (std::size_t d = 0; d < datasets.size(); ++d) {
      const std::string where = path + ":" + datasets[d];
      for (std::size_t i = 0; i < rounds[d]; ++i) {
        const DatasetPart* part = failure.empty() && i < mine[d].size() ? &mine[d][i] : nullptr;
        h5::Handle in_file, in_memory;
        const hsize_t n = part ? part->count : 1;
        if (!attempt([&] {
              in_file = select_part(sets[d], part, where);
              in_memory = h5::Handle(H5_CHECK(H5Screate_simple(1, &n, nullptr), where));
              if (!part) H5_CHECK(H5Sselect_none(in_memory), where);
            })) {
          part = nullptr;  // unchecked: the rank has failed already, and only takes part now
          in_file = h5::Handle(H5Dget_space(sets[d]));
          in_memory = h5::Handle(H5Screate_simple(1, &n, nullptr));
          H5Sselect_none(in_file);
          H5Sselect_none(in_memory);
        }
        together(H5Dwrite(sets[d], H5T_NATIVE_FLOAT, in_memory, in_file, transfer, part ? part->data : &nothing),
                 "H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory, file, transfer, data)", __LINE__, where);
        if (pause_ms > 0) ::usleep(pause_ms * 1000u);
      }
    }
    // The MPI-IO driver's flush is MPI_File_sync on every rank: each node's part reaches storage.
    together(H5Fflush(file, H5F_SCOPE_GLOBAL), "H5Fflush(file, H5F_SCOPE_GLOBAL)", __LINE__, path);
  }
  sets.clear();
  if (file.get() >= 0) together(H5Fclose(file.release()), "H5Fclose(file)", __LINE__, path);
  if (!parallel) attempt([&] { fsync_path(path); });
  if (!parallel) {
    if (!failure.empty()) throw CommError(failure);
    return;
  }
  // Every rank ends with the first failing rank's error, whichever rank the job reports.
  int failed = failure.empty() ? 0 : 1, size = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  int first = failure.empty() ? size : rank;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, comm));
  if (failed == 0) return;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm));
  int length = static_cast<int>(std::min<std::size_t>(failure.size(), 4096));
  MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, first, comm));
  std::string text = failure.substr(0, static_cast<std::size_t>(length));
  text.resize(static_cast<std::size_t>(length));
  MPI_CHECK(MPI_Bcast(text.data(), length, MPI_CHAR, first, comm));
  if (failed > 1) text += fmt::format(" (and {} other rank(s))", failed - 1);
  throw OnEveryRank<CommError>(text);
}

}  // namespace slurm_train

// Parts of float32 datasets of one existing HDF5 file, written by all ranks together through
// HDF5's MPI-IO driver (H5Pset_fapl_mpio, libhdf5-openmpi) in collective writes
// (H5FD_MPIO_COLLECTIVE): each rank selects its elements of a dataset as hyperslabs, and HDF5
// hands MPI-IO one collective write per dataset and round, which the MPI library aggregates into
// large aligned requests on a parallel file system. The file's metadata is read collectively
// (one rank reads, HDF5 broadcasts). Then every rank syncs the file.
//
// HDF5's MPI build is not thread-safe: these calls, like every HDF5 call of a rank, must not run
// while another thread of the process is inside HDF5 (checkpoint_writer.h says how the one
// background thread keeps to that).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace slurm_train {

// Elements [first, first + count) of datasets[dataset], in C (row-major) order, and where this
// rank keeps them.
struct DatasetPart {
  std::size_t dataset = 0;
  std::uint64_t first = 0, count = 0;
  const float* data = nullptr;
};

// A box of an array: `count` elements along each dimension from `start`.
struct Hyperslab {
  std::vector<std::uint64_t> start, count;
};

// The boxes, in C order, whose union is elements [first, first + count) in C order of an array
// of `shape` (empty: a scalar, one element): at most 2 * (dimensions - 1) + 1 of them, none
// empty. Throws std::invalid_argument when the range passes the array's end. Pure.
std::vector<Hyperslab> flat_range_hyperslabs(const std::vector<std::uint64_t>& shape, std::uint64_t first,
                                             std::uint64_t count);

// The writes of one rank's `parts` in rounds of at most `round_bytes` each: element r of the
// result lists, for datasets[d], the rounds of its parts (a part cut into pieces of at most
// round_bytes, one a round). Throws std::invalid_argument for a dataset index out of range or
// round_bytes below one element. Pure.
std::vector<std::vector<DatasetPart>> dataset_part_rounds(std::size_t datasets, const std::vector<DatasetPart>& parts,
                                                          std::size_t round_bytes);

// Writes every rank's `parts` of `datasets` (paths in the file, the same list on every rank) into
// the existing file `path` together: the file opened collectively with the MPI-IO driver on
// `comm`, each dataset written in as many collective rounds as the rank with the most to write
// needs (dataset_part_rounds; a rank with nothing takes part with an empty selection), pausing
// `pause_ms` after each round (a testing aid, 0 otherwise), then the file flushed (MPI_File_sync)
// and closed. A rank whose HDF5 call fails goes on taking part, and the ranks agree on the
// outcome at the end, so that none waits for ever; every rank then throws CommError, the failing
// one naming the call, the file, the line and HDF5's reason. Collective over `comm`.
// With comm == MPI_COMM_NULL (a world of one process, MPI perhaps not initialised), the same
// writes go through HDF5's default driver and the file is fsynced.
void write_dataset_parts(MPI_Comm comm, const std::string& path, const std::vector<std::string>& datasets,
                         const std::vector<DatasetPart>& parts, std::size_t round_bytes, unsigned pause_ms);

}  // namespace slurm_train

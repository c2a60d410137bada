#include "train/io/contained_reads.h"

#include <hdf5.h>

#include <string>
#include <string_view>
#include <vector>

#include "train/checkpoint/checkpoint_file.h"
#include "train/data/dataset.h"
#include "train/io/crash_contained.h"

namespace slurm_train {

std::optional<int> contained_reads_main(int argc, char** argv) {
  if (argc < 2 ||
      (std::string_view(argv[1]) != kContainedReadFlag && std::string_view(argv[1]) != kContainedReadServerFlag)) {
    set_contained_read_program("/proc/self/exe");  // this program's own file, replaced on disk or not
    return std::nullopt;
  }
  // The server's children, forks of it, start with libhdf5 initialised.
  if (std::string_view(argv[1]) == kContainedReadServerFlag && H5open() < 0) return 2;
  return contained_read_child(argc, argv, [](const std::string& reader, const std::vector<std::string>& args) {
    if (args.size() == 1 && run_checkpoint_probe(reader, args[0])) return 0;
    if (run_dataset_probe(reader, args)) return 0;
    return 2;  // no such reader: a crash to the caller, who refuses the file rather than trust it
  });
}

}  // namespace slurm_train

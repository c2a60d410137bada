// libFuzzer target: the restart record (<ckpt.dir>/restarts). What it accepts must print and
// parse back to the same record. Seeds: records written by the launcher.
#include "launcher/restart_record.h"
#include "test/fuzz/fuzz_support.h"

using namespace slurm_train;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  RestartRecord record;
  try {
    record = parse_restart_record(text);
  } catch (const std::exception&) {
    return 0;
  }
  RestartRecord again = parse_restart_record(format_restart_record(record));
  if (again.starts != record.starts || again.restarts_without_progress != record.restarts_without_progress ||
      again.last_start_step != record.last_start_step || again.last_step_reached != record.last_step_reached)
    std::abort();
  next_start(record, record.last_step_reached);
  return 0;
}

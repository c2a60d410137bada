#include "train/checkpoint/write_in_flight.h"

#include <condition_variable>
#include <mutex>

namespace slurm_train {
namespace {

// Function-local so that a write begun during static initialisation finds them constructed.
struct InFlight {
  std::mutex mutex;
  std::condition_variable ended;
  int writes = 0;
};
InFlight& in_flight() {
  static InFlight state;
  return state;
}

}  // namespace

void write_in_flight_began() {
  auto& s = in_flight();
  std::lock_guard lock(s.mutex);
  ++s.writes;
}

void write_in_flight_ended() {
  auto& s = in_flight();
  {
    std::lock_guard lock(s.mutex);
    --s.writes;
  }
  s.ended.notify_all();
}

bool wait_for_writes_in_flight(std::chrono::milliseconds limit) {
  auto& s = in_flight();
  std::unique_lock lock(s.mutex);
  return s.ended.wait_for(lock, limit, [&s] { return s.writes == 0; });
}

}  // namespace slurm_train

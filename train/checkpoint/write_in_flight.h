// The background checkpoint writes of this process, counted, for code that ends the process with
// _exit (the watchdog, when a peer is lost): a write that is about to finish is worth a moment,
// since the restart otherwise resumes from the checkpoint before it and loses ckpt.every more
// steps. Thread-safe; the writer's own thread marks the begin and the end of each write.
#pragma once

#include <chrono>

namespace slurm_train {

void write_in_flight_began();
void write_in_flight_ended();  // after the file is complete, renamed into place or abandoned

// Waits until no background write is in flight, at most `limit`; true when none is.
bool wait_for_writes_in_flight(std::chrono::milliseconds limit);

}  // namespace slurm_train

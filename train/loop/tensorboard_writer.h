// A TensorBoard event file written by the trainer (records from tensorboard_record.h):
// DIR/events.out.tfevents.<unix seconds>.<host>.<pid>.<n>, the name TensorBoard's loader looks
// for ("tfevents" in it), <n> 0 unless that name is taken (two writers of one process in one
// second). Point `tensorboard --logdir` at DIR, or at its parent for one curve per DIR.
//
// A file is never appended to: a resumed run (a new process, a later second) starts a new file
// in the same DIR, and TensorBoard reads all the files of a folder as one run, in name order.
// A run that restarts from a checkpoint says so with session_start(): TensorBoard then drops the
// points of the earlier files from that step on, and shows the steps done again once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace slurm_train {

class TensorboardWriter {
 public:
  // Opens DIR as a folder of the job's (train/io/trusted_folder.h), making it and its missing
  // parents (mode 0775 less the umask), then creates the event file through it and writes its
  // file_version record. Throws UntrustedFolder when another user could change DIR,
  // std::runtime_error naming the path and the reason (std::invalid_argument for an empty DIR).
  explicit TensorboardWriter(const std::string& dir);
  // close(), but an error is dropped there: a destructor cannot throw. Call close() to see it.
  ~TensorboardWriter();
  TensorboardWriter(const TensorboardWriter&) = delete;
  TensorboardWriter& operator=(const TensorboardWriter&) = delete;

  // After close(), these and flush() throw std::logic_error.
  // Add a record, held in memory until flush(): a step's histograms (one per parameter tensor)
  // reach the file in one write. Invalid tags and negative steps throw std::invalid_argument
  // (tensorboard_record.h) and add nothing.
  void scalars(std::int64_t step, std::span<const std::pair<std::string, float>> values);
  void histogram(std::int64_t step, const std::string& tag, std::span<const float> values);
  // A SessionLog START at `step` (tensorboard_record.h): the points read before it at `step` or
  // later are dropped by TensorBoard.
  void session_start(std::int64_t step);

  // Writes the held records to the file, without fsync: a record in the page cache is visible to
  // TensorBoard at once, and a crash of the node loses at most the steps since the last close.
  // Throws std::runtime_error naming the path; what was not written stays held for a retry.
  void flush();
  // flush(), fsync and close; the writer writes nothing after. Throws std::runtime_error
  // naming the path (the file is closed all the same).
  void close();

  const std::string& path() const { return path_; }

 private:
  void require_open() const;  // std::logic_error after close()

  std::string path_;
  int fd_ = -1;
  std::string held_;
};

}  // namespace slurm_train

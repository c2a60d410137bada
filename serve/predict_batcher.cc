#include "serve/predict_batcher.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace slurm_train {

PredictBatcher::PredictBatcher(int inputs, int classes, BatchingOptions options, Run run,
                               std::function<void(int)> on_batch)
    : inputs_(inputs),
      classes_(classes),
      options_(options),
      run_(std::move(run)),
      on_batch_(std::move(on_batch)),
      thread_([this] { loop(); }) {}

PredictBatcher::~PredictBatcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

PredictBatcher::Arrival::Arrival(PredictBatcher& b) : batcher_(&b) {
  std::lock_guard lock(b.mutex_);
  ++b.arriving_;
}

PredictBatcher::Arrival::~Arrival() {
  if (!batcher_) return;
  {
    std::lock_guard lock(batcher_->mutex_);
    --batcher_->arriving_;
  }
  batcher_->changed_.notify_all();
}

PredictAnswer PredictBatcher::predict(Arrival& arrival, std::vector<float> x, int rows) {
  if (rows < 1 || x.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(inputs_))
    throw std::invalid_argument("PredictBatcher::predict: x is not [rows, inputs]");
  std::future<PredictAnswer> answer;
  {
    std::lock_guard lock(mutex_);
    if (arrival.batcher_ == this) {
      --arriving_;
      arrival.batcher_ = nullptr;
    }
    queue_.push_back(Job{std::move(x), rows, {}});
    answer = queue_.back().answer.get_future();
    queued_rows_ += rows;
  }
  changed_.notify_all();
  return answer.get();
}

void PredictBatcher::loop() {
  std::vector<Job> jobs;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every request answered
      const auto deadline = std::chrono::steady_clock::now() + options_.max_wait;
      changed_.wait_until(lock, deadline,
                          [&] { return stopping_ || arriving_ == 0 || queued_rows_ >= options_.max_rows; });
      int rows = 0;
      while (!queue_.empty() && (jobs.empty() || rows + queue_.front().rows <= options_.max_rows)) {
        rows += queue_.front().rows;
        queued_rows_ -= queue_.front().rows;
        jobs.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    run_batch(jobs);
    jobs.clear();
  }
}

void PredictBatcher::run_batch(std::vector<Job>& jobs) {
  int rows = 0;
  for (const Job& j : jobs) rows += j.rows;
  const float* x = jobs.front().x.data();
  if (jobs.size() > 1) {
    x_.resize(static_cast<std::size_t>(rows) * inputs_);
    float* to = x_.data();
    for (const Job& j : jobs) to = std::copy(j.x.begin(), j.x.end(), to);
    x = x_.data();
  }
  classes_out_.resize(static_cast<std::size_t>(rows));
  probabilities_.resize(static_cast<std::size_t>(rows) * classes_);
  // The batch is counted before any of its answers leaves: whoever holds an answer sees its batch.
  try {
    run_(x, rows, classes_out_.data(), probabilities_.data());
  } catch (...) {
    if (on_batch_) on_batch_(rows);
    for (Job& j : jobs) j.answer.set_exception(std::current_exception());
    return;
  }
  if (on_batch_) on_batch_(rows);
  int first = 0;
  for (Job& j : jobs) {
    PredictAnswer a;
    a.classes.assign(classes_out_.begin() + first, classes_out_.begin() + first + j.rows);
    a.probabilities.assign(probabilities_.begin() + static_cast<std::ptrdiff_t>(first) * classes_,
                           probabilities_.begin() + static_cast<std::ptrdiff_t>(first + j.rows) * classes_);
    first += j.rows;
    j.answer.set_value(std::move(a));
  }
}

}  // namespace slurm_train

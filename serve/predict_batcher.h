// /predict requests that arrive together run through the classifier as one batch: one matrix
// product for many rows instead of one per request, on one thread that owns the model.
//
// A batch is bounded both ways: at most max_rows rows (a request larger than that runs alone),
// and a wait of at most max_wait for more. It waits only while some request is on its way (a
// handler has announced it and is still reading or parsing it): with nothing on the way, the
// rows that are queued run at once, so that a lone request is not delayed by the wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace slurm_train {

struct BatchingOptions {
  int max_rows = 256;
  std::chrono::microseconds max_wait{2000};
};

struct PredictAnswer {
  std::vector<int> classes;          // [rows]
  std::vector<float> probabilities;  // [rows, classes]
};

class PredictBatcher {
 public:
  // run(x [rows, inputs], rows, classes [rows], probabilities [rows, classes]): the model.
  // on_batch(rows): called after each batch has run, before its answers are given (metrics).
  using Run = std::function<void(const float*, int, int*, float*)>;
  PredictBatcher(int inputs, int classes, BatchingOptions options, Run run, std::function<void(int)> on_batch = {});
  // Answers every request queued, then stops the thread.
  ~PredictBatcher();
  PredictBatcher(const PredictBatcher&) = delete;
  PredictBatcher& operator=(const PredictBatcher&) = delete;

  // Says a request is on its way for as long as it lives (from before its body is parsed until
  // it is queued or refused).
  class Arrival {
   public:
    explicit Arrival(PredictBatcher& b);
    ~Arrival();
    Arrival(const Arrival&) = delete;
    Arrival& operator=(const Arrival&) = delete;

   private:
    friend class PredictBatcher;
    PredictBatcher* batcher_;
  };

  // The answer for x [rows, inputs] (rows >= 1), once its batch has run; rethrows the model's
  // exception. Ends `arrival`'s announcement as it queues the rows.
  PredictAnswer predict(Arrival& arrival, std::vector<float> x, int rows);

 private:
  struct Job {
    std::vector<float> x;
    int rows;
    std::promise<PredictAnswer> answer;
  };
  void loop();
  void run_batch(std::vector<Job>& jobs);

  const int inputs_, classes_;
  const BatchingOptions options_;
  const Run run_;
  const std::function<void(int)> on_batch_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  int queued_rows_ = 0;
  int arriving_ = 0;
  bool stopping_ = false;
  std::vector<float> x_, probabilities_;
  std::vector<int> classes_out_;
  std::thread thread_;
};

}  // namespace slurm_train

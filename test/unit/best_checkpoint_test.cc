#include "train/checkpoint/best_checkpoint.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "train/checkpoint/checkpoint_policy.h"
#include "train/checkpoint/checkpoint_store.h"

using namespace slurm_train;

TEST_CASE("best checkpoint: the metric and which way is better") {
  CHECK(parse_best_metric("test_loss").lower_is_better);
  CHECK(!parse_best_metric("test_accuracy").lower_is_better);
  CHECK(parse_best_metric("train_loss").lower_is_better);
  CHECK(!parse_best_metric("test_loss:max").lower_is_better);
  CHECK(parse_best_metric("test_accuracy:min").lower_is_better);
  CHECK(parse_best_metric("test_accuracy:min").name == "test_accuracy");
  CHECK_THROWS_WITH_AS(parse_best_metric("val_bleu"),
                       "ckpt.keep_best = 'val_bleu': expected test_loss, test_accuracy or train_loss (val_loss, "
                       "val_accuracy: the same for a language model), optionally with :min or :max",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_best_metric("test_loss:lowest"),
                       "ckpt.keep_best = 'test_loss:lowest': expected :min or :max after the metric's name",
                       std::invalid_argument);
  CHECK_THROWS_AS(parse_best_metric("test_loss:"), std::invalid_argument);
  CHECK_THROWS_AS(parse_best_metric(""), std::invalid_argument);
}

TEST_CASE("best checkpoint: a better value, a tie, a value that is not finite, another metric's record") {
  const BestMetric loss = parse_best_metric("test_loss"), acc = parse_best_metric("test_accuracy");
  CHECK(is_better(loss, 0.5, std::nullopt));
  CHECK(is_better(loss, 0.4, BestRecord{10, "test_loss", 0.5}));
  CHECK(!is_better(loss, 0.5, BestRecord{10, "test_loss", 0.5}));  // a tie keeps the earlier
  CHECK(!is_better(loss, 0.6, BestRecord{10, "test_loss", 0.5}));
  CHECK(is_better(acc, 0.9, BestRecord{10, "test_accuracy", 0.8}));
  CHECK(!is_better(acc, 0.7, BestRecord{10, "test_accuracy", 0.8}));
  CHECK(!is_better(loss, std::nan(""), std::nullopt));
  CHECK(!is_better(loss, std::numeric_limits<double>::infinity(), std::nullopt));
  CHECK(is_better(loss, 3.0, BestRecord{10, "test_accuracy", 0.8}));
  EvaluationFigures f{0.5, 0.8, 0.6};
  CHECK(*f.value_of("test_accuracy") == 0.8);
  CHECK(*f.value_of("train_loss") == 0.6);
  CHECK(!f.value_of("bleu"));
  CHECK(*f.value_of("val_loss") == 0.5);
  CHECK(!parse_best_metric("val_accuracy").lower_is_better);
}

TEST_CASE("best checkpoint: the marker's text round trip, and bad markers refused") {
  const BestRecord r{480, "test_loss", 0.5589123456789012};
  CHECK(format_best_marker(r) == "step-00000480.h5\ntest_loss 0.5589123456789012\n");
  const BestRecord back = parse_best_marker(format_best_marker(r));
  CHECK(back.step == 480);
  CHECK(back.metric == "test_loss");
  CHECK(back.value == r.value);
  CHECK_THROWS_AS(parse_best_marker("step-00000480.h5"), std::invalid_argument);
  CHECK_THROWS_AS(parse_best_marker("latest\ntest_loss 1\n"), std::invalid_argument);
  CHECK_THROWS_AS(parse_best_marker("step-00000480.h5\ntest_loss\n"), std::invalid_argument);
  CHECK_THROWS_AS(parse_best_marker("step-00000480.h5\ntest_loss abc\n"), std::invalid_argument);
  CHECK_THROWS_AS(parse_best_marker("step-00000480.h5\n 1\n"), std::invalid_argument);
}

TEST_CASE("best checkpoint: the keep policy never removes the best; the markers resolve to their checkpoints") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "best-checkpoint-test";
  fs::remove_all(dir);
  const TrustedFolder folder = open_checkpoint_folder(dir.string(), true);
  auto touch = [&](std::uint64_t step) { std::ofstream(dir / checkpoint_file_name(step)) << "x"; };
  const KeepPolicy keep{2, 0};
  touch(10);
  record_latest_and_keep(folder, 10, keep, BestRecord{10, "test_loss", 0.5});
  for (std::uint64_t step : {20, 30, 40}) {
    touch(step);
    record_latest_and_keep(folder, step, keep);
  }
  CHECK(fs::exists(dir / checkpoint_file_name(10)));  // the best, older than the newest 2
  CHECK(!fs::exists(dir / checkpoint_file_name(20)));
  CHECK(fs::exists(dir / checkpoint_file_name(30)));
  CHECK(read_best_marker(dir)->step == 10);
  CHECK(resolve_checkpoint_marker((dir / "best").string()) == (dir / checkpoint_file_name(10)).string());
  CHECK(resolve_checkpoint_marker((dir / "latest").string()) == (dir / checkpoint_file_name(40)).string());
  CHECK(resolve_checkpoint_marker("elsewhere/step-00000001.h5") == "elsewhere/step-00000001.h5");
  // A new best: the marker moves, and the old best goes as the keep policy says.
  touch(50);
  record_latest_and_keep(folder, 50, keep, BestRecord{50, "test_loss", 0.4});
  CHECK(read_best_marker(dir)->step == 50);
  CHECK(!fs::exists(dir / checkpoint_file_name(10)));
  std::ofstream(dir / "best") << "garbage";
  std::string warned;
  CHECK(!read_best_marker(dir, [&](const std::string& l) { warned = l; }));
  CHECK(warned.find("taken as no best yet") != std::string::npos);
  CHECK_THROWS_AS(resolve_checkpoint_marker((dir / "best").string()), std::runtime_error);
  fs::remove_all(dir);
}

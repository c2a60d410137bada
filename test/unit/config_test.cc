#include "train/config.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <functional>

#include <unistd.h>

using namespace slurm_train;

namespace {

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/slurm-train-config-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("config: precedence default < file < environment < command line, with origins") {
  const std::string file = write_temp("[train]\nlr = 0.5\nepochs = 3\nseed = 9\n[model]\nhidden = [8, 4]\n");
  RunConfig c;
  apply_config_file(c, file);
  apply_config_environment(c, {"SLURM_TRAIN_TRAIN_LR=0.25", "SLURM_TRAIN_TRAIN_EPOCHS=4", "SLURM_TRAIN_BIND=strict",
                               "SLURM_TRAIN_PLUGIN=0.1.0", "HOME=/root"});
  apply_config_override(c, "train.epochs", "5");
  CHECK(c.train.seed == 9);
  CHECK(c.train.lr == 0.25);
  CHECK(c.train.epochs == 5);
  CHECK(c.model.hidden == std::vector<int>{8, 4});
  CHECK(c.train.global_batch == 256);
  CHECK(c.origin["train.seed"] == file);
  CHECK(c.origin["train.lr"] == "environment SLURM_TRAIN_TRAIN_LR");
  CHECK(c.origin["train.epochs"] == "command line");
  CHECK(c.origin.count("train.global_batch") == 0);
  std::remove(file.c_str());
}

TEST_CASE("config: unknown keys name the nearest, with the file position") {
  const std::string file = write_temp("[train]\nepochs = 2\nlearning_rate = 0.1\n");
  RunConfig c;
  CHECK(error_of([&] { apply_config_file(c, file); }) == file + ":3:1: unknown key 'train.learning_rate'");
  CHECK(error_of([&] { apply_config_override(c, "train.stpes", "1"); }) ==
        "unknown key 'train.stpes' (did you mean 'train.steps'?)");
  CHECK(nearest_config_key("lr") == "train.lr");
  CHECK(nearest_config_key("completely.different") == "");
  CHECK(error_of([&] { apply_config_environment(c, {"SLURM_TRAIN_MODEL_HIDDN=[1]"}); }) ==
        "environment variable SLURM_TRAIN_MODEL_HIDDN: not a configuration key (did you mean SLURM_TRAIN_MODEL_HIDDEN?)");
  const std::string section = write_temp("[optimiser]\nlr = 1\n");
  CHECK(error_of([&] { apply_config_file(c, section); }).find("unknown key 'optimiser.lr'") != std::string::npos);
  std::remove(file.c_str());
  std::remove(section.c_str());
}

TEST_CASE("config: values of the wrong type say what is expected") {
  RunConfig c;
  CHECK(error_of([&] { apply_config_override(c, "train.epochs", "many"); }) == "train.epochs = 'many': expected a whole number");
  CHECK(error_of([&] { apply_config_override(c, "train.lr", "1e-3x"); }) == "train.lr = '1e-3x': expected a number");
  CHECK(error_of([&] { apply_config_override(c, "train.nesterov", "maybe"); }) == "train.nesterov = 'maybe': expected true or false");
  const std::string file = write_temp("[model]\nhidden = \"wide\"\n");
  CHECK(error_of([&] { apply_config_file(c, file); }) == file + ":2:10: model.hidden: expected an array of whole numbers, e.g. [1024, 512]");
  std::remove(file.c_str());
  apply_config_override(c, "model.hidden", "[16, 8]");
  CHECK(c.model.hidden == std::vector<int>{16, 8});
  apply_config_override(c, "train.metrics", "");
  CHECK(c.train.metrics.empty());
}

TEST_CASE("config: validation lists every problem") {
  RunConfig c;
  CHECK(validate_config(c).empty());
  c.model.activation = "tanh";
  c.train.lr = 0;
  c.model.dropout = 1.0;
  const auto problems = validate_config(c);
  REQUIRE(problems.size() == 3);
  CHECK(problems[0] == "model.activation = 'tanh': expected one of: relu, gelu");
}

TEST_CASE("config: the effective configuration as TOML reads back the same") {
  RunConfig c;
  apply_config_override(c, "data.train", "a \"quoted\" path.h5");
  apply_config_override(c, "model.hidden", "[3,2]");
  const std::string file = write_temp(config_as_toml(c));
  RunConfig back;
  apply_config_file(back, file);
  CHECK(back.data.train == "a \"quoted\" path.h5");
  CHECK(back.model.hidden == std::vector<int>{3, 2});
  CHECK(config_key_env_name("train.global_batch") == "SLURM_TRAIN_TRAIN_GLOBAL_BATCH");
  std::remove(file.c_str());
}

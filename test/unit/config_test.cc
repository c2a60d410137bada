#include "train/config/config.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>

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

TEST_CASE("config: the launcher's [run] keys: in a file, by their own variables, checked, with origins") {
  const std::string file = write_temp("[run]\nlog_dir = \"logs\"\nhang_timeout = 30\n");
  RunConfig c;
  apply_config_file(c, file);
  CHECK(c.run.log_dir == "logs");
  CHECK(c.run.hang_timeout == 30);
  CHECK(c.origin["run.hang_timeout"] == file);
  CHECK(config_key_env_name("run.log_dir") == "SLURM_TRAIN_LOG_DIR");
  CHECK(config_key_env_name("run.max_restarts_without_progress") == "SLURM_TRAIN_MAX_RESTARTS_WITHOUT_PROGRESS");
  apply_config_environment(c, {"SLURM_TRAIN_PROGRESS=lines", "SLURM_TRAIN_MAX_RESTARTS_WITHOUT_PROGRESS=5"});
  CHECK(c.run.progress == "lines");
  CHECK(c.run.max_restarts_without_progress == 5);
  CHECK(c.origin["run.progress"] == "environment SLURM_TRAIN_PROGRESS");
  apply_config_override(c, "run.log_dir", "");
  CHECK(c.run.log_dir.empty());
  CHECK(c.origin["run.log_dir"] == "command line");
  CHECK(validate_config(c).empty());
  CHECK(describe_config(c).find("run.progress") != std::string::npos);
  CHECK(config_as_toml(c).find("[run]\nlog_dir = ''\n") != std::string::npos);

  CHECK(error_of([&] { apply_config_environment(c, {"SLURM_TRAIN_HANG_TIMEOUT=nan"}); }) ==
        "run.hang_timeout = 'nan': expected a finite number");
  c.run.hang_timeout = -1;
  c.run.progress = "fancy";
  c.run.max_restarts_without_progress = -2;
  const auto problems = validate_config(c);
  REQUIRE(problems.size() == 3);
  CHECK(problems[0] == "run.hang_timeout = -1: expected seconds (a finite number), or 0 to turn hang detection off");
  CHECK(problems[1] == "run.max_restarts_without_progress = -2: expected 0 (never give up) or more");
  CHECK(problems[2] == "run.progress = 'fancy': expected one of: auto, live, lines");
  std::remove(file.c_str());
}

TEST_CASE("config: a table header without a name is refused with its place (toml++ 3.3 would abort)") {
  for (const auto& [text, place] :
       std::vector<std::pair<std::string, std::string>>{{"[#x]\n", ":1:2: "},
                                                        {"[train]\nlr = 0.1\n  [ =x]\n", ":3:5: "},
                                                        {"[[,x]]\n", ":1:3: "},
                                                        {"[\n[ata*\n", ":1:2: "},
                                                        {"[ \r\n", ":1:3: "}}) {
    const std::string file = write_temp(text);
    RunConfig c;
    CHECK(error_of([&] {
            apply_config_file(c, file);
          }).starts_with(file + place + "a table header must start with a name"));
    std::remove(file.c_str());
  }
  // What the parser checks by assertion is an error about the file too.
  const std::string nested = write_temp("[train]\nlr = [[[[}}}}\n");
  RunConfig n;
  CHECK(error_of([&] { apply_config_file(n, nested); }) ==
        nested + ": not TOML that the parser can read (it stopped on its check '!is_value_terminator(*cp)')");
  std::remove(nested.c_str());
  // Nor a character that is not ASCII outside strings and comments (toml++ reaches code it marks
  // unreachable on some).
  const std::string accent = write_temp("ses\xcd\x91[T \n");
  RunConfig r;
  CHECK(error_of([&] { apply_config_file(r, accent); }) ==
        accent +
            ":1:4: a character that is not ASCII outside a string or comment (TOML allows them only in quoted "
            "strings and comments)");
  std::remove(accent.c_str());
  // A '[' or UTF-8 in a comment or a string, on one line or several, is fine.
  const std::string fine = write_temp(
      "# [#x] \xc3\xa9\n[data]\ntrain = \"[#x]\"\nfeatures = \"/donn\xc3\xa9"
      "es\"\ntest = \"\"\"\n[#x]\n\"\"\"\n"
      "labels = \'\'\'\n[=x]\'\'\'\n[ \"model\" ]\nhidden = [\n  1,\n]\n");
  RunConfig c;
  apply_config_file(c, fine);
  CHECK(c.data.train == "[#x]");
  CHECK(c.data.features ==
        "/donn\xc3\xa9"
        "es");
  CHECK(c.data.test == "[#x]\n");
  CHECK(c.data.labels == "[=x]");
  CHECK(c.model.hidden == std::vector<int>{1});
  std::remove(fine.c_str());
}

TEST_CASE("config: a text value from the command line or the environment must be UTF-8") {
  RunConfig c;
  apply_config_override(c, "ckpt.dir",
                        "/scratch/donn\xc3\xa9"
                        "es/\xf0\x9f\x93\x81");
  CHECK(c.ckpt.dir ==
        "/scratch/donn\xc3\xa9"
        "es/\xf0\x9f\x93\x81");
  CHECK(error_of([&] { apply_config_override(c, "ckpt.dir", "/scratch/c\xb0x"); }) ==
        "ckpt.dir: byte 11 of the value (0xb0) is not UTF-8 (expected UTF-8 text)");
  CHECK(error_of([&] { apply_config_override(c, "ckpt.dir", "\xc0\xaf"); }).find("byte 1 ") !=
        std::string::npos);  // overlong
  CHECK(error_of([&] { apply_config_override(c, "ckpt.dir", "\xed\xa0\x80"); }).find("byte 1 ") !=
        std::string::npos);  // surrogate
  CHECK(error_of([&] { apply_config_environment(c, {"SLURM_TRAIN_DATA_TRAIN=x\xe2\x82"}); }) ==
        "data.train: byte 2 of the value (0xe2) is not UTF-8 (expected UTF-8 text)");
  CHECK(c.ckpt.dir ==
        "/scratch/donn\xc3\xa9"
        "es/\xf0\x9f\x93\x81");
}

TEST_CASE("config: unknown keys name the nearest, with the file position") {
  const std::string file = write_temp("[train]\nepochs = 2\nlearning_rate = 0.1\n");
  RunConfig c;
  CHECK(error_of([&] { apply_config_file(c, file); }) ==
        file + ":3:1: unknown key 'train.learning_rate' (did you mean 'train.lr'?)");
  CHECK(error_of([&] { apply_config_override(c, "train.stpes", "1"); }) ==
        "unknown key 'train.stpes' (did you mean 'train.steps'?)");
  CHECK(nearest_config_key("lr") == "train.lr");
  CHECK(nearest_config_key("completely.different") == "");
  // What nanoGPT and Hugging Face's Trainer call them, with or without a section.
  CHECK(nearest_config_key("model.block_size") == "model.block");
  CHECK(nearest_config_key("train.max_steps") == "train.steps");
  CHECK(nearest_config_key("batch_size") == "train.global_batch");
  CHECK(nearest_config_key("max_grad_norm") == "train.clip_norm");
  CHECK(nearest_config_key("train.max_stepsx") == "");
  CHECK(
      error_of([&] { apply_config_environment(c, {"SLURM_TRAIN_MODEL_HIDDN=[1]"}); }) ==
      "environment variable SLURM_TRAIN_MODEL_HIDDN: not a configuration key (did you mean SLURM_TRAIN_MODEL_HIDDEN?)");
  const std::string section = write_temp("[optimiser]\nlr = 1\n");
  CHECK(error_of([&] { apply_config_file(c, section); }).find("unknown key 'optimiser.lr'") != std::string::npos);
  std::remove(file.c_str());
  std::remove(section.c_str());
}

TEST_CASE("config: a control character in the file is refused with its place, not an assertion of the parser") {
  // "[\x11data]" made toml++ 3.3 abort (found by the config fuzzer).
  const std::string header = write_temp(std::string("[data]\ntrain = \"a\"\n[\x11train]\n"));
  const std::string nul = write_temp(std::string("[train]\nlr = 0.1\0\n", 18));
  const std::string fine = write_temp("# tabs\tand CRLF line ends are fine\r\n[train]\r\nlr = 0.1\r\n");
  RunConfig c;
  CHECK(error_of([&] { apply_config_file(c, header); }) ==
        header + ":3:2: control character U+0011 (TOML allows only tab and line ends)");
  CHECK(error_of([&] { apply_config_file(c, nul); }) ==
        nul + ":2:9: control character U+0000 (TOML allows only tab and line ends)");
  CHECK(error_of([&] { apply_config_file(c, fine); }) == "");
  CHECK(c.train.lr == 0.1);
  for (const auto& f : {header, nul, fine}) std::remove(f.c_str());
}

TEST_CASE("config: values of the wrong type say what is expected") {
  RunConfig c;
  CHECK(error_of([&] { apply_config_override(c, "train.epochs", "many"); }) ==
        "train.epochs = 'many': expected a whole number in [-2147483648, 2147483647]");
  CHECK(error_of([&] { apply_config_override(c, "train.lr", "1e-3x"); }) ==
        "train.lr = '1e-3x': expected a finite number");
  CHECK(error_of([&] { apply_config_override(c, "train.nesterov", "maybe"); }) ==
        "train.nesterov = 'maybe': expected true or false");
  const std::string file = write_temp("[model]\nhidden = \"wide\"\n");
  CHECK(error_of([&] { apply_config_file(c, file); }) ==
        file + ":2:10: model.hidden: expected an array of whole numbers, e.g. [1024, 512]");
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

TEST_CASE("config: a whole number that does not fit its key is refused, never wrapped") {
  RunConfig c;
  const std::string file = write_temp("[model]\nhidden = [4294967312]\n[train]\nepochs = 4294967297\n");
  CHECK(error_of([&] { apply_config_file(c, file); }) ==
        file + ":2:10: model.hidden = 4294967312: expected a whole number in [-2147483648, 2147483647]");
  const std::string epochs = write_temp("[train]\nepochs = 4294967297\n");
  CHECK(error_of([&] { apply_config_file(c, epochs); }) ==
        epochs + ":2:10: train.epochs = 4294967297: expected a whole number in [-2147483648, 2147483647]");
  CHECK(c.train.epochs == 10);
  CHECK(error_of([&] { apply_config_override(c, "model.hidden", "[16, 4294967312]"); }) ==
        "model.hidden = '4294967312': expected a whole number in [-2147483648, 2147483647]");
  CHECK(error_of([&] { apply_config_override(c, "train.steps", "9223372036854775808"); }) ==
        "train.steps = '9223372036854775808': expected a whole number in [-9223372036854775808, 9223372036854775807]");
  std::remove(file.c_str());
  std::remove(epochs.c_str());
}

TEST_CASE("config: non-finite numbers are refused in every source") {
  RunConfig c;
  for (const char* text : {"inf", "-inf", "nan", "infinity"})
    CHECK(error_of([&] { apply_config_override(c, "train.eps", text); }) ==
          std::string("train.eps = '") + text + "': expected a finite number");
  const std::string file = write_temp("[train]\nweight_decay = inf\n");
  CHECK(error_of([&] { apply_config_file(c, file); }) ==
        file + ":2:16: train.weight_decay = inf: expected a finite number");
  const std::string nan = write_temp("[model]\ndropout = nan\n");
  CHECK(error_of([&] { apply_config_file(c, nan); }) == nan + ":2:11: model.dropout = nan: expected a finite number");
  CHECK(error_of([&] { apply_config_environment(c, {"SLURM_TRAIN_TRAIN_LR=nan"}); }) ==
        "train.lr = 'nan': expected a finite number");
  std::remove(file.c_str());
  std::remove(nan.c_str());
}

TEST_CASE("config: numbers outside what trains are refused by validation") {
  auto problems_with = [](const std::string& key, const std::string& value) {
    RunConfig c;
    apply_config_override(c, key, value);
    return validate_config(c);
  };
  CHECK(problems_with("train.lr", "1e30") ==
        std::vector<std::string>{"train.lr = 1e+30: expected a number in (0, 10]"});
  CHECK(problems_with("train.weight_decay", "1e6") ==
        std::vector<std::string>{"train.weight_decay = 1000000: expected a number in [0, 10]"});
  CHECK(problems_with("train.eps", "0") == std::vector<std::string>{"train.eps = 0: expected a number in (0, 1]"});
  CHECK(problems_with("train.bucket_mb", "1e300").size() == 1);
  CHECK(problems_with("data.num_classes", "100000").size() == 1);
  // On a GPU the optimizer shards for the GPT only.
  CHECK(problems_with("train.shard_optimizer", "true").empty());
  {
    RunConfig g;
    apply_config_override(g, "train.shard_optimizer", "true");
    apply_config_override(g, "train.device", "cuda");
    CHECK(validate_config(g) ==
          std::vector<std::string>{"train.shard_optimizer = true with train.device = cuda: on a GPU the optimizer is "
                                   "sharded for model.kind = \"gpt\" only so far, and model.kind = \"mlp\"; set "
                                   "train.shard_optimizer = false or train.device = cpu"});
    apply_config_override(g, "model.kind", "gpt");
    CHECK(validate_config(g).empty());
  }
  RunConfig c;
  c.train.clip_norm = std::numeric_limits<double>::infinity();
  c.train.momentum = std::numeric_limits<double>::quiet_NaN();
  CHECK(validate_config(c).size() == 2);
}

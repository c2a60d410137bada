#include "launcher/ckpt_command.h"

#include <fmt/format.h>

#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>

#include "launcher/exit_codes.h"
#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_store.h"

namespace slurm_train {

namespace {

std::string local_time(std::time_t t) {
  std::tm tm{};
  localtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

std::string human_bytes(std::uintmax_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

int list(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) throw std::runtime_error(fmt::format("'{}' is not a folder", dir));
  const auto entries = list_checkpoints(dir);
  if (entries.empty()) {
    std::cout << fmt::format("{}: no checkpoints\n", dir);
    return kExitOk;
  }
  const auto best = read_best_marker(dir, [](const std::string& line) { std::cerr << line << "\n"; });
  std::cout << fmt::format("{:>10}  {:>10}  {:<19}  {}\n", "step", "size", "written", "status");
  for (const auto& e : entries) {
    const auto problems = verify_checkpoint_file(e.path);
    std::cout << fmt::format(
        "{:>10}  {:>10}  {:<19}  {}{}\n", e.step, human_bytes(e.bytes), local_time(e.modified),
        problems.empty() ? "valid" : "INVALID: " + problems.front(),
        best && best->step == e.step ? fmt::format("  best ({} {:.6g})", best->metric, best->value) : "");
  }
  return kExitOk;
}

// Each file's verdict, one line; 1 when any fails (or a folder holds none).
int verify(const std::string& target) {
  std::vector<std::string> files;
  if (std::filesystem::is_directory(target)) {
    for (const auto& e : list_checkpoints(target)) files.push_back(e.path);
    if (files.empty()) {
      std::cout << fmt::format("FAIL {}: no checkpoints (step-<8 digits>.h5) in this folder\n", target);
      return kExitFailed;
    }
  } else {
    files.push_back(resolve_checkpoint_marker(target));
  }
  int failed = 0;
  for (const auto& f : files) {
    const auto problems = verify_checkpoint_file(f);
    if (problems.empty()) {
      std::cout << fmt::format("OK   {}\n", f);
      continue;
    }
    ++failed;
    std::cout << fmt::format("FAIL {}\n", f);
    for (const auto& p : problems) std::cout << "  " << p << "\n";
  }
  std::cout << fmt::format("{} of {} checkpoint(s) valid\n", files.size() - failed, files.size());
  return failed == 0 ? kExitOk : kExitFailed;
}

}  // namespace

void add_ckpt_command(CLI::App& app, int& exit_code) {
  CLI::App* ckpt = app.add_subcommand("ckpt", "inspect and verify checkpoints");
  ckpt->require_subcommand(1);
  auto target = std::make_shared<std::string>();

  CLI::App* l = ckpt->add_subcommand("list", "the checkpoints of a folder: step, size, time, valid or not");
  l->add_option("DIR", *target, "checkpoint folder")->required();
  l->callback([target, &exit_code] { exit_code = list(*target); });

  CLI::App* s = ckpt->add_subcommand("show", "a checkpoint's metadata and its tensors' names, shapes and types");
  s->add_option("FILE", *target, "checkpoint file")->required()->check(CLI::ExistingFile);
  s->callback([target, &exit_code] {
    std::cout << describe_checkpoint_file(*target);
    exit_code = kExitOk;
  });

  CLI::App* v = ckpt->add_subcommand(
      "verify", "check every checksum of a file or of every checkpoint in a folder; exit 1 on any failure");
  v->add_option("TARGET", *target, "checkpoint file or folder")->required()->check(CLI::ExistingPath);
  v->callback([target, &exit_code] { exit_code = verify(*target); });
}

}  // namespace slurm_train

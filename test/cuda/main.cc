// The CUDA test binary's main: doctest, plus a listener that prints every test case skipped for
// want of a GPU, one line each with the reason, so that test/run-tests.sh can list and count
// them as skipped (never as passed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>

#include "test/cuda/cuda_test_support.h"
#include "train/steps/device.h"

namespace slurm_train::cuda_test {

const std::string& no_gpu_reason() {
  static const std::string reason = [] {
    const CudaProbe probe = probe_cuda();
    return probe.devices > 0 ? std::string() : "no CUDA device: " + probe.problem;
  }();
  return reason;
}

namespace {

struct SkipReasons : doctest::IReporter {
  explicit SkipReasons(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  // Also called for cases left out by a filter (-tc=...); only the skip decorator is reported.
  void test_case_skipped(const doctest::TestCaseData& tc) override {
    if (tc.m_skip) std::cout << "skipped: " << tc.m_name << ": " << no_gpu_reason() << "\n";
  }
};

REGISTER_LISTENER("skip-reasons", 1, SkipReasons);

}  // namespace
}  // namespace slurm_train::cuda_test

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  return context.run();
}

#include "launcher/serve_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <system_error>
#include <thread>

#include "launcher/cli_validators.h"
#include "launcher/exit_codes.h"
#include "launcher/preempt_signals.h"
#include "serve/bearer_token.h"
#include "serve/model_server.h"
#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_store.h"
#include "train/models/cuda_gpt_sampler.h"
#include "train/steps/device.h"

namespace slurm_train {

namespace {

struct ServeArgs {
  std::string model;
  ServeOptions options;
  std::string device = "auto";
  int threads = 0;
  std::string token_file;
  bool no_auth = false;
  double batch_wait_ms = 2;
};

bool is_loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

// Where serve keeps the token it makes: a folder of the user's own in their home, which the
// login node sees too (the user reads the token there to call the service).
std::string token_folder() {
  const char* home = std::getenv("HOME");
  std::string h = home && *home == '/' ? home : "";
  if (h.empty())
    if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_dir) h = pw->pw_dir;
  if (h.empty())
    throw std::runtime_error("serve: no home folder for the bearer token (HOME is not set); use --token-file");
  return h + "/.slurm-train/serve";
}

// The token every request must carry: --token-file's, or a new one in a file of its own whose
// path is printed (removed again when serve stops); none with --no-auth, on the loopback address
// only.
struct ServeToken {
  std::string token, made_file;
};

ServeToken serve_token(const ServeArgs& a, const std::string& node) {
  if (a.no_auth) {
    if (!a.token_file.empty())
      throw std::runtime_error("serve: --no-auth and --token-file contradict each other; give one");
    if (!is_loopback(a.options.host))
      throw std::runtime_error(
          fmt::format("serve --no-auth --host {}: without a token, anyone who reaches the node could use the service; "
                      "--no-auth is for the loopback address only (127.0.0.1, ::1, localhost)",
                      a.options.host));
    return {};
  }
  if (!a.token_file.empty()) return {read_token_file(a.token_file), ""};
  const char* job = std::getenv("SLURM_JOB_ID");
  const TokenFile made = make_token_file(
      token_folder(), fmt::format("serve-{}-{}-{}.token", job && *job ? job : "local", node, ::getpid()));
  return {made.token, made.path};
}

// The CPUs this task may use: what Slurm bound it to, else the machine's.
int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string node_name() {
  if (const char* n = std::getenv("SLURMD_NODENAME"); n && *n) return n;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  return host;
}

ServedModel load(const ServeArgs& a, int threads) {
  ServedModel m;
  m.file = checkpoint_to_read(a.model, [](const std::string& line) { std::cerr << "slurm-train: " << line << "\n"; });
  CheckpointState s = read_model_file(m.file);
  m.kind = s.model.kind;
  m.step = s.counters.step;
  if (s.model.kind == "mlp") {
    if (a.device == "cuda")
      throw std::runtime_error(fmt::format(
          "serve --device cuda: {} holds a classifier (an mlp), which serve runs on the CPU; use --device cpu or auto",
          m.file));
    m.device = "cpu";
    m.classifier = std::make_unique<Classifier>(s.model, s.params, s.recipe, threads);
    return m;
  }
  check_sample_inputs(s.model.gpt, SampleOptions{});
  const CudaProbe probe = a.device == "cpu" ? CudaProbe{} : probe_cuda();
  const bool on_gpu = a.device != "cpu" && probe.devices > 0;
  if (a.device == "cuda" && !on_gpu)
    throw std::runtime_error(fmt::format("serve --device cuda: no usable GPU: {}", probe.problem));
  if (on_gpu) {
    m.device = fmt::format("cuda:0 ({})", probe.names.empty() ? "" : probe.names[0]);
    m.decoders.push_back(make_cuda_gpt_decoder(s.model.gpt, s.params, 0));
  } else {
    // One text at a time each: as many at once as there are threads, on one copy of the weights.
    m.device = "cpu";
    const auto params = std::make_shared<const HostVector<float>>(std::move(s.params));
    for (int i = 0; i < threads; ++i) m.decoders.push_back(std::make_unique<GptSampler>(s.model.gpt, params));
  }
  return m;
}

// SIGTERM and SIGINT: the handler writes the signal's number to a pipe, which a thread of ours
// reads to stop the server. A handler, not sigwait(): OpenBLAS starts its threads when it is
// loaded, before main, with every signal unblocked, and any of them may receive the signal.
int g_stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t n = write(g_stop_pipe[1], &byte, 1);
  errno = saved;
}

int serve(const ServeArgs& a) {
  if (pipe2(g_stop_pipe, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT})
    if (sigaction(sig, &action, nullptr) != 0) throw std::system_error(errno, std::generic_category(), "sigaction");

  ServeOptions options = a.options;
  const std::string node = node_name();
  const ServeToken token = serve_token(a, node);
  options.token = token.token;
  struct RemoveMadeToken {
    std::string path;
    ~RemoveMadeToken() {
      if (!path.empty()) ::unlink(path.c_str());
    }
  } remove_made_token{token.made_file};
  options.batching.max_wait = std::chrono::microseconds(static_cast<long long>(a.batch_wait_ms * 1000));
  const int threads = a.threads > 0 ? a.threads : usable_cpus();
  ServedModel model = load(a, threads);
  const std::string file = model.file, kind = model.kind, device = model.device;
  const std::uint64_t step = model.step;
  ModelServer server(options, std::move(model));
  const int port = server.bind();

  const bool loopback = is_loopback(options.host);
  const bool any = options.host == "0.0.0.0" || options.host == "::";
  const std::string url_host =
      any ? node : (options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host);
  std::string where = fmt::format("node {}", node);
  if (const char* job = std::getenv("SLURM_JOB_ID")) where += fmt::format(", job {}", job);
  std::cout << fmt::format("slurm-train serve: {} ({}{}, on {}) at http://{}:{} ({}){}\n", file, kind,
                           step ? fmt::format(", step {}", step) : "", device, url_host, port, where,
                           options.token.empty() ? ", no authentication (--no-auth)" : ", bearer token required")
            << std::flush;
  if (!token.made_file.empty())
    std::cout << fmt::format(
                     "slurm-train serve: the bearer token is in {} (yours alone; removed when serve stops): curl -H "
                     "\"Authorization: Bearer $(cat {})\" http://{}:{}/health\n",
                     token.made_file, token.made_file, url_host, port)
              << std::flush;
  if (loopback)
    std::cout << fmt::format(
                     "slurm-train serve: listening on the loopback address only; from another machine: "
                     "ssh -N -L {}:127.0.0.1:{} {}, or serve --host 0.0.0.0\n",
                     port, port, node)
              << std::flush;

  std::atomic<int> stopped_by{0};
  std::thread signals([&] {
    unsigned char byte = 0;
    ssize_t n;
    while ((n = read(g_stop_pipe[0], &byte, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1 || byte == 0) return;  // 0: serve() returned by itself
    stopped_by = byte;
    std::cerr << fmt::format("slurm-train serve: {}: answering the requests in flight, then stopping\n",
                             signal_name(byte));
    server.stop();
  });
  server.serve();
  if (!stopped_by) {
    const unsigned char zero = 0;
    [[maybe_unused]] const ssize_t n = write(g_stop_pipe[1], &zero, 1);
  }
  signals.join();
  if (!stopped_by) throw std::runtime_error(fmt::format("the server on port {} stopped unexpectedly", port));
  std::cerr << "slurm-train serve: stopped\n";
  return kExitOk;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* s = app.add_subcommand(
      "serve", "serve a trained model over HTTP: POST /predict (classifier), POST /generate (gpt), /health, /metrics");
  s->add_option("MODEL_OR_CHECKPOINT", a->model,
                "model file (train.save), checkpoint, a checkpoint folder (its newest valid one) or its marker: "
                "DIR/best or DIR/latest")
      ->required()
      ->check(CLI::ExistingPath);
  s->add_option("--port", a->options.port, "TCP port; 0: any free one (printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  s->add_option("--host", a->options.host,
                "address to listen on; the default, 127.0.0.1, lets only this node's users in; 0.0.0.0: every "
                "address")
      ->capture_default_str();
  s->add_option("--device", a->device,
                "auto: a GPT on the first visible GPU when there is one, else the CPU; cpu; cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  s->add_option("--threads", a->threads,
                "compute threads: the classifier's matrix products, or texts generated at once on the CPU; 0: the CPUs "
                "this task may use")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  s->add_option("--token-file", a->token_file,
                "file (mode 600, yours) whose first line is the bearer token every request must carry; without: serve "
                "makes a token in a new file of ~/.slurm-train/serve and prints its path")
      ->check(CLI::ExistingFile);
  s->add_flag("--no-auth", a->no_auth,
              "no bearer token: every user of this node may call the service (loopback addresses only)");
  s->add_option("--connections", a->options.http.connections, "connections open at once (503 above)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  s->add_option("--connections-per-source", a->options.http.per_source,
                "connections open at once from one address (429 above)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  s->add_option("--workers", a->options.http.workers, "requests handled at once (a thread each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  s->add_option("--queue", a->options.http.queue, "requests read and waiting for a worker (503 above)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  s->add_option("--max-body", a->options.http.body_bytes, "largest request body, bytes, however it is sent (413 above)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30));
  s->add_option("--max-rows", a->options.limits.max_rows, "rows one /predict may send")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  s->add_option("--max-tokens", a->options.limits.max_tokens, "tokens one /generate may ask for")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  s->add_option("--batch-rows", a->options.batching.max_rows, "most rows of /predict requests run together")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  s->add_option("--batch-wait-ms", a->batch_wait_ms,
                "longest wait for more requests to batch, while some are on their way; 0: never wait")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));
  s->callback([a, &exit_code] { exit_code = serve(*a); });
}

}  // namespace slurm_train

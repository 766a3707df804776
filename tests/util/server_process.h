// Runs the real `flashserve serve` binary on free loopback ports for integration tests, and
// stops it with SIGTERM like an operator would.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "tests/util/tiny_model.h"

namespace flashserve::test {

class ServerProcess {
 public:
  // Starts `flashserve serve --model <model> --host 127.0.0.1 --port P --grpc-port G <extra...>`
  // and waits until its log names both ports and GET /health answers (over HTTPS when --tls-cert is
  // among the arguments; fails the test after 180 s or if the process exits; starts again on new
  // ports when another process took one first). Its stdout and stderr go to a log file, or to
  // `output_fd` when given (a pipe nobody reads, to stall its logging).
  explicit ServerProcess(const std::string& model_path, const std::vector<std::string>& extra_args = {},
                         int output_fd = -1);
  ~ServerProcess();  // stop(), if still running
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int http_port() const { return http_port_; }
  int grpc_port() const { return grpc_port_; }
  std::string grpc_address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  pid_t pid() const { return pid_; }
  bool running();                 // false once the process has exited
  // SIGTERM, then wait (SIGKILL after `timeout_s`). Returns the exit status (128+signal if killed).
  int stop(int timeout_s = 60);
  std::string log() const;        // everything it wrote to stdout and stderr so far

 private:
  enum class Start { Ready, PortTaken, Exited, TimedOut };
  Start start(const std::string& model_path, const std::vector<std::string>& extra_args, int output_fd);

  pid_t pid_ = -1;
  int http_port_ = 0, grpc_port_ = 0;
  int exit_status_ = -1;
  std::string log_path_;
};

struct ExitResult {
  int status;         // exit code, or 128 + signal
  std::string log;    // stderr, then stdout
  long max_rss_kib;   // the process's peak resident memory
  std::string out;    // stdout alone
};
// Runs `flashserve <args...>` to completion (SIGKILL after `timeout_s`).
ExitResult run_to_exit(const std::vector<std::string>& args, int timeout_s = 300);

// A loopback TCP port that was free a moment ago.
int free_port();

// The tiny model shape for server tests: head dim 64, which the CUDA kernels take too, so the same
// suites run on a GPU (and on the emulated one) as on the CPU.
TinyModelSpec tiny_spec_for_server();

// That tiny random Llama GGUF (written once per process) for server tests that need no real model.
const std::string& tiny_model_for_server();

}  // namespace flashserve::test

#include "tests/util/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/util/tiny_model.h"

namespace flashserve::test {
namespace {

using namespace std::chrono_literals;

std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

int decode_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// The binary under test: FLASHSERVE_TEST_BINARY when set (the server with emulated CUDA kernels runs
// the same suites that way: its --device auto finds the emulated GPU), else the one this build made.
std::string binary_under_test() {
  const char* chosen = std::getenv("FLASHSERVE_TEST_BINARY");
  return chosen != nullptr && *chosen != '\0' ? chosen : FLASHSERVE_BINARY;
}

// fork + exec of the flashserve binary with stdout and stderr going to `log_path` (or `output_fd`).
// stdout goes to out_path when one is given, else to the log with stderr.
pid_t spawn(std::vector<std::string> args, const std::string& log_path, int output_fd = -1,
            const std::string& out_path = "") {
  args.insert(args.begin(), binary_under_test());
  const pid_t pid = fork();
  if (pid == 0) {
    const int log = output_fd >= 0 ? output_fd : open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out_path.empty() ? log : open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    execv(args[0].c_str(), argv_of(args).data());
    _exit(127);
  }
  return pid;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

ExitResult run_to_exit(const std::vector<std::string>& args, int timeout_s) {
  const std::string log_path = temp_model_path("run-log") + ".txt", out_path = temp_model_path("run-out") + ".txt";
  const pid_t pid = spawn(args, log_path, -1, out_path);
  int status = 0;
  rusage usage{};
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);;) {
    if (wait4(pid, &status, WNOHANG, &usage) == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  const std::string out = read_file(out_path);
  return {decode_status(status), read_file(log_path) + out, usage.ru_maxrss, out};
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TinyModelSpec tiny_spec_for_server() {
  TinyModelSpec spec;
  spec.dim = 128;
  spec.num_heads = 2;
  spec.num_kv_heads = 1;
  return spec;
}

const std::string& tiny_model_for_server() {
  static const std::string path = [] {
    const std::string p = temp_model_path("server");
    write_tiny_model(p, tiny_spec_for_server());
    return p;
  }();
  return path;
}

// A port that was free when free_port() probed it can be taken before the server binds it (ctest
// runs binaries side by side, and load tests open many client sockets): the server then exits
// naming the port, while another server may even answer /health on it. So the server is ready only
// once its own log names both ports, and a lost race starts over on new ports.
ServerProcess::ServerProcess(const std::string& model_path, const std::vector<std::string>& extra_args,
                             int output_fd) {
  for (int attempt = 1;; ++attempt) {
    const Start s = start(model_path, extra_args, output_fd);
    if (s == Start::Ready) return;
    if (s == Start::PortTaken && attempt < 3) continue;
    ADD_FAILURE() << (s == Start::PortTaken ? "flashserve lost its ports three times:\n"
                      : s == Start::Exited  ? "flashserve exited with status " + std::to_string(exit_status_) +
                                                 " during startup:\n"
                                            : std::string("flashserve did not become ready within 180 s:\n"))
                  << log();
    return;
  }
}

ServerProcess::Start ServerProcess::start(const std::string& model_path, const std::vector<std::string>& extra_args,
                                          int output_fd) {
  http_port_ = free_port();
  grpc_port_ = free_port();
  exit_status_ = -1;
  log_path_ = temp_model_path("server-log") + ".txt";
  std::vector<std::string> args = {"serve", "--model", model_path, "--host", "127.0.0.1",
                                   "--port", std::to_string(http_port_), "--grpc-port", std::to_string(grpc_port_)};
  // A modest KV cache unless the test sizes it: tests run side by side on small machines.
  if (std::find(extra_args.begin(), extra_args.end(), "--kv-cache-bytes") == extra_args.end()) {
    args.insert(args.end(), {"--kv-cache-bytes", std::to_string(256 << 20)});
  }
  // One kernel thread unless the test asks: ctest runs test binaries side by side, and kernel
  // threads that spin at barriers crawl when they share cores with another server's.
  if (std::find(extra_args.begin(), extra_args.end(), "--threads") == extra_args.end()) {
    args.insert(args.end(), {"--threads", "1"});
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = spawn(args, log_path_, output_fd);
  const bool tls = std::find(extra_args.begin(), extra_args.end(), "--tls-cert") != extra_args.end();
  const std::string ours = std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(http_port_) +
                           " (OpenAI API under /v1), gRPC on 127.0.0.1:" + std::to_string(grpc_port_);
  httplib::Client client((tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(http_port_));
  client.enable_server_certificate_verification(false);
  client.set_connection_timeout(1);
  for (auto deadline = std::chrono::steady_clock::now() + 180s; std::chrono::steady_clock::now() < deadline;) {
    if (!running()) {
      const std::string text = log();
      return text.find("cannot bind") != std::string::npos || text.find("cannot listen") != std::string::npos
                 ? Start::PortTaken
                 : Start::Exited;
    }
    // With its output in a pipe (output_fd) there is no log to read: /health alone has to do.
    const bool named = output_fd >= 0 || log().find(ours) != std::string::npos;
    if (auto res = client.Get("/health"); named && res && res->status == 200) return Start::Ready;
    std::this_thread::sleep_for(100ms);
  }
  return Start::TimedOut;
}

ServerProcess::~ServerProcess() {
  if (running()) stop();
}

bool ServerProcess::running() {
  if (exit_status_ >= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_status_ = decode_status(status);
    return false;
  }
  return true;
}

int ServerProcess::stop(int timeout_s) {
  if (!running()) return exit_status_;
  kill(pid_, SIGTERM);
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
       std::chrono::steady_clock::now() < deadline;) {
    if (!running()) return exit_status_;
    std::this_thread::sleep_for(20ms);
  }
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  exit_status_ = decode_status(status);
  return exit_status_;
}

std::string ServerProcess::log() const { return read_file(log_path_); }

}  // namespace flashserve::test

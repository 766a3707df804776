// An HTTP client for tests that waits as long as a correct server may need on a busy machine: the
// emulated GPU under a CPU hog on 2 cores answers in tens of seconds where cpp-httplib's default read
// timeout is 5 s. A test about timeouts sets its own.
#pragma once
#include <httplib.h>

#include <string>

namespace flashserve::test {

inline constexpr int kPatientSeconds = 600;

inline httplib::Client patient_client(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(60);
  c.set_read_timeout(kPatientSeconds);
  c.set_write_timeout(kPatientSeconds);
  return c;
}

}  // namespace flashserve::test

#include "server/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace flashserve {
namespace {

std::string openssl_reason() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

}  // namespace

TlsContext::TlsContext(const std::string& cert_file, const std::string& key_file) : ctx_(SSL_CTX_new(TLS_server_method())) {
  if (!ctx_) throw std::runtime_error("TLS: cannot create a context: " + openssl_reason());
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  // Our writes are retried from the same buffer, which may have moved after growing.
  SSL_CTX_set_mode(ctx_, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_ENABLE_PARTIAL_WRITE);
  auto fail = [&](const std::string& what) {
    const std::string reason = openssl_reason();
    SSL_CTX_free(ctx_);
    throw std::runtime_error("TLS: " + what + ": " + reason);
  };
  if (SSL_CTX_use_certificate_chain_file(ctx_, cert_file.c_str()) != 1) fail("cannot load the certificate " + cert_file);
  if (SSL_CTX_use_PrivateKey_file(ctx_, key_file.c_str(), SSL_FILETYPE_PEM) != 1) fail("cannot load the key " + key_file);
  if (SSL_CTX_check_private_key(ctx_) != 1) fail("the key " + key_file + " does not match the certificate " + cert_file);
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

SSL* TlsContext::accept(int fd) const {
  SSL* ssl = SSL_new(ctx_);
  if (!ssl) return nullptr;
  SSL_set_fd(ssl, fd);
  SSL_set_accept_state(ssl);
  return ssl;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace flashserve

// TLS for the HTTP front door (OpenSSL, non-blocking, driven by our event loop), and the PEM files
// both front doors read (gRPC takes them as strings).
#pragma once
#include <string>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace flashserve {

class TlsContext {
 public:
  // Throws std::runtime_error naming the file and OpenSSL's reason when the certificate chain or
  // key cannot be loaded or do not match.
  TlsContext(const std::string& cert_file, const std::string& key_file);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // A server-side session on an accepted socket; the handshake runs inside the first reads and
  // writes. Null when OpenSSL cannot allocate one.
  SSL* accept(int fd) const;

 private:
  SSL_CTX* ctx_;
};

// The whole file; throws std::runtime_error naming it when unreadable.
std::string read_text_file(const std::string& path);

}  // namespace flashserve

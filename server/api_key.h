// The one authentication policy of both front doors: a bearer key, compared in constant time.
// Only a SHA-256 digest of the key is kept; a presented key is hashed and compared digest to
// digest with CRYPTO_memcmp, so neither its bytes nor its length show in the time taken.
#pragma once
#include <array>
#include <string>
#include <string_view>

namespace flashserve {

class ApiKey {
 public:
  ApiKey() = default;  // no key: everything is open
  explicit ApiKey(std::string_view key);
  // The key from --api-key (or $FLASHSERVE_API_KEY) or from --api-key-file (first line, trailing
  // whitespace dropped). Throws std::invalid_argument for both at once, an unreadable or empty file.
  static ApiKey from_flags(const std::string& key, const std::string& key_file);

  bool required() const { return required_; }
  // `authorization` is the whole "Authorization" header (HTTP) or "authorization" metadata (gRPC):
  // "Bearer <key>", the scheme case-insensitive.
  bool accepts(std::string_view authorization) const;
  // The key alone, as Anthropic's clients send it ("x-api-key" header).
  bool accepts_key(std::string_view key) const;

 private:
  bool required_ = false;
  std::array<unsigned char, 32> digest_{};
};

}  // namespace flashserve

#include "server/api_key.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <stdexcept>

namespace flashserve {
namespace {

std::array<unsigned char, 32> sha256(std::string_view s) {
  std::array<unsigned char, 32> d{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}

bool scheme_is_bearer(std::string_view s) {
  static constexpr std::string_view kBearer = "bearer";
  if (s.size() != kBearer.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (char(s[i] | 0x20) != kBearer[i]) return false;
  }
  return true;
}

}  // namespace

ApiKey::ApiKey(std::string_view key) : required_(true), digest_(sha256(key)) {
  if (key.empty()) throw std::invalid_argument("the API key is empty");
}

ApiKey ApiKey::from_flags(const std::string& key, const std::string& key_file) {
  if (!key.empty() && !key_file.empty()) throw std::invalid_argument("give --api-key or --api-key-file, not both");
  if (!key.empty()) return ApiKey(key);
  if (key_file.empty()) return ApiKey();
  std::ifstream in(key_file);
  std::string line;
  if (!in || !std::getline(in, line)) throw std::invalid_argument("cannot read the API key from " + key_file);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.pop_back();
  if (line.empty()) throw std::invalid_argument("the API key file " + key_file + " holds no key");
  return ApiKey(line);
}

bool ApiKey::accepts(std::string_view authorization) const {
  if (!required_) return true;
  const size_t space = authorization.find(' ');
  if (space == std::string_view::npos || !scheme_is_bearer(authorization.substr(0, space))) return false;
  return accepts_key(authorization.substr(space + 1));
}

bool ApiKey::accepts_key(std::string_view key) const {
  if (!required_) return true;
  const std::array<unsigned char, 32> given = sha256(key);
  return CRYPTO_memcmp(given.data(), digest_.data(), digest_.size()) == 0;
}

}  // namespace flashserve
